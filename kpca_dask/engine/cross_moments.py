"""Covariances between component scores and features, in one pass over row blocks.

Each row block gives its count, means and centred sums of squares and of
cross-products of the scores y (q) and the features x (p); blocks are merged
pairwise by the update of Chan, Golub and LeVeque (docs/design.md §12), which
keeps the digits that ``sum(y x) - n mean(y) mean(x)`` would lose for data
far from zero. :func:`patterns_of` turns the merged sums into covariance maps
(scores scaled to unit variance) or correlation maps, ddof = 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np

__all__ = ["CrossMoments", "block_moments", "merge_moments", "cross_moments", "patterns_of",
           "PATTERN_KINDS"]

#: What :func:`patterns_of` can give.
PATTERN_KINDS = ("covariance", "correlation")
#: Partial results one node of the merge tree adds up.
MERGE_FAN_IN = 8


@dataclass(frozen=True)
class CrossMoments:
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
    x = np.asarray(x, dtype=np.float64)
    n = y.shape[0]
    if n == 0:
        return CrossMoments(0, np.zeros(y.shape[1]), np.zeros(x.shape[1]), np.zeros(y.shape[1]),
                            np.zeros(x.shape[1]), np.zeros((y.shape[1], x.shape[1])))
    mean_y, mean_x = y.mean(axis=0), x.mean(axis=0)
    y = y - mean_y
    x = x - mean_x
    return CrossMoments(n, mean_y, mean_x, np.einsum("ij,ij->j", y, y),
                        np.einsum("ij,ij->j", x, x), y.T @ x)


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


def cross_moments(Y: da.Array, X: da.Array):
    """Lazy :class:`CrossMoments` of the scores ``Y`` (n, q) and features ``X`` (n, p).

    ``Y`` and ``X`` have the same row chunks and one chunk of columns each; a
    block of ``Y`` made from the block of ``X`` beside it reads the data once.

    Examples
    --------
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(2, 2))
    >>> cross_moments(X[:, :1], X).compute().cross.tolist()
    [[20.0, 20.0]]
    """
    if Y.numblocks[1] != 1:
        Y = Y.rechunk({1: -1})
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    name = dask.base.tokenize(Y.name, X.name)
    parts = [dask.delayed(block_moments, pure=True)(y, x, dask_key_name=(f"moments-{name}", i))
             for i, (y, x) in enumerate(zip(Y.to_delayed().ravel(), X.to_delayed().ravel()))]
    level = 0
    while len(parts) > 1:
        level += 1
        parts = [dask.delayed(merge_moments, pure=True)(
            *parts[i:i + MERGE_FAN_IN], dask_key_name=(f"merge-moments-{name}", level, i))
            for i in range(0, len(parts), MERGE_FAN_IN)]
    return parts[0]


def patterns_of(moments: CrossMoments, kind: str) -> np.ndarray:
    """Covariance or correlation maps (q, p) from merged moments, ddof = 1.

    ``"covariance"``: cov(y_j / sd(y_j), x), the covariance of each feature
    with the score scaled to unit variance; ``"correlation"``: corr(y_j, x).
    A score or feature of zero variance gives NaN there.

    Examples
    --------
    >>> y, x = np.array([[1.0], [2.0], [3.0]]), np.array([[2.0], [4.0], [6.0]])
    >>> patterns_of(block_moments(y, x), "covariance").tolist()
    [[2.0]]
    >>> patterns_of(block_moments(y, x), "correlation").tolist()
    [[1.0]]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "covariance":
            scale = np.sqrt(moments.squares_y * (moments.n - 1))[:, None]
        else:
            scale = np.sqrt(np.outer(moments.squares_y, moments.squares_x))
        out = moments.cross / scale
    out[~np.isfinite(out)] = np.nan
    return out
