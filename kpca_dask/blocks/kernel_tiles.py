"""Products of the kernel matrix with vectors, tile by tile, each tile made once.

docs/design.md §13.

The matrix-free exact solver never holds k(X, X): a product K V is a sum of
tiles K_ab = k(X_a, X_b) times blocks of V. The functions here work on two
panels of rows (numpy, whole rows) in the task that holds them: each tile is
made once, by one GEMM finished by the compiled epilogue
(:class:`~kpca_dask.blocks.landmark_kernel.LandmarkKernel`), used for both of
its products K_ab V_b and K_ab^T V_a, and dropped. A tile of the diagonal is
symmetrised, so the operator the products apply is exactly symmetric. Tiles
are made in the kernel dtype (float32 or float64) and their products are
summed in float64.
"""

from __future__ import annotations

import numpy as np

from .kernels import kernel_diagonal
from .landmark_kernel import LandmarkKernel
from .sparse_rows import dense, first_nonfinite

__all__ = ["pair_products", "cross_products", "rows_summary", "tile_cuts", "TILE_ROWS"]

#: Rows (and columns) of one kernel tile: 8 MiB of float64, made and used while it is
#: in the last-level cache.
TILE_ROWS = 1024


def pair_products(x_a, x_b, v_a: np.ndarray, v_b: np.ndarray, kernel, params: dict, dtype,
                  same: bool, tile_rows: int = TILE_ROWS) -> tuple[np.ndarray, np.ndarray | None]:
    """``(K_ab V_b, K_ab^T V_a)`` for the panels of rows ``x_a`` and ``x_b``, in float64.

    With ``same`` (``x_b`` is ``x_a``, ``v_b`` is ``v_a``) returns ``(K_aa V_a, None)``,
    making only the tiles on and above the diagonal of K_aa.

    Examples
    --------
    >>> x = np.array([[0.0], [1.0], [3.0]])
    >>> v = np.eye(3)
    >>> K = np.exp(-np.subtract.outer(x[:, 0], x[:, 0]) ** 2)
    >>> left, _ = pair_products(x, x, v, v, "rbf", {"gamma": 1.0}, np.float64, True,
    ...                         tile_rows=2)
    >>> bool(np.allclose(left, K))
    True
    >>> left, right = pair_products(x[:1], x[1:], v[:1], v[1:], "rbf", {"gamma": 1.0},
    ...                             np.float64, False)
    >>> bool(np.allclose(left, K[:1, 1:] @ v[1:])), bool(np.allclose(right, K[1:, :1] @ v[:1]))
    (True, True)
    """
    dtype = np.dtype(dtype)
    a = _rows(x_a, dtype)
    b = a if same else _rows(x_b, dtype)
    out_a = np.zeros((a.shape[0], v_a.shape[1]))
    out_b = out_a if same else np.zeros((b.shape[0], v_b.shape[1]))
    buffer = np.empty(tile_rows * tile_rows, dtype)
    row_cuts = tile_cuts(a.shape[0], tile_rows)
    for j, columns in enumerate(tile_cuts(b.shape[0], tile_rows)):
        # What depends on the tile's columns alone is made once for its whole column.
        tiles = LandmarkKernel(b[columns], kernel, params, dtype)
        for i, rows in enumerate(row_cuts[: j + 1] if same else row_cuts):
            shape = (rows.stop - rows.start, columns.stop - columns.start)
            tile = tiles.into(buffer[: shape[0] * shape[1]].reshape(shape), a[rows])
            diagonal = same and i == j
            if diagonal:  # k(x, y) and k(y, x) are rounded differently: one value for both
                tile += tile.T
                tile *= 0.5
            wide = tile if dtype == np.float64 else tile.astype(np.float64)
            out_a[rows] += wide @ v_b[columns]
            if not diagonal:  # (V_a^T K_ab)^T: BLAS reads the tile in its own order
                out_b[columns] += (v_a[rows].T @ wide).T
    return out_a, (None if same else out_b)


def cross_products(x_new, x_train, weights: np.ndarray, kernel, params: dict, dtype,
                   tile_rows: int = TILE_ROWS) -> np.ndarray:
    """``k(X_new, X_train) [W, 1]``: the products with ``weights`` and the row sums, float64.

    Shape (rows of ``x_new``, columns of ``weights`` + 1).

    Examples
    --------
    >>> x = np.array([[0.0], [1.0]])
    >>> cross_products(x[:1], x, np.eye(2), "linear", {}, np.float64).tolist()
    [[0.0, 0.0, 0.0]]
    """
    dtype = np.dtype(dtype)
    a, b = _rows(x_new, dtype), _rows(x_train, dtype)
    out = np.zeros((a.shape[0], weights.shape[1] + 1))
    buffer = np.empty(tile_rows * tile_rows, dtype)
    for columns in tile_cuts(b.shape[0], tile_rows):
        tiles = LandmarkKernel(b[columns], kernel, params, dtype)
        for rows in tile_cuts(a.shape[0], tile_rows):
            shape = (rows.stop - rows.start, columns.stop - columns.start)
            tile = tiles.into(buffer[: shape[0] * shape[1]].reshape(shape), a[rows])
            wide = tile if dtype == np.float64 else tile.astype(np.float64)
            out[rows, :-1] += wide @ weights[columns]
            out[rows, -1] += wide.sum(axis=1)
    return out


def tile_cuts(length: int, most: int) -> list[slice]:
    """``length`` rows cut into the fewest tiles of at most ``most``, as equal as can be.

    Examples
    --------
    >>> tile_cuts(2500, 1024)
    [slice(0, 833, None), slice(833, 1666, None), slice(1666, 2500, None)]
    """
    parts = max(1, -(-length // most))
    cuts = [length * k // parts for k in range(parts + 1)]
    return [slice(start, stop) for start, stop in zip(cuts[:-1], cuts[1:])]


def rows_summary(x, kernel, params: dict) -> np.ndarray:
    """``[sum of k(x, x), count of NaN or infinite values, the first row holding one]``.

    Examples
    --------
    >>> rows_summary(np.array([[1.0, 2.0], [np.nan, 0.0]]), "linear", {}).tolist()
    [nan, 1.0, 1.0]
    """
    x = dense(x)
    count, first = first_nonfinite(x)
    total = float(np.sum(kernel_diagonal(x, kernel, **params), dtype=np.float64))
    return np.array([total, float(count), float(first)])


def _rows(x, dtype: np.dtype) -> np.ndarray:
    """A panel as dense, C-ordered rows in the kernel dtype (a view when it is already)."""
    return np.ascontiguousarray(dense(x), dtype=dtype)
