"""Spatial patterns of components: covariance, correlation and EOF maps, as EOF users read them.

For each component, the covariance between its score scaled to unit
variance and each feature of the unweighted input, or their correlation
(ddof = 1; docs/design.md §12): eofs' ``eofsAsCovariance(pcscaling=1)`` and
``eofsAsCorrelation``; other ``pcscaling`` scale the score as eofs' ``pcs``
does. ``kind="eof"`` is eofs' ``eofs(eofscaling)``: cov(y_j, w x) / λ_j over
the weighted features, the regression of the weighted field on the
component (the unit EOF for a linear kernel; docs/design.md §15). One lazy
pass over the data: each row block gives its scores and its features side by
side (:mod:`kpca_dask.engine.exact.cross_moments`). Both estimators' ``patterns``
check the kind and scalings (:func:`check_kind`), then call
:func:`patterns_of` with the unweighted rows of
:func:`~kpca_dask.model.inputs.method_input` and their own embedding.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .._parallel import computed
from ..engine.exact.cross_moments import PATTERN_KINDS, pattern_maps
from ..errors import InvalidParameterError
from ..io.labelled import MODE_DIM, modes
from ..io.preprocessing.field_inputs import stacked_positions, weighted_rows
from ..io.preprocessing.field_sets import field_output
from ..io.preprocessing.fields import FeatureLayout
from ..model.inputs import Rows
from .scalings import check_scaling, eof_divisors, score_factors

__all__ = ["KINDS", "MAP_NAMES", "check_kind", "patterns_of"]

#: The maps ``patterns`` gives.
KINDS = PATTERN_KINDS + ("eof",)
#: The name of each kind's labelled maps (xeofs calls the EOFs ``components``).
MAP_NAMES = {"covariance": "covariance_maps", "correlation": "correlation_maps",
             "eof": "components"}


def check_kind(kind: str, pcscaling: int | None = None,
               eofscaling: int | None = None) -> tuple[int | None, int | None]:
    """Refuse an unknown kind, or a scaling it does not take; the scalings it uses.

    ``pcscaling`` scales the scores of ``"covariance"`` (default 1: unit
    variance), ``eofscaling`` the maps of ``"eof"`` (default 0: unit EOFs).

    Examples
    --------
    >>> check_kind("correlation"), check_kind("eof", eofscaling=2)
    ((None, None), (None, 2))
    """
    if kind not in KINDS:
        raise InvalidParameterError(
            f"kind must be {', '.join(map(repr, KINDS[:-1]))} or {KINDS[-1]!r}; got {kind!r}.")
    takes = {"covariance": "pcscaling", "eof": "eofscaling"}.get(kind)
    for name, value in (("pcscaling", pcscaling), ("eofscaling", eofscaling)):
        if value is not None and name != takes:
            raise InvalidParameterError(
                f"{name} does not apply to kind={kind!r}: pcscaling scales the scores of "
                "kind='covariance', eofscaling the maps of kind='eof'.")
    if kind == "covariance":
        return check_scaling(1 if pcscaling is None else pcscaling, "pcscaling"), None
    if kind == "eof":
        return None, check_scaling(0 if eofscaling is None else eofscaling, "eofscaling")
    return None, None


def patterns_of(rows: Rows, kind: str, *, layout: FeatureLayout | None,
                embedding: Callable, variances: np.ndarray | None = None,
                pcscaling: int | None = None, eofscaling: int | None = None):
    """The maps of :meth:`KernelPCA.patterns <kpca_dask.KernelPCA.patterns>` over ``rows``.

    ``rows`` are the unweighted rows of the model's features (and the DataArray
    outputs are labelled like), as
    :func:`~kpca_dask.model.inputs.method_input` gives them with
    ``weighted=False``; ``layout`` the fitted feature layout (None for plain
    arrays); ``embedding(rows)`` the lazy embedding of weighted dask rows;
    ``variances`` each component's ``explained_variance_`` (for the scalings).

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
    pcscaling, eofscaling = check_kind(kind, pcscaling, eofscaling)
    features, like = rows.data, rows.like
    weighted = weighted_rows(features, layout)
    Y = embedding(weighted)
    q = Y.shape[1]
    if kind == "eof":
        maps = pattern_maps(Y, weighted, "cross-covariance") / eof_divisors(
            variances, eofscaling)[:, None]
    elif kind == "covariance" and pcscaling != 1:
        maps = pattern_maps(Y * score_factors(variances, pcscaling), features,
                            "cross-covariance")
    else:
        maps = pattern_maps(Y, features, kind)
    if layout is not None and layout.dims and like is None:
        maps = stacked_positions(maps, layout)
    # The input's kind: in memory in (numpy, a DataArray of numpy), in memory out; dask,
    # a store or a dask-backed DataArray in, a lazy result out.
    maps = maps if rows.is_lazy else computed(maps)
    if like is None or layout is None or not layout.dims:
        return maps
    attrs = {"kind": kind, "ddof": 1}
    attrs.update({"pcscaling": pcscaling} if pcscaling is not None else {})
    attrs.update({"eofscaling": eofscaling} if eofscaling is not None else {})
    # Only a covariance with unit-variance scores is in the field's units; a correlation
    # and a unit EOF have none, other scalings the field's times the scores'.
    keep = ("units",) if kind == "covariance" and pcscaling == 1 else ()
    return field_output(maps, layout, {MODE_DIM: modes(q)}, name=MAP_NAMES[kind],
                        attrs=attrs, keep=keep)
