"""Models that grow: more rows, another number of components, merged shards.

For fixed landmarks, kernel and parameters the pass statistics are sums over
rows (docs/design.md §7), so a batch's statistics add to the model's and the
small problem is solved again (:func:`kpca_dask.model.fitting.solved`); each
call makes a new :class:`~kpca_dask.model.fitted.FittedModel`.
:meth:`KernelPCA.partial_fit <kpca_dask.KernelPCA.partial_fit>` adds rows,
:meth:`KernelPCA.set_n_components <kpca_dask.KernelPCA.set_n_components>`
re-solves, and :func:`merge` adds the statistics of models fitted on
disjoint data with the same landmarks (exactly, in O(m^3), without reading a
row).

The pattern for data spread over clusters or days: choose the landmarks
once, fit each shard with ``landmarks=model.landmarks_`` and
``gamma=model.gamma_`` wherever it lives, save, and merge the saved models.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import dask.array as da
import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..blocks.statistics import PassStatistics, combine_statistics
from ..engine.solve.on_cluster import is_held, summed_statistics
from ..errors import (
    InvalidParameterError,
    ModelMismatchError,
    NoStatisticsError,
    ParametersChangedWarning,
)
from ..io.preprocessing.field_inputs import layout_differences
from .checks import check_fitted_estimator
from .fitted import FitSettings, FittedModel
from .fitting import solved, with_rows_added
from .held_statistics import live_statistics
from .inputs import batch_input, row_range
from .parameters import rcond_for
from .precomputed import PRECOMPUTED, refuse_growth
from .provenance import combined, recorded_rows, source_of

__all__ = ["Batch", "batch_of", "partial_fitted", "warn_of_parameters_set_since",
           "merge", "require_statistics", "model_differences"]

#: The parameters a re-solve with more rows would read, and where the fitted model keeps them.
_SETTINGS_READ_BY_UPDATES = ("n_components", "remove_zero_eig", "dtype", "rcond")


def warn_of_parameters_set_since(settings: FitSettings, params: dict) -> None:
    """Warn when a parameter that adding rows would use differs from the fitted ``settings``.

    The fitted settings win (they are what the statistics were made and solved
    with); the warning says so and how to use the new value. Called by
    ``partial_fit`` itself, so that the warning points at its caller.
    """
    changed = []
    for name in _SETTINGS_READ_BY_UPDATES:
        value, fitted = params[name], getattr(settings, name)
        if name == "rcond":
            value = rcond_for(value, settings.dtype) if value is None else value
        if value != fitted:
            changed.append(f"{name}={value!r} (fitted with {fitted!r})")
    if changed:
        warnings.warn(
            "partial_fit adds rows to the model as it was fitted; parameters set since the fit "
            f"are not used: {', '.join(changed)}. Call fit to use them (set_n_components "
            "re-solves for another n_components without a pass).",
            ParametersChangedWarning, stacklevel=3)


class Batch(NamedTuple):
    """The rows a ``partial_fit`` adds, and where they come from (for ``row_provenance_``)."""

    rows: da.Array  # rows of the model's features, those selected by ``rows=``
    source: dict  # the whole input's provenance entry (kpca_dask.model.provenance)
    start: int
    stop: int
    repeatable: bool  # an in-memory batch given whole: it may be given again


def batch_of(model: FittedModel, X: Any, rows: tuple[int, int] | None) -> Batch:
    """The rows ``start:stop`` of ``X`` that a ``partial_fit`` of ``model`` adds, checked.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> model = KernelPCA(n_components=1, n_landmarks=5, solver="nystrom").fit(np.eye(6)).model_
    >>> batch = batch_of(model, np.eye(6), (1, 4))
    >>> batch.rows.shape, batch.start, batch.stop, batch.repeatable
    ((3, 6), 1, 4, False)
    """
    given = batch_input(model.layout, X)
    X = given.data
    source = source_of(X)  # of the whole input, before the rows are selected
    start, stop = row_range(rows, X.shape[0])
    X = X if (start, stop) == (0, X.shape[0]) else X[start:stop]
    if model.kernel == PRECOMPUTED:
        refuse_growth()
    return Batch(X, source, start, stop, repeatable=rows is None and not given.is_lazy)


def partial_fitted(model: FittedModel, batch: da.Array, statistics: PassStatistics,
                   provenance: dict, *, started: float) -> FittedModel:
    """``model`` with the rows ``batch`` added to its ``statistics`` (one pass) and the small
    problem solved again; ``provenance`` the rows it then holds, ``started`` when the call
    began (its time adds to ``fit_seconds``).

    Examples
    --------
    >>> import time
    >>> from kpca_dask import KernelPCA
    >>> model = KernelPCA(n_components=1, n_landmarks=5, solver="nystrom").fit(np.eye(6)).model_
    >>> grown = partial_fitted(model, da.from_array(np.eye(6)[:2]), model.statistics, None,
    ...                        started=time.perf_counter())
    >>> grown.n_samples
    8
    """
    stats = with_rows_added(model.replace(statistics=statistics), batch)
    grown = solved(model, stats)
    return grown.replace(row_provenance=provenance,
                         fit_seconds=grown.fit_seconds + time.perf_counter() - started)


def require_statistics(model, action: str, name: str = "this model") -> PassStatistics:
    """The statistics of a fitted ``model``, or a clear error saying why ``action`` cannot run.

    The model is checked first as a loaded one is
    (:func:`kpca_dask.model.checks.check_fitted_estimator`): an attribute set by
    hand to something no fit could make is refused with a
    :class:`~kpca_dask.errors.ModelFormatError` before it is added to.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> model = KernelPCA(n_components=1, n_landmarks=5, solver="nystrom").fit(np.eye(6))
    >>> require_statistics(model, "merge").n_samples
    6
    """
    check_is_fitted(model)
    if not isinstance(model.model_, FittedModel):  # an exact model (KernelPCA's Gram way)
        raise NoStatisticsError(
            f"Cannot {action} {name}: it is an exact model (ExactKernelPCA, or KernelPCA "
            "fitted by the Gram way, solver_ = 'gram'), which keeps the n x n kernel "
            'matrix\'s eigenvectors, not landmark sums. Fit KernelPCA(solver="nystrom") to '
            "add rows, merge or re-solve.")
    check_fitted_estimator(model, name)
    stats = live_statistics(model.model_, action, name)
    if stats is None:
        raise NoStatisticsError(
            f"Cannot {action} {name}: it keeps no pass statistics (it was saved in "
            "model format version 1, before models kept them). Fit it again with this "
            "kpca-dask (e.g. with landmarks=model.landmarks_ and gamma=model.gamma_ to keep "
            "its landmarks) and save it; the new file can then be updated, merged and "
            "re-solved.")
    return stats


def model_differences(first, other) -> list[str]:
    """What keeps two fitted models from being merged, one phrase per difference.

    Landmarks, kernel, kernel parameters, features, kernel-block dtype and the
    K_mm cut-off ``rcond`` must all be the same: each changes either the
    statistics a row contributes or how they are solved.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(30, 2))
    >>> a = KernelPCA(n_components=1, gamma=0.5, n_landmarks=5, random_state=0).fit(X)
    >>> b = KernelPCA(n_components=1, gamma=0.5, landmarks=a.landmarks_).fit(X[:10])
    >>> model_differences(a, b)
    []
    >>> c = KernelPCA(n_components=1, gamma=0.25, landmarks=a.landmarks_).fit(X[:10])
    >>> model_differences(a, c)
    ['kernel parameter gamma is 0.5 in one model but 0.25 in the other']
    """
    found = layout_differences(first.model_.layout, other.model_.layout)
    if _kernel_name(first.kernel_) != _kernel_name(other.kernel_):
        return [f"the kernel is {_kernel_name(first.kernel_)!r} in one model but "
                f"{_kernel_name(other.kernel_)!r} in the other"]
    if first.n_features_in_ != other.n_features_in_:
        return [f"one model has {first.n_features_in_} features, the other "
                f"{other.n_features_in_}"]
    a, b = first.kernel_params_, other.kernel_params_
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            found.append(f"kernel parameter {name} is {a.get(name)!r} in one model but "
                         f"{b.get(name)!r} in the other")
    for name in ("dtype", "rcond"):  # as fitted: a parameter set since changes neither
        mine, theirs = getattr(first.fit_settings_, name), getattr(other.fit_settings_, name)
        if mine != theirs:
            found.append(f"{name} is {mine!r} in one model but {theirs!r} in the other")
    Z, Z_other = np.asarray(first.landmarks_), np.asarray(other.landmarks_)
    if Z.shape != Z_other.shape:
        found.append(f"the landmarks differ: {Z.shape[0]} in one model, {Z_other.shape[0]} "
                     "in the other")
    elif not np.array_equal(Z, Z_other):
        rows = int((~(Z == Z_other).all(axis=1)).sum())
        found.append(f"the landmarks differ ({rows} of {Z.shape[0]} landmark points are not "
                     "the same)")
    elif not found and not np.array_equal(first.statistics_.reference,
                                          other.statistics_.reference):
        # Same landmarks and kernel give the same r, unless a kernel's numerics changed.
        found.append("the reference rows of the statistics differ")
    return found


def merge(models: Sequence, *, names: Sequence[str] | None = None) -> object:
    """The model of the union of disjoint data sets, from models fitted on each.

    The merged ``row_provenance_`` is the union of the models' rows; rows
    recorded in two of them are refused (:mod:`kpca_dask.model.provenance`).

    Adds the pass statistics of the models and solves the small problem
    again: equal (to rounding, ~1e-12) to one fit on all their rows with the
    same landmarks, kernel and parameters. Nothing is read from the data.

    Parameters
    ----------
    models : sequence of KernelPCA
        Fitted models (or loaded ones, format version 2 or later) with the same
        landmarks, kernel, kernel parameters, features, ``dtype`` and
        ``rcond``; fit each shard with ``landmarks=first.landmarks_`` and
        ``gamma=first.gamma_`` to get them.
    names : sequence of str, optional
        What to call the models in error messages (e.g. their paths);
        default "model 0", "model 1", ...

    Returns
    -------
    KernelPCA
        A new model (the inputs are unchanged) with the first model's
        parameters, ``n_components`` included; ``n_samples_fit_`` is the total
        of the rows seen and ``fit_seconds_`` the sum of the fit times.

    Raises
    ------
    ModelMismatchError
        Two models differ; the message names how.
    NoStatisticsError
        A model keeps no statistics (a version-1 model file).
    OverlappingRowsError
        Two models hold some of the same rows; the message names them.

    Examples
    --------
    >>> import numpy as np, kpca_dask
    >>> X = np.random.default_rng(0).normal(size=(300, 3))
    >>> first = kpca_dask.KernelPCA(n_components=2, gamma=0.5, n_landmarks=40,
    ...                             random_state=0).fit(X[:100])
    >>> shard = kpca_dask.KernelPCA(n_components=2, gamma=first.gamma_,
    ...                             landmarks=first.landmarks_).fit(X[100:])
    >>> merged = kpca_dask.merge([first, shard])
    >>> whole = kpca_dask.KernelPCA(n_components=2, gamma=first.gamma_,
    ...                             landmarks=first.landmarks_).fit(X)
    >>> merged.n_samples_fit_, bool(np.allclose(merged.eigenvalues_, whole.eigenvalues_,
    ...                                         rtol=1e-10))
    (300, True)
    """
    models = list(models)
    if not models:
        raise InvalidParameterError("merge needs at least one fitted model; got none.")
    names = list(names) if names is not None else [f"model {i}" for i in range(len(models))]
    totals = [require_statistics(model, "merge", name) for model, name in zip(models, names)]
    first = models[0]
    for name, other in zip(names[1:], models[1:]):
        differences = model_differences(first, other)
        if differences:
            raise ModelMismatchError(
                f"{name} cannot be merged with {names[0]}: " + "; ".join(differences)
                + ". Only models with the same landmarks, kernel and parameters merge: fit "
                "every shard with landmarks=first.landmarks_ and gamma=first.gamma_ (and the "
                "same kernel, dtype and rcond).")
    # Refused before anything is solved: an overlap would weight its rows twice.
    provenance = combined([recorded_rows(model) for model in models], names=names)
    total = (summed_statistics(*totals) if any(map(is_held, totals))
             else combine_statistics(*totals))
    model = solved(first.model_, total)  # the first model's settings
    merged = copy.deepcopy(first)  # the first model's parameters and output settings
    merged.model_ = model.replace(
        row_provenance=provenance, fit_seconds=float(sum(m.fit_seconds_ for m in models)))
    return merged


def _kernel_name(kernel) -> str:
    return kernel if isinstance(kernel, str) else getattr(kernel, "__qualname__", repr(kernel))
