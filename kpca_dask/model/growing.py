"""Models that grow: more rows for a fitted model, another number of components.

For fixed landmarks, kernel and parameters the pass statistics are sums over
rows (docs/design.md §7), so a batch's statistics add to the model's and the
small problem is solved again (:func:`kpca_dask.model.fitting.solved`); each
call makes a new :class:`~kpca_dask.model.fitted.FittedModel`.
"""

from __future__ import annotations

import time
import warnings

from ..errors import ParametersChangedWarning
from ..io.frames import check_feature_names
from ..validation import check_n_features
from .fitting import solved, with_rows_added
from .inputs import as_fit_input, held_in_memory, row_range
from .parameters import check_params, rcond_for
from .precomputed import PRECOMPUTED, refuse_growth
from .provenance import recorded_rows, source_of, with_rows
from .updates import require_statistics

__all__ = ["GrowingMixin", "warn_of_parameters_set_since"]

#: The parameters a re-solve with more rows would read, and where the fitted model keeps them.
_SETTINGS_READ_BY_UPDATES = ("n_components", "remove_zero_eig", "dtype", "rcond")


def warn_of_parameters_set_since(estimator) -> None:
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
        :class:`~kpca_dask.errors.ParametersChangedWarning`. After any sequence of batches the model
        equals a :meth:`fit` on their concatenation with
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
        require_statistics(self, "add rows to")
        check_n_features(X, self.model_.n_features, type(self).__name__)
        # Refused before the pass: rows counted already would be weighted twice, unless
        # they are an in-memory batch given whole again (scikit-learn's partial_fit).
        provenance = with_rows(recorded_rows(self), source, start, stop,
                               repeatable=rows is None and held_in_memory(table))
        warn_of_parameters_set_since(self)
        stats = with_rows_added(self.model_, X)
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
