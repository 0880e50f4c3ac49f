"""Models that grow: merging shards, and the checks every update makes (docs/design.md §7).

For fixed landmarks, kernel and parameters, the fit is a sum over rows of
the pass statistics n, s, G, t (the reference row r is fixed by the
landmarks). Models fitted on disjoint data with the same landmarks therefore
merge exactly: add their statistics and solve the small problem again, in
O(m^3), without reading a row. :meth:`KernelPCA.partial_fit
<kpca_dask.KernelPCA.partial_fit>` and :meth:`KernelPCA.set_n_components
<kpca_dask.KernelPCA.set_n_components>` rest on the same sums.

The pattern for data spread over clusters or days: choose the landmarks
once, fit each shard with ``landmarks=model.landmarks_`` and
``gamma=model.gamma_`` wherever it lives, save, and merge the saved models.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..blocks.statistics import PassStatistics, combine_statistics
from ..errors import InvalidParameterError, ModelMismatchError, NoStatisticsError
from .file_checks import check_model
from .fitting import solved
from .provenance import combined, recorded_rows

__all__ = ["merge", "require_statistics", "model_differences"]


def require_statistics(model, action: str, name: str = "this model") -> PassStatistics:
    """The statistics of a fitted ``model``, or a clear error saying why ``action`` cannot run.

    The model is checked first as a loaded one is
    (:func:`kpca_dask.model.file_checks.check_model`): an attribute set by
    hand to something no fit could make is refused with a
    :class:`~kpca_dask.errors.ModelFormatError` before it is added to.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> model = KernelPCA(n_components=1, n_landmarks=5).fit(np.eye(6))
    >>> require_statistics(model, "merge").n_samples
    6
    """
    check_is_fitted(model)
    check_model(model, name)
    stats = model.statistics_
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
    found = []
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
    model = solved(first.model_, combine_statistics(*totals))  # the first model's settings
    merged = copy.deepcopy(first)  # the first model's parameters and output settings
    merged.model_ = model.replace(
        row_provenance=provenance, fit_seconds=float(sum(m.fit_seconds_ for m in models)))
    return merged


def _kernel_name(kernel) -> str:
    return kernel if isinstance(kernel, str) else getattr(kernel, "__qualname__", repr(kernel))
