"""Spatial patterns of components: covariance and correlation maps, as EOF users read them.

For each component, the covariance between its score scaled to unit
variance and each feature of the unweighted input, or their correlation
(ddof = 1; docs/design.md §12): eofs' ``eofsAsCovariance(pcscaling=1)`` and
``eofsAsCorrelation``. One lazy pass over the data: each row block gives its
scores and its features side by side (:mod:`kpca_dask.engine.cross_moments`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..engine.cross_moments import PATTERN_KINDS, pattern_maps
from ..errors import InvalidParameterError
from ..io.fields import as_field
from ..io.frames import table_input
from .field_inputs import stacked_positions, weighted_rows
from .inputs import as_rows

__all__ = ["PatternsMixin"]


class PatternsMixin:
    """``patterns`` for an estimator with ``_model_rows``, ``_embedding`` and ``_layout``."""

    def patterns(self, X, kind: Literal["covariance", "correlation"] = "covariance"):
        """Map of each component over the features: covariance or correlation with its score.

        ``"covariance"``: cov(y_j / sd(y_j), x), the covariance of each feature
        of the unweighted input with the score of component j scaled to unit
        variance over the rows of ``X``, in the units of the input (eofs'
        ``eofsAsCovariance(pcscaling=1)``); ``"correlation"``: corr(y_j, x)
        (eofs' ``eofsAsCorrelation``). ddof = 1. Computed lazily, in one pass
        over ``X``.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            The data the maps are taken over, usually the training data.
        kind : {"covariance", "correlation"}, default="covariance"

        Returns
        -------
        patterns : dask array of shape (``n_components_``, n_features) or xarray.DataArray
            For a model fitted on a field, a DataArray (component, then the feature
            dims) with the fit's coordinates and NaN on the mask; for arrays, a
            lazy dask array. A feature or score of zero variance gives NaN.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import KernelPCA
        >>> X = np.random.default_rng(0).normal(size=(200, 3)) * [3.0, 1.0, 0.1]
        >>> kpca = KernelPCA(n_components=2, kernel="linear", n_landmarks=200).fit(X)
        >>> np.round(np.abs(kpca.patterns(X, kind="correlation").compute()[0]), 2)
        array([1.  , 0.01, 0.09])
        """
        check_is_fitted(self)
        if kind not in PATTERN_KINDS:
            raise InvalidParameterError(
                f"kind must be {' or '.join(map(repr, PATTERN_KINDS))}; got {kind!r}.")
        layout = self._layout()
        X, frame = table_input(self, X)
        rows, like = self._model_rows(X, frame, weighted=False)
        rows, _ = as_rows(rows, frame)
        Y = self._embedding(weighted_rows(rows, layout), frame)
        q = Y.shape[1]
        maps = pattern_maps(Y, rows, kind)
        if layout is None or not layout.dims:
            return maps
        if like is None:
            return stacked_positions(maps, layout)
        return as_field(maps, layout, {"component": np.arange(q)}, name=kind,
                        attrs={"kind": kind, "ddof": 1})
