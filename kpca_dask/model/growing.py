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

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..blocks.statistics import PassStatistics, combine_statistics
from ..engine.cluster_solve import is_held, summed_statistics
from ..errors import (
    InvalidParameterError,
    ModelMismatchError,
    NoStatisticsError,
    ParametersChangedWarning,
)
from ..io.frames import check_feature_names
from ..validation import check_n_features
from .checks import check_model
from .field_inputs import layout_differences, model_rows
from .fitting import solved, with_rows_added
from .held_statistics import live_statistics
from .inputs import as_fit_input, held_in_memory, is_xarray, row_range
from .parameters import check_params, rcond_for
from .precomputed import PRECOMPUTED, refuse_growth
from .provenance import combined, recorded_rows, source_of, with_rows

__all__ = ["GrowingMixin", "merge", "require_statistics", "model_differences"]

#: The parameters a re-solve with more rows would read, and where the fitted model keeps them.
_SETTINGS_READ_BY_UPDATES = ("n_components", "remove_zero_eig", "dtype", "rcond")


def _warn_of_parameters_set_since(estimator) -> None:
    """Warn when a parameter that adding rows would use differs from the fitted model's.

    The fitted settings win (they are what the statistics were made and solved
    with); the warning says so and how to use the new value.
    """
    settings = estimator.model_.settings
    changed = []
    for name in _SETTINGS_READ_BY_UPDATES:
        value, fitted = getattr(estimator, name), getattr(settings, name)
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


class GrowingMixin:
    """partial_fit and set_n_components of an estimator whose fitted model is ``model_``."""

    def partial_fit(self, X, y=None, *, rows: tuple[int, int] | None = None) -> "GrowingMixin":
        """Add a batch of rows to the model: for data that grow or arrive in batches.

        The first call on an unfitted model is :meth:`fit` on the batch: it
        chooses the landmarks from it (with the configured strategy, or takes
        the explicit points) and resolves ``gamma`` from it. Every later call
        keeps the landmarks, the kernel parameters and the settings of the fit
        (``fit_settings_``: n_components, remove_zero_eig, dtype, rcond), adds
        the batch's pass statistics to the model's (one pass over the batch)
        and solves the small m x m problem again. A parameter set since the
        fit takes effect at the next :meth:`fit`, as in scikit-learn; one that
        this call would have used is named in a
        :class:`~kpca_dask.errors.ParametersChangedWarning`. After any sequence
        of batches the model equals a :meth:`fit` on their concatenation with
        ``landmarks=landmarks_`` and ``gamma=gamma_`` (to rounding, ~1e-12);
        it can transform and be saved after every call. A fitted or loaded
        model (format version 2) takes more rows the same way.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_batch, ``n_features_in_``); any input :meth:`fit` takes.
        y : ignored
        rows : (int, int), optional
            Add only rows ``start:stop`` of ``X``: the way to add the new rows
            of a stored array that grows, so that the model records which
            rows of it it holds (``row_provenance_``, see
            :mod:`kpca_dask.model.provenance`). Default: every row of ``X``.

        Returns
        -------
        self : KernelPCA

        Raises
        ------
        InvalidInputError
            The batch has another number of features than the model.
        NoStatisticsError
            The model keeps no statistics (loaded from a version-1 file).
        OverlappingRowsError
            The model has counted some of these rows already: rows of a
            stored array or URL it holds, or ``rows=`` it holds.

        Warns
        -----
        RepeatedRowsWarning
            An in-memory batch (numpy, pandas, scipy.sparse) given whole
            again: its rows count once more, as in scikit-learn.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import KernelPCA
        >>> X, kpca = np.random.default_rng(0).normal(size=(600, 3)), KernelPCA(
        ...     n_components=2, gamma=0.5, n_landmarks=50, random_state=0)
        >>> for batch in np.array_split(X, 3):
        ...     kpca = kpca.partial_fit(batch)
        >>> kpca.n_samples_fit_
        600
        >>> refit = KernelPCA(n_components=2, gamma=kpca.gamma_, landmarks=kpca.landmarks_).fit(X)
        >>> bool(np.allclose(kpca.eigenvalues_, refit.eigenvalues_, rtol=1e-10))
        True
        """
        started = time.perf_counter()
        fitted = self.__dict__.get("model_") is not None
        if fitted:
            check_feature_names(self, X, reset=False)
        table = X
        layout = self.model_.layout if fitted else None
        if not fitted and is_xarray(X) or layout is not None and layout.dims:
            X = _field_batch(self, X, rows)
            if not fitted:
                return self
        X = as_fit_input(X, min_samples=1)
        source = source_of(X)  # of the whole input, before the rows are selected
        start, stop = row_range(rows, X.shape[0])
        whole = (start, stop) == (0, X.shape[0])
        X = X if whole else X[start:stop]
        if not fitted:
            self.fit(table if whole else X)  # a whole table keeps its feature names
            self.model_ = self.model_.replace(row_provenance=with_rows(None, source, start, stop))
            return self
        if self.model_.kernel == PRECOMPUTED:
            refuse_growth()
        total = require_statistics(self, "add rows to")
        check_n_features(X, self.model_.n_features, type(self).__name__)
        # Refused before the pass: rows counted already would be weighted twice, unless
        # they are an in-memory batch given whole again (scikit-learn's partial_fit).
        provenance = with_rows(recorded_rows(self), source, start, stop,
                               repeatable=rows is None and held_in_memory(table))
        _warn_of_parameters_set_since(self)
        stats = with_rows_added(self.model_.replace(statistics=total), X)
        model = solved(self.model_, stats)
        self.model_ = model.replace(row_provenance=provenance,
                                    fit_seconds=model.fit_seconds + time.perf_counter() - started)
        return self

    def set_n_components(self, n_components: int | float | None) -> "GrowingMixin":
        """Re-solve the fitted model for another ``n_components``, without reading the data.

        The stored pass statistics (:attr:`statistics_`) hold everything the
        small problem needs, so another number of components costs O(m^3),
        not a pass: the result equals a fresh fit with the same landmarks and
        ``n_components`` (to 1e-12). ``n_components`` is set as well, so the
        parameters and the fitted state agree, as after a fit. The name
        follows scikit-learn's ``set_params``/``set_output``: a setter that
        returns ``self``; unlike ``set_params(n_components=...)``, which by
        scikit-learn's contract only takes effect at the next fit, it changes
        the fitted model now.

        Parameters
        ----------
        n_components : int, float in (0, 1) or None
            As in the constructor: a number of components, a fraction of the
            variance to explain, or None for every positive eigenvalue.

        Returns
        -------
        self : KernelPCA

        Raises
        ------
        NoStatisticsError
            The model keeps no statistics (loaded from a version-1 file).

        Warns
        -----
        ZeroEigenvalueWarning
            An int ``n_components`` above the number of positive eigenvalues:
            the extra components have eigenvalue 0 (dropped with
            ``remove_zero_eig=True``), as in :meth:`fit`.

        Examples
        --------
        >>> import numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(300, 3))
        >>> kpca = kpca_dask.KernelPCA(n_components=2, gamma=0.5, n_landmarks=50, random_state=0)
        >>> kpca.fit(X).set_n_components(0.9).n_components_
        22
        >>> kpca.transform(X).shape
        (300, 22)
        """
        check_params({"n_components": n_components})
        stats = require_statistics(self, "re-solve")
        self.model_ = solved(self.model_, stats, n_components=n_components)
        self.n_components = n_components
        return self


def require_statistics(model, action: str, name: str = "this model") -> PassStatistics:
    """The statistics of a fitted ``model``, or a clear error saying why ``action`` cannot run.

    The model is checked first as a loaded one is
    (:func:`kpca_dask.model.checks.check_model`): an attribute set by
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
    stats = live_statistics(model.model_, action, name)
    if stats is None:
        raise NoStatisticsError(
            f"Cannot {action} {name}: it keeps no pass statistics (it was saved in "
            "model format version 1, before models kept them). Fit it again with this "
            "kpca-dask (e.g. with landmarks=model.landmarks_ and gamma=model.gamma_ to keep "
            "its landmarks) and save it; the new file can then be updated, merged and "
            "re-solved.")
    return stats


def _field_batch(estimator, X, rows):
    """A batch of a field: its checked rows for a fitted model (``rows`` are then selected
    from them, as from an array's); the first batch is a fit of the whole field."""
    if estimator.__dict__.get("model_") is not None:
        return model_rows(estimator.model_.layout, X)[0]
    if rows is not None:
        raise InvalidParameterError(
            "rows=(start, stop) of a first batch selects rows of an array; select the "
            "samples of a DataArray with X.isel(...) instead.")
    estimator.fit(X)
    return None


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
