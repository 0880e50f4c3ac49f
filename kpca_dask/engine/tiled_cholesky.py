"""The Cholesky factor of a tiled symmetric matrix on the workers, without failing tasks.

docs/design.md §11. A right-looking blocked factorisation over T x T square
tiles of a dask array A (its lower tiles are read):

    L_kk = chol(A_kk - sum_{j<k} L_kj L_kj^T)
    L_ik = (A_ik - sum_{j<k} L_ij L_kj^T) L_kk^-T        (i > k)

one task per lower tile, as ``dask.array.linalg.cholesky`` builds it, with one
difference: a diagonal tile that is not positive definite to rounding gives a
tile of NaN instead of raising. The NaN reaches every tile after it and the
caller reads it from the pivots, the diagonal of L, and factorises again with
a jitter (:mod:`kpca_dask.engine.tiled_solve`). A raised error would be logged
by the worker that ran it ("Compute Failed") and cancel the rest of the graph,
for what is an expected outcome here, not a fault (docs/design.md §14).
The tiles above the diagonal are zeros of a few bytes each.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from scipy import linalg

__all__ = ["tiled_cholesky", "diagonal_factor", "below_diagonal_factor"]


def diagonal_factor(tile: np.ndarray, *products: np.ndarray) -> np.ndarray:
    """L_kk from A_kk and the tiles L_kj (j < k) of its row: NaN where not positive definite.

    Examples
    --------
    >>> diagonal_factor(np.array([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    >>> bool(np.isnan(diagonal_factor(np.array([[1.0, 2.0], [2.0, 1.0]]))).all())
    True
    """
    updated = np.array(tile, dtype=np.float64, order="F")
    for left in products:
        updated -= left @ left.T
    try:
        return linalg.cholesky(updated, lower=True, check_finite=False)
    except linalg.LinAlgError:
        return np.full_like(updated, np.nan)


def below_diagonal_factor(tile: np.ndarray, diagonal: np.ndarray, row: list, column: list
                          ) -> np.ndarray:
    """L_ik = (A_ik - sum_j L_ij L_kj^T) L_kk^-T, from the tiles of rows i and k left of k.

    Examples
    --------
    >>> below_diagonal_factor(np.array([[2.0]]), np.array([[2.0]]), [], []).tolist()
    [[1.0]]
    """
    updated = np.array(tile, dtype=np.float64)
    for left, right in zip(row, column):
        updated -= left @ right.T
    # X L_kk^T = B  <=>  L_kk X^T = B^T: one triangular solve from the left.
    return linalg.solve_triangular(diagonal, updated.T, lower=True, check_finite=False).T


def tiled_cholesky(A: da.Array) -> da.Array:
    """The lower Cholesky factor of the symmetric ``A`` (square tiles), NaN past a failed pivot.

    Examples
    --------
    >>> A = np.array([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    >>> L = tiled_cholesky(da.from_array(A, chunks=1)).compute()
    >>> np.allclose(L @ L.T, A), np.allclose(L, np.tril(L))
    (True, True)
    """
    T, t = A.numblocks[0], A.chunks[0][0]
    if A.numblocks != (T, T) or any(size != t for size in A.chunks[0] + A.chunks[1]):
        raise ValueError(f"tiled_cholesky needs square tiles of one size, got {A.chunks}")
    tiles = A.to_delayed()
    lower: dict[tuple[int, int], object] = {}
    for k in range(T):
        left = [lower[k, j] for j in range(k)]
        lower[k, k] = dask.delayed(diagonal_factor, pure=True)(tiles[k, k], *left)
        for i in range(k + 1, T):
            lower[i, k] = dask.delayed(below_diagonal_factor, pure=True)(
                tiles[i, k], lower[k, k], [lower[i, j] for j in range(k)], left)
    return da.block([[da.from_delayed(lower[i, j], (t, t), np.float64,
                                      meta=np.empty((0, 0), np.float64))
                      if j <= i else da.zeros((t, t), chunks=t) for j in range(T)]
                     for i in range(T)])
