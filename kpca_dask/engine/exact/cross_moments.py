"""Covariances between component scores and features, in one pass over row blocks.

Each row block gives, for each chunk of its features, its count, means and
centred sums of squares and of cross-products of the scores y (q) and the
features x of the chunk (p_c); the blocks of a chunk are merged pairwise by
the update of Chan, Golub and LeVeque (docs/design.md §12), which keeps the
digits that ``sum(y x) - n mean(y) mean(x)`` would lose for data far from
zero. :func:`patterns_of` turns a chunk's merged sums into its covariance
maps (scores scaled to unit variance) or correlation maps, ddof = 1: no task
holds more than one chunk's q x p_c.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed

from ..._compat import independent_copy
from ..._memory import SizedByFields
from ..passes.nystrom import chain_heads, pass_plan, reads_inlined

__all__ = ["CrossMoments", "block_moments", "merge_moments", "added_moments", "cross_moments",
           "pattern_maps", "patterns_of", "PATTERN_KINDS", "MOMENT_KINDS"]

#: What :func:`patterns_of` can give; "cross-covariance" is cov(y_j, x) itself.
PATTERN_KINDS = ("covariance", "correlation")
MOMENT_KINDS = PATTERN_KINDS + ("cross-covariance",)
#: Chains' moments one node of the merge tree adds up.
MERGE_FAN_IN = 2
#: Bytes of a block's features turned into float64 at once by :func:`block_moments`.
PANEL_BYTES = 2**24


@dataclass(frozen=True)
class CrossMoments(SizedByFields):
    """Count, means and centred sums of the scores y and features x of some rows (float64)."""

    n: int
    mean_y: np.ndarray  # (q,)
    mean_x: np.ndarray  # (p,)
    squares_y: np.ndarray  # sum (y - mean_y)^2, (q,)
    squares_x: np.ndarray  # sum (x - mean_x)^2, (p,)
    cross: np.ndarray  # sum (y - mean_y)(x - mean_x)^T, (q, p)


def block_moments(y: np.ndarray, x: np.ndarray) -> CrossMoments:
    """The moments of one row block: scores ``y`` (rows, q) and features ``x`` (rows, p).

    Examples
    --------
    >>> m = block_moments(np.array([[1.0], [3.0]]), np.array([[2.0], [6.0]]))
    >>> m.n, m.mean_x.tolist(), m.cross.tolist()
    (2, [4.0], [[4.0]])
    """
    y = np.asarray(y, dtype=np.float64)
    n, q, p = y.shape[0], y.shape[1], x.shape[1]
    if n == 0:
        return CrossMoments(0, np.zeros(q), np.zeros(p), np.zeros(q), np.zeros(p),
                            np.zeros((q, p)))
    mean_y = y.mean(axis=0)
    y = y - mean_y
    mean_x, squares_x, cross = np.empty(p), np.empty(p), np.empty((q, p))
    # Column panels of at most PANEL_BYTES in float64: a block of a field's whole grid
    # (50 time steps of 3e5 float32 points) is not copied whole into float64 twice.
    width = max(1, PANEL_BYTES // (8 * n))
    for a in range(0, p, width):
        panel = np.array(x[:, a:a + width], dtype=np.float64)  # a copy: centred in place
        mean_x[a:a + width] = centre = panel.mean(axis=0)
        panel -= centre
        squares_x[a:a + width] = np.einsum("ij,ij->j", panel, panel)
        cross[:, a:a + width] = y.T @ panel
    return CrossMoments(n, mean_y, mean_x, np.einsum("ij,ij->j", y, y), squares_x, cross)


def merge_moments(*parts: CrossMoments) -> CrossMoments:
    """The moments of the rows of all ``parts`` together (Chan, Golub and LeVeque's update).

    Examples
    --------
    >>> y, x = np.array([[1.0], [2.0], [4.0]]), np.array([[1.0], [0.0], [5.0]])
    >>> merged = merge_moments(block_moments(y[:1], x[:1]), block_moments(y[1:], x[1:]))
    >>> bool(np.allclose(merged.cross, block_moments(y, x).cross))
    True
    """
    total = parts[0]
    for part in parts[1:]:
        if part.n == 0:
            continue
        if total.n == 0:
            total = part
            continue
        n = total.n + part.n
        d_y, d_x = part.mean_y - total.mean_y, part.mean_x - total.mean_x
        f = total.n * part.n / n
        total = CrossMoments(
            n, total.mean_y + d_y * (part.n / n), total.mean_x + d_x * (part.n / n),
            total.squares_y + part.squares_y + f * d_y * d_y,
            total.squares_x + part.squares_x + f * d_x * d_x,
            total.cross + part.cross + f * np.outer(d_y, d_x))
    return total


def cross_moments(Y: da.Array, X: da.Array) -> list[Delayed]:
    """Lazy :class:`CrossMoments` of the scores ``Y`` (n, q) and each feature chunk of ``X``.

    One per chunk of ``X``'s columns, in order: each (row block, feature
    chunk) gives its moments against the row block's scores, and a chunk's
    are merged along a few chains of row blocks, then the chains by a tree,
    so no task holds more than one chunk and q x (its columns). ``X`` is cut
    to ``Y``'s row blocks.

    Examples
    --------
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(2, 1))
    >>> [m.cross.tolist() for m in dask.compute(*cross_moments(X[:, :1], X))]
    [[[20.0]], [[20.0]]]
    """
    Y, X = _aligned(Y, X)
    name = dask.base.tokenize(Y.name, X.name)
    scores = Y.to_delayed(optimize_graph=False).ravel()
    chunks = X.to_delayed(optimize_graph=False)
    # A few chains of tasks per feature chunk, as the pass adds its sums (docs/design.md §2):
    # each task merges one row block's moments into the chain's, so a worker holds one
    # chain's moments, not every block's waiting for a merge.
    chains = pass_plan(X, 1).chains
    merged = []
    for c in range(X.numblocks[1]):
        parts = chain_heads(len(scores), chains, lambda running, i, c=c: dask.delayed(
            added_moments, pure=True)(running, scores[i], chunks[i, c],
                                      dask_key_name=(f"moments-{name}", i, c)))
        level = 0
        while len(parts) > 1:
            level += 1
            parts = [dask.delayed(merge_moments, pure=True)(
                *parts[i:i + MERGE_FAN_IN], dask_key_name=(f"merge-moments-{name}", level, i, c))
                for i in range(0, len(parts), MERGE_FAN_IN)]
        merged.append(parts[0])
    return merged


def added_moments(running: CrossMoments | None, y: np.ndarray, x: np.ndarray) -> CrossMoments:
    """``running`` (None: a chain's first block) merged with one row block's moments."""
    block = block_moments(y, x)
    return block if running is None else merge_moments(running, block)


def pattern_maps(Y: da.Array, X: da.Array, kind: str) -> da.Array:
    """Lazy maps (q, p) of :func:`patterns_of`, chunked like ``X``'s features.

    One task per feature chunk turns its merged moments
    (:func:`cross_moments`) into its maps. With whole rows, a block of ``Y``
    made from the block of ``X`` beside it reads the data once. With feature
    chunks a row block's scores need every chunk of it, so the chunks are read
    a second time, by a copy of ``X``'s graph
    (:func:`~kpca_dask._compat.independent_copy`) whose reads are made part of the
    tasks that take their moments: a chunk is read when its row block's
    scores are known, not held from the first read until then (which would
    make whole rows).

    Examples
    --------
    >>> X = da.from_array(np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 5.0]]), chunks=(2, 1))
    >>> maps = pattern_maps(X[:, :1], X, "correlation")
    >>> maps.chunks, np.round(maps.compute(), 3).tolist()
    (((1,), (1, 1)), [[1.0, 0.982]])
    """
    Y, X = _aligned(Y, X)
    if X.numblocks[1] > 1:
        X = independent_copy(X)
    # A block of X that only its moments' task takes (scores known beforehand, or a copy of
    # the graph) is read inside that task: a worker then holds no block read ahead of it.
    reads = {key for row in X.__dask_keys__() for key in row}
    name = "patterns-" + dask.base.tokenize(Y.name, X.name, kind)
    maps = [dask.delayed(patterns_of, pure=True)(part, kind, dask_key_name=(name, 0, c))
            for c, part in enumerate(cross_moments(Y, X))]
    graph = reads_inlined(dask.delayed(list, pure=True)(maps), reads).__dask_graph__()
    return da.Array(graph, name, ((Y.shape[1],), X.chunks[1]), dtype=np.float64,
                    meta=np.empty((0, 0), np.float64))


def _aligned(Y: da.Array, X: da.Array) -> tuple[da.Array, da.Array]:
    """``Y`` in one chunk of columns and ``X`` in ``Y``'s row blocks."""
    if Y.numblocks[1] != 1:
        Y = Y.rechunk({1: -1})
    if X.chunks[0] != Y.chunks[0]:
        X = X.rechunk({0: Y.chunks[0]})
    return Y, X


def patterns_of(moments: CrossMoments, kind: str) -> np.ndarray:
    """Covariance or correlation maps (q, p) from merged moments, ddof = 1.

    ``"covariance"``: cov(y_j / sd(y_j), x), the covariance of each feature
    with the score scaled to unit variance; ``"correlation"``: corr(y_j, x).
    A score or feature of zero variance gives NaN there. ``"cross-covariance"``:
    cov(y_j, x) itself, for the scalings of :mod:`kpca_dask.eof.scalings`.

    Examples
    --------
    >>> y, x = np.array([[1.0], [2.0], [3.0]]), np.array([[2.0], [4.0], [6.0]])
    >>> patterns_of(block_moments(y, x), "covariance").tolist()
    [[2.0]]
    >>> patterns_of(block_moments(y, x), "correlation").tolist()
    [[1.0]]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "cross-covariance":
            scale = np.float64(moments.n - 1)
        elif kind == "covariance":
            scale = np.sqrt(moments.squares_y * (moments.n - 1))[:, None]
        else:
            scale = np.sqrt(np.outer(moments.squares_y, moments.squares_x))
        out = moments.cross / scale
    out[~np.isfinite(out)] = np.nan
    return out
