"""One row block of the Nyström pass, in numpy: its kernel rows and their statistics.

For a block X_b of rows and the landmarks Z (docs/design.md §2)::

    n_b,  s_b = D_b^T 1,  G_b = D_b^T D_b,  t_b = sum_i k(x_i, x_i)

with B_b = k(X_b, Z) and D_b = B_b - 1 r^T, the kernel rows shifted by the
reference row r (see :mod:`kpca_dask.engine.solve`). The kernel rows are made
one cache-sized sub-block at a time by the compiled epilogue
(docs/design.md §8); nothing here knows about dask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._parallel import task_blas_limit
from ..errors import InvalidInputError
from .kernels import is_translation_invariant, kernel_diagonal
from .landmark_kernel import LandmarkKernel
from .sparse_rows import as_block, first_nonfinite, is_sparse

__all__ = ["PassStatistics", "statistics_of_block", "combine_statistics", "kernel_rows_into",
           "kernel_block_rows", "cache_block_rows", "even_block_rows", "kernel_origin",
           "shifted_to_origin"]


@dataclass(frozen=True)
class PassStatistics:
    """What one pass over the data returns: sizes m and m x m only."""

    n_samples: int
    column_sums: np.ndarray  # s = sum_b D_b^T 1, shape (m,)
    gram: np.ndarray  # G = sum_b D_b^T D_b, shape (m, m)
    diagonal_sum: float  # t = sum_i k(x_i, x_i)
    n_nonfinite: int  # NaN/inf entries found in the data
    first_nonfinite_row: int  # global row of the first one, -1 if none
    reference: np.ndarray  # r: D_b = B_b - 1 r^T (kpca_dask.engine.solve), shape (m,)


def statistics_of_block(block, row_offset, landmarks, kernel, params, dtype, reference,
                        origin=None):
    """Statistics of one row block; module level so the dashboard names it."""
    x = as_block(block)  # scipy.sparse rows stay sparse (CSR)
    m = landmarks.shape[0]
    n_bad, first_bad = first_nonfinite(x)
    if n_bad:
        return PassStatistics(
            x.shape[0], np.zeros(m), np.zeros((m, m)), 0.0,
            n_bad, int(row_offset + first_bad), reference,
        )
    x = shifted_to_origin(x, origin).astype(dtype, copy=False)
    column_sums, gram = np.zeros(m), np.zeros((m, m))
    shift = reference.astype(dtype, copy=False)
    # A stored chunk may hold 10^5 rows or more: kernel blocks of bounded size
    # keep a task's memory O(rows x m) whatever the chunking, and keep float32
    # SYRK sums short before they are added up in float64.
    rows = even_block_rows(x.shape[0], kernel_block_rows(m))
    buffer = np.empty((min(rows, x.shape[0]), m), dtype)
    kernel_rows = LandmarkKernel(landmarks, kernel, params, dtype)
    with task_blas_limit():
        for start in range(0, x.shape[0], rows):
            D = kernel_rows_into(buffer[: min(rows, x.shape[0] - start)],
                                  x[start : start + rows], kernel_rows, shift, column_sums)
            # D.T @ D with the same buffer is dispatched by numpy to BLAS SYRK, half
            # the flops of a general product.
            gram += D.T @ D
    return PassStatistics(
        n_samples=x.shape[0],
        column_sums=column_sums,
        gram=gram,
        diagonal_sum=float(kernel_diagonal(x, kernel, **params).sum(dtype=np.float64)),
        n_nonfinite=0,
        first_nonfinite_row=-1,
        reference=reference,
    )


#: Bytes of one kernel block inside a task (rows x m, float64): 128 MiB.
KERNEL_BLOCK_BYTES = 2**27


def kernel_block_rows(n_landmarks: int) -> int:
    """Rows of data per kernel block: ~128 MiB, but 1024 to 65 536 rows.

    Examples
    --------
    >>> kernel_block_rows(1000), kernel_block_rows(4096), kernel_block_rows(10)
    (16777, 4096, 65536)
    """
    return int(min(65_536, max(1024, KERNEL_BLOCK_BYTES // (8 * max(n_landmarks, 1)))))


#: Bytes of a sub-block whose elementwise kernel steps run while it sits in
#: the cache: the same steps over 2e8 float64 values took 0.87 s in
#: 16 384-row blocks and 0.36 s in 512-row blocks (docs/design.md §8).
CACHE_BLOCK_BYTES = 2**20


def cache_block_rows(n_landmarks: int, itemsize: int) -> int:
    """Rows of a kernel sub-block of ~1 MiB, whose elementwise work stays in cache.

    Examples
    --------
    >>> cache_block_rows(1000, 8), cache_block_rows(1000, 4), cache_block_rows(10**6, 8)
    (131, 262, 16)
    """
    return int(max(16, CACHE_BLOCK_BYTES // (itemsize * max(n_landmarks, 1))))


def even_block_rows(n_rows: int, most: int) -> int:
    """Rows per block when ``n_rows`` are cut into equal blocks of at most ``most``.

    Equal blocks keep every SYRK large: 20 000 rows in blocks of at most
    16 777 are two blocks of 10 000, not 16 777 and a thin 3 223.

    Examples
    --------
    >>> even_block_rows(20_000, 16_777), even_block_rows(100, 16_777), even_block_rows(0, 10)
    (10000, 100, 1)
    """
    n_blocks = max(1, -(-n_rows // most))
    return max(1, -(-n_rows // n_blocks))


def kernel_rows_into(out, x, kernel_rows: LandmarkKernel, shift=None, column_sums=None):
    """``out = k(x, Z) - 1 shift^T``, one cache-sized sub-block at a time (docs/design.md §8).

    The kernel GEMM, the exp and the shift of a sub-block, and its column
    sums into ``column_sums`` (float64), all run while it is in cache; only
    the caller's SYRK or product then reads the whole block.
    """
    step = cache_block_rows(out.shape[1], out.dtype.itemsize)
    for start in range(0, x.shape[0], step):
        # The compiled epilogue adds each value to the float64 column sums as it
        # is made: no second pass, and no sum in the block's dtype.
        kernel_rows.into(out[start : start + step], x[start : start + step], shift, column_sums)
    return out


def shifted_to_origin(x, origin):
    """``x - origin`` (``x`` itself when origin is None), refusing sparse blocks to shift."""
    # Translation-invariant kernels see x - origin, computed in float64 before
    # any cast to float32: data such as 1e6 + N(0, 1) keep their digits.
    if origin is not None and is_sparse(x):
        raise InvalidInputError(
            "A block of X is a scipy.sparse matrix but the dask array's meta is dense, so "
            "it was prepared for dense blocks. Give the array a sparse meta, e.g. "
            "da.from_array(X_csr, chunks=(rows, -1), asarray=False) or "
            "map_blocks(..., meta=scipy.sparse.csr_matrix((0, 0))).")
    return x if origin is None else x - origin


def kernel_origin(landmarks: np.ndarray, kernel, X=None) -> np.ndarray | None:
    """The point both data and landmarks are shifted by (None: no shift).

    A kernel of x - y alone (rbf, laplacian, matern) is unchanged by a common
    shift; shifting to the landmark mean keeps its distances accurate for
    data far from the origin, in float32 too. Sparse data (``X`` with a
    scipy.sparse meta) are never shifted: x - origin would be dense.
    """
    if not is_translation_invariant(kernel) or (X is not None and is_sparse(X._meta)):
        return None
    return np.asarray(landmarks, dtype=np.float64).mean(axis=0)


def combine_statistics(*parts):
    """Add partial statistics: one node of the tree reduction, or a running total."""
    bad_rows = [p.first_nonfinite_row for p in parts if p.first_nonfinite_row >= 0]
    gram = parts[0].gram.copy()
    column_sums = parts[0].column_sums.copy()
    for p in parts[1:]:
        gram += p.gram
        column_sums += p.column_sums
    return PassStatistics(
        n_samples=sum(p.n_samples for p in parts),
        column_sums=column_sums,
        gram=gram,
        diagonal_sum=float(sum(p.diagonal_sum for p in parts)),
        n_nonfinite=sum(p.n_nonfinite for p in parts),
        first_nonfinite_row=min(bad_rows) if bad_rows else -1,
        reference=parts[0].reference,
    )
