"""The Cholesky factor of a tiled symmetric matrix on the workers, without failing tasks.

docs/design.md §11. A right-looking blocked factorisation over T x T square
tiles of a dask array A (its lower tiles are read): for k = 0 .. T - 1,

    L_kk = chol(A_kk)
    L_ik = A_ik L_kk^-T                     (i > k)
    A_ij <- A_ij - L_ik L_jk^T              (k < j <= i; a rank-k update when i = j)

one task per factor tile and one per update, so that the updates of step k run
on every worker while step k + 1's column is factorised: the longest chain is T
steps of one potrf, one trsm and one update, where a task per factor tile
adding up its own row's products (as ``dask.array.linalg.cholesky`` builds it)
makes the last tiles' tasks k products long (at m = 16 000 in 5 x 5 tiles on two
one-thread workers: 13 s of such a chain, for 20 s of work).

A diagonal tile that is not positive definite to rounding, or one with a pivot
L_jj^2 at most the caller's ``least_pivot`` (the cut-off below which one
process's factor is not accepted either), gives a tile of NaN instead of
raising. The NaN reaches every tile after it and the caller reads it from
the pivots, the diagonal of L, and makes the factor another way
(:mod:`kpca_dask.engine.tiles.solve`). A raised error would be logged
by the worker that ran it ("Compute Failed") and cancel the rest of the graph,
for what is an expected outcome here, not a fault (docs/design.md §14).
Once a pivot has failed, every later task returns its NaN tile at once (a
read-only view of one NaN, no memory and no flops): a factorisation that fails
at its first tile, as that of a kernel matrix of low rank does (a pivot at or
below the cut-off comes early), costs one tile's. The tiles above the diagonal are zeros
of a few bytes each; the last row and column of tiles may be narrower than the others.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from scipy import linalg

__all__ = ["tiled_cholesky", "cholesky_of_tiles", "tiled_inverse", "diagonal_factor",
           "below_diagonal_factor", "updated_tile"]


def diagonal_factor(tile: np.ndarray, least_pivot: float = 0.0) -> np.ndarray:
    """L_kk from the updated A_kk: NaN where not positive definite, or where a pivot L_jj^2
    is at most ``least_pivot``.

    Examples
    --------
    >>> diagonal_factor(np.array([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    >>> bool(np.isnan(diagonal_factor(np.array([[1.0, 2.0], [2.0, 1.0]]))).all())
    True
    >>> bool(np.isnan(diagonal_factor(np.array([[4.0, 2.0], [2.0, 5.0]]), 4.0)).all())
    True
    """
    if _failed(tile):
        return tile
    try:
        factor = linalg.cholesky(tile, lower=True, check_finite=False)
    except linalg.LinAlgError:
        return _nan_like(tile)
    if factor.size and not float(np.min(np.diagonal(factor))) ** 2 > least_pivot:
        return _nan_like(tile)
    return factor


def below_diagonal_factor(tile: np.ndarray, diagonal: np.ndarray) -> np.ndarray:
    """L_ik = A_ik L_kk^-T from the updated A_ik.

    Examples
    --------
    >>> below_diagonal_factor(np.array([[2.0]]), np.array([[2.0]])).tolist()
    [[1.0]]
    """
    if _failed(diagonal) or _failed(tile):
        return _nan_like(tile)
    # X L_kk^T = B  <=>  L_kk X^T = B^T: one triangular solve from the left.
    return linalg.solve_triangular(diagonal, tile.T, lower=True, check_finite=False).T


def updated_tile(tile: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """A_ij - L_ik L_jk^T, a new array (numpy makes L_ik L_ik^T by a rank-k update).

    Examples
    --------
    >>> updated_tile(np.array([[5.0]]), np.array([[1.0, 2.0]]), np.array([[1.0, 2.0]])).tolist()
    [[0.0]]
    """
    if _failed(tile) or _failed(left) or _failed(right):
        return _nan_like(tile)
    product = left @ (left if right is left else right).T
    return np.subtract(tile, product, out=product)


def _failed(tile: np.ndarray) -> bool:
    """Whether a tile is NaN from a failed pivot (its first value tells: a failed
    diagonal factor is NaN throughout, and so is every tile computed from it)."""
    return tile.size > 0 and bool(np.isnan(tile.flat[0]))


def _nan_like(tile: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.float64(np.nan), tile.shape)


def tiled_cholesky(A: da.Array, least_pivot: float = 0.0) -> da.Array:
    """The lower Cholesky factor of the symmetric ``A`` (square tiles), NaN past a failed pivot
    (one not positive, or whose square is at most ``least_pivot``).

    Examples
    --------
    >>> A = np.array([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    >>> L = tiled_cholesky(da.from_array(A, chunks=1)).compute()
    >>> np.allclose(L @ L.T, A), np.allclose(L, np.tril(L))
    (True, True)
    """
    sizes = A.chunks[0]
    if A.chunks[1] != sizes:
        raise ValueError(f"tiled_cholesky needs square diagonal tiles, got {A.chunks}")
    tiles = A.astype(np.float64).to_delayed()
    return cholesky_of_tiles({(i, j): tiles[i, j] for i in range(len(sizes))
                              for j in range(i + 1)}, sizes, least_pivot)


def cholesky_of_tiles(tiles: dict, sizes: tuple[int, ...], least_pivot: float = 0.0
                      ) -> da.Array:
    """:func:`tiled_cholesky` of the symmetric matrix whose lower tile (i, j) is
    ``tiles[i, j]`` (a delayed array, or an array) of ``sizes[i]`` x ``sizes[j]``: tiles
    made by tasks of their own go to the factorisation as they are, with no dask array
    joining them (``da.block`` adds a key per tile).

    Examples
    --------
    >>> A = np.array([[4.0, 2.0], [2.0, 5.0]])
    >>> tiles = {(0, 0): A[:1, :1], (1, 0): A[1:, :1], (1, 1): A[1:, 1:]}
    >>> cholesky_of_tiles(tiles, (1, 1)).compute().tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    T = len(sizes)
    current = dict(tiles)
    lower: dict[tuple[int, int], object] = {}
    for k in range(T):
        lower[k, k] = dask.delayed(diagonal_factor, pure=True)(current.pop((k, k)),
                                                               least_pivot)
        for i in range(k + 1, T):
            lower[i, k] = dask.delayed(below_diagonal_factor, pure=True)(current.pop((i, k)),
                                                                         lower[k, k])
        for i in range(k + 1, T):
            for j in range(k + 1, i + 1):
                current[i, j] = dask.delayed(updated_tile, pure=True)(
                    current[i, j], lower[i, k], lower[j, k])
    return da.block([[da.from_delayed(lower[i, j], (sizes[i], sizes[j]), np.float64,
                                      meta=np.empty((0, 0), np.float64))
                      if j <= i else da.zeros((sizes[i], sizes[j]), chunks=-1)
                      for j in range(T)] for i in range(T)])


def tiled_inverse(L: da.Array) -> da.Array:
    """L^-1 of a lower triangular ``L`` in square tiles (lower tiles read), tiled the same way.

    Column j of tiles top down: X_jj = L_jj^-1 and, below it,
    X_ij = -L_ii^-1 sum_{k=j}^{i-1} L_ik X_kj; one task per lower tile,
    m^3 / 3 + m^3 / T flops in all. Made where M = X S X^T itself is formed (the dense
    way, the exact trace), whose products have m columns, and where its products pay
    for it (:mod:`kpca_dask.engine.tiles.product_way`; docs/design.md §11).

    Examples
    --------
    >>> L = np.array([[2.0, 0.0, 0.0], [1.0, 1.0, 0.0], [4.0, 2.0, 4.0]])
    >>> X = tiled_inverse(da.from_array(L, chunks=2)).compute()
    >>> np.allclose(X @ L, np.eye(3)), np.allclose(X, np.tril(X))
    (True, True)
    """
    T, sizes = L.numblocks[0], L.chunks[0]
    tiles = L.to_delayed()
    inverse: dict[tuple[int, int], object] = {}
    for j in range(T):
        inverse[j, j] = dask.delayed(diagonal_inverse, pure=True)(tiles[j, j])
    for j in range(T):
        for i in range(j + 1, T):
            inverse[i, j] = dask.delayed(below_diagonal_inverse, pure=True)(
                inverse[i, i], [tiles[i, k] for k in range(j, i)],
                [inverse[k, j] for k in range(j, i)])
    return da.block([[da.from_delayed(inverse[i, j], (sizes[i], sizes[j]), np.float64,
                                      meta=np.empty((0, 0), np.float64))
                      if j <= i else da.zeros((sizes[i], sizes[j]), chunks=-1)
                      for j in range(T)] for i in range(T)])


def diagonal_inverse(tile: np.ndarray) -> np.ndarray:
    """L_jj^-1 of a lower triangular tile (LAPACK's ``trtri``)."""
    inverse, info = linalg.lapack.dtrtri(np.asarray(tile, dtype=np.float64), lower=1)
    if info != 0:
        raise linalg.LinAlgError(f"a diagonal tile of the factor is singular (trtri {info})")
    return np.tril(inverse)


def below_diagonal_inverse(diagonal_inverse: np.ndarray, row: list, column: list
                           ) -> np.ndarray:
    """X_ij = -X_ii sum_k L_ik X_kj, from L's tiles of row i and X's of column j."""
    total = row[0] @ column[0]
    for left, right in zip(row[1:], column[1:]):
        total += left @ right
    return -(diagonal_inverse @ total)
