"""Spatial patterns of components: covariance and correlation maps, as EOF users read them.

For each component, the covariance between its score scaled to unit
variance and each feature of the unweighted input, or their correlation
(ddof = 1; docs/design.md §12): eofs' ``eofsAsCovariance(pcscaling=1)`` and
``eofsAsCorrelation``. One lazy pass over the data: each row block gives its
scores and its features side by side (:mod:`kpca_dask.engine.cross_moments`).
Both estimators' ``patterns`` check the kind (:func:`check_kind`), then call
:func:`patterns_of` with the unweighted rows of
:func:`~kpca_dask.model.inputs.method_input` and their own embedding.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..engine.cross_moments import PATTERN_KINDS, pattern_maps
from ..errors import InvalidParameterError
from ..io.fields import FeatureLayout
from .field_inputs import stacked_positions, weighted_rows
from .inputs import Rows
from .multiple_fields import field_output

__all__ = ["check_kind", "patterns_of"]


def check_kind(kind: str) -> None:
    """Refuse a kind of pattern other than covariance and correlation.

    Examples
    --------
    >>> check_kind("correlation")
    """
    if kind not in PATTERN_KINDS:
        raise InvalidParameterError(
            f"kind must be {' or '.join(map(repr, PATTERN_KINDS))}; got {kind!r}.")


def patterns_of(rows: Rows, kind: str, *, layout: FeatureLayout | None,
                embedding: Callable):
    """The maps of :meth:`KernelPCA.patterns <kpca_dask.KernelPCA.patterns>` over ``rows``.

    ``rows`` are the unweighted rows of the model's features (and the DataArray
    outputs are labelled like), as
    :func:`~kpca_dask.model.inputs.method_input` gives them with
    ``weighted=False``; ``layout`` the fitted feature layout (None for plain
    arrays); ``embedding(rows)`` the lazy embedding of weighted dask rows.

    Examples
    --------
    >>> from functools import partial
    >>> from kpca_dask import KernelPCA
    >>> from kpca_dask.model.inputs import method_input
    >>> from kpca_dask.model.outputs import embedding
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> kpca = KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X)
    >>> rows = method_input(kpca, None, X, weighted=False)
    >>> patterns_of(rows, "correlation", layout=None,
    ...             embedding=partial(embedding, kpca.model_)).shape
    (2, 3)
    """
    check_kind(kind)
    features, like = rows.data, rows.like
    Y = embedding(weighted_rows(features, layout))
    q = Y.shape[1]
    maps = pattern_maps(Y, features, kind)
    if layout is None or not layout.dims:
        return maps
    if like is None:
        return stacked_positions(maps, layout)
    return field_output(maps, layout, {"component": np.arange(q)}, name=kind,
                        attrs={"kind": kind, "ddof": 1})
