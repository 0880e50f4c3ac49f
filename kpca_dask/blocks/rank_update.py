"""The pass's rank-k update ``C = beta C + D^T D`` by BLAS, outside the GIL.

The pass adds every kernel block's ``D^T D`` into the m x m sums (docs/design.md §2,
§11): BLAS ``syrk`` on the lower triangle is the least work there is for it. numpy
sends ``D.T @ D`` to ``syrk`` too, but allocates an m x m result each time and copies
its triangle into the other half; scipy's wrappers hold the GIL for the whole product.
So the routines are called through ctypes (:mod:`kpca_dask.blocks.blas_routines`),
the lower triangle a block of columns at a time, as the Cholesky factorisation's
trailing update is (:mod:`kpca_dask.engine.solve.blocked_cholesky`): ``syrk`` on the
diagonal block of :data:`UPDATE` columns and ``gemm`` below it, since OpenBLAS's
threaded ``syrk`` of a whole large matrix takes the process down. At m = 10^4 and
10 000 float32 rows on two threads of an Intel Xeon (OpenBLAS SkylakeX), the pass's
update took 2.8-2.9 s a block in a fit this way, 3.1-3.2 s by numpy's panel products.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .blas_routines import CHAR, INT, by_int, routine

__all__ = ["syrk_lower", "accepts", "UPDATE"]

#: Columns one ``syrk`` updates (its diagonal block); the rows below take a ``gemm``.
#: The threaded ``dsyrk`` of a whole C in scipy's OpenBLAS (0.3.30) segfaulted at
#: m = 16 000 and passed at 15 000, its ``ssyrk`` at 28 000 and 24 000 (two threads,
#: SkylakeX kernels): blocks of 4096 stay far below. At m = 10^4 the syrk alone took
#: 2.5-2.7 s with them, as one whole syrk did, and 2.85 s with blocks of 2048 (10 000
#: float32 rows, two threads).
UPDATE = 4096


@functools.lru_cache(maxsize=None)
def _routines(dtype: np.dtype):
    """``syrk`` and ``gemm`` of ``dtype`` (s or d), with their scalars' ctypes type."""
    prefix = {np.dtype(np.float32): "s", np.dtype(np.float64): "d"}[dtype]
    real = np.ctypeslib.as_ctypes_type(dtype)
    scalar, array = ctypes.POINTER(real), ctypes.c_void_p
    syrk = routine("cython_blas", f"{prefix}syrk", CHAR, CHAR, INT, INT, scalar, array, INT,
                   scalar, array, INT)
    gemm = routine("cython_blas", f"{prefix}gemm", CHAR, CHAR, INT, INT, INT, scalar, array,
                   INT, array, INT, scalar, array, INT)
    return syrk, gemm, real


def _leading(array: np.ndarray, unit_axis: int) -> int | None:
    """The leading dimension of the 2-d ``array`` as BLAS reads it, when ``unit_axis`` has
    unit stride and the other axis's steps do not overlap (a broadcast or a sliding window
    would make BLAS read or write past the array); None otherwise."""
    itemsize = array.dtype.itemsize
    other = 1 - unit_axis
    if array.strides[unit_axis] != itemsize and array.shape[unit_axis] > 1:
        return None
    step, remainder = divmod(array.strides[other], itemsize)
    if array.shape[other] <= 1:
        step = max(step, array.shape[unit_axis], 1)
    if remainder or step < max(1, array.shape[unit_axis]) or step >= 2**31:
        return None
    return step


def accepts(D: np.ndarray, C: np.ndarray) -> bool:
    """Whether :func:`syrk_lower` takes ``D`` and ``C``: float32 or float64 alike, C
    column-major, m x m and writeable, D (rows x m) with unit stride along one axis; neither
    a broadcast or other view whose rows or columns overlap.

    Examples
    --------
    >>> accepts(np.ones((3, 2)), np.zeros((2, 2), order="F"))
    True
    >>> accepts(np.ones((3, 2), np.float32), np.zeros((2, 2), order="F"))
    False
    """
    return (D.ndim == 2 and C.ndim == 2 and D.dtype == C.dtype
            and D.dtype in (np.float32, np.float64) and D.dtype.isnative
            and C.flags.writeable and C.flags.aligned and D.flags.aligned
            and C.shape == (D.shape[1], D.shape[1]) and _leading(C, 0) is not None
            and (_leading(D, 1) is not None or _leading(D, 0) is not None)
            and max(D.shape) < 2**31)


def syrk_lower(D: np.ndarray, C: np.ndarray, beta: float = 1.0, update: int = UPDATE,
               alpha: float = 1.0) -> np.ndarray:
    """``C = beta C + alpha D^T D`` on the lower triangle of the column-major ``C``, in place.

    ``D`` is rows x m, row- or column-major (a block of a larger array is read in
    place). C's upper triangle is neither read nor written; with ``beta = 0`` its
    lower one is not read either, so it may hold anything. ``update`` is the columns of
    a diagonal block (:data:`UPDATE`; a smaller one takes every path on a small C). C may
    be a block of a larger column-major array (the Cholesky factorisation's trailing
    matrix, updated with ``alpha = -1``).

    Examples
    --------
    >>> C = np.zeros((2, 2), order="F")
    >>> syrk_lower(np.array([[1.0, 2.0], [3.0, 4.0]]), C)
    array([[10.,  0.],
           [14., 20.]])
    """
    if not accepts(D, C):
        raise TypeError(f"syrk_lower takes a float32/float64 D and a column-major C of its "
                        f"dtype and shape (m, m); got D {D.dtype} {D.shape} {D.strides}, "
                        f"C {C.dtype} {C.shape} {C.strides}")
    rows, m = D.shape
    if m == 0:
        return C
    syrk, gemm, real = _routines(D.dtype)
    word, ldc = D.itemsize, _leading(C, 0)
    row_major = _leading(D, 1)
    if row_major is not None:  # to BLAS, A = D^T (m x rows): C += A A^T
        trans, other, lda = b"N", b"T", row_major
        column_step = word  # D's column j is A's row j: j words on
    else:  # A = D (rows x m): C += A^T A
        trans, other, lda = b"T", b"N", _leading(D, 0)
        column_step = word * lda  # D's column j: j lda words on
    times, scale = ctypes.byref(real(alpha)), ctypes.byref(real(beta))

    def column(j: int) -> int:
        return D.ctypes.data + j * column_step

    def entry(i: int, j: int) -> int:
        return C.ctypes.data + word * (i + j * ldc)

    for j in range(0, m, update):  # C_jj = beta C_jj + alpha D_j^T D_j, then the rows below
        w, below = min(update, m - j), max(0, m - j - update)
        syrk(CHAR(b"L"), CHAR(trans), by_int(w), by_int(rows), times, column(j),
             by_int(lda), scale, entry(j, j), by_int(ldc))
        if below:  # C_ij = beta C_ij + alpha D_i^T D_j for the columns i after the block
            gemm(CHAR(trans), CHAR(other), by_int(below), by_int(w), by_int(rows), times,
                 column(j + w), by_int(lda), column(j), by_int(lda), scale, entry(j + w, j),
                 by_int(ldc))
    return C
