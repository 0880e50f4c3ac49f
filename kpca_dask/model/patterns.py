"""Spatial patterns of components: covariance and correlation maps, as EOF users read them.

For each component, the covariance between its score scaled to unit
variance and each feature of the unweighted input, or their correlation
(ddof = 1; docs/design.md §12): eofs' ``eofsAsCovariance(pcscaling=1)`` and
``eofsAsCorrelation``. One lazy pass over the data: each row block gives its
scores and its features side by side (:mod:`kpca_dask.engine.cross_moments`).
Both estimators' ``patterns`` call :func:`patterns_of` with their own rows
and embedding.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..engine.cross_moments import PATTERN_KINDS, pattern_maps
from ..errors import InvalidParameterError
from ..io.fields import FeatureLayout, as_field
from ..io.frames import table_input
from .field_inputs import stacked_positions, weighted_rows
from .inputs import as_rows

__all__ = ["patterns_of"]


def patterns_of(estimator: Any, X: Any, kind: str, *, layout: FeatureLayout | None,
                rows: Callable, embedding: Callable):
    """The maps of :meth:`KernelPCA.patterns <kpca_dask.KernelPCA.patterns>` for a fitted
    ``estimator``, over the rows of ``X``.

    ``estimator`` is what a table's column names are checked against;
    ``layout`` its fitted feature layout (None for plain arrays);
    ``rows(X, frame=..., weighted=False)`` gives ``X`` as rows of its features
    and the DataArray outputs are labelled like; ``embedding(rows, frame)``
    the lazy embedding of weighted rows.

    Examples
    --------
    >>> from functools import partial
    >>> from kpca_dask import KernelPCA
    >>> from kpca_dask.model.field_inputs import model_rows
    >>> from kpca_dask.model.outputs import embedding
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> kpca = KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X)
    >>> patterns_of(kpca, X, "correlation", layout=None, rows=partial(model_rows, None),
    ...             embedding=partial(embedding, kpca.model_)).shape
    (2, 3)
    """
    if kind not in PATTERN_KINDS:
        raise InvalidParameterError(
            f"kind must be {' or '.join(map(repr, PATTERN_KINDS))}; got {kind!r}.")
    X, frame = table_input(estimator, X)
    features, like = rows(X, frame=frame, weighted=False)
    features, _ = as_rows(features, frame)
    Y = embedding(weighted_rows(features, layout), frame)
    q = Y.shape[1]
    maps = pattern_maps(Y, features, kind)
    if layout is None or not layout.dims:
        return maps
    if like is None:
        return stacked_positions(maps, layout)
    return as_field(maps, layout, {"component": np.arange(q)}, name=kind,
                    attrs={"kind": kind, "ddof": 1})
