"""The Cholesky factor of K_mm on every core, at every m (docs/design.md §11).

OpenBLAS's own threaded ``dpotrf`` takes the process down on large arrays
(from m = 16 000 with its SkylakeX kernels here, docs/design.md §11), so the
factor of a large K_mm ran on one thread. Here the factorisation is blocked
and right-looking, in place, in the Fortran-ordered buffer K_mm was computed
in::

    for each diagonal panel k (nb columns):
        L_kk = potrf(A_kk)                       LAPACK, one thread (nb^3 / 3 flops)
        L_ik = A_ik L_kk^-T        (i > k)       BLAS trsm, every thread
        A_ii -= L_ik L_ik^T        (trailing)    BLAS syrk on diagonal blocks of
                                                 UPDATE columns, gemm below them

Only the panels' ``potrf`` is LAPACK's, on arrays of :data:`PANEL` columns,
far below any size that failed; the m^3 / 3 flops are level-3 BLAS calls that
OpenBLAS threads on its own. The calls go to scipy's BLAS and LAPACK by the
addresses scipy exports for Cython (``scipy.linalg.cython_blas``), called
with ctypes, which drops the GIL (:mod:`kpca_dask.blocks.blas_routines`): they
take leading dimensions, so the panels and the trailing matrix are worked on
where they lie, with no copy.

A panel whose pivot L_jj^2 is at most ``cutoff`` stops the factorisation
there (as LAPACK's ``potrf`` stops at a pivot that is not positive): the
caller then takes the pivoted, rank-revealing factorisation
(:mod:`kpca_dask.engine.solve.landmark_factor`), and the trailing updates past
that panel, which it would discard, are never made.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..._parallel import single_blas_thread
from ...blocks.blas_routines import CHAR, INT, by_int, routine
from ...blocks.rank_update import syrk_lower

__all__ = ["blocked_cholesky", "PANEL", "UPDATE"]

#: Columns of a diagonal panel: LAPACK's potrf on 512 x 512 (a few ms on one thread),
#: and a rank-512 trailing update, where syrk is at its full rate.
PANEL = 512

#: Columns of the trailing matrix one ``syrk`` updates (its diagonal block); the rows
#: below it take a ``gemm``. OpenBLAS's threaded syrk of the whole trailing matrix
#: segfaulted at m = 20 000 on two threads (SkylakeX kernels), as its threaded potrf,
#: which calls it, does; GEMM and small syrks are its most used threaded paths.
UPDATE = 2048

_DOUBLE = ctypes.POINTER(ctypes.c_double)


def _potrf():
    return routine("cython_lapack", "dpotrf", CHAR, INT, ctypes.c_void_p, INT, INT)


def _trsm():
    return routine("cython_blas", "dtrsm", CHAR, CHAR, CHAR, CHAR, INT, INT, _DOUBLE,
                    ctypes.c_void_p, INT, ctypes.c_void_p, INT)


def _double(value: float):
    return ctypes.byref(ctypes.c_double(value))


def blocked_cholesky(A: np.ndarray, cutoff: float = 0.0, panel: int = PANEL,
                     update: int = UPDATE) -> int:
    """Factorise the Fortran-ordered symmetric ``A`` in place: L in its lower triangle.

    Returns 0 when every pivot L_jj^2 is above ``cutoff`` (the factor is then
    complete); otherwise the 1-based column of the first panel that has a pivot
    at or below it, or that LAPACK found not positive definite, and A is left
    part-factorised. The upper triangle is not read and not written. ``panel``
    and ``update`` are the columns of a diagonal panel and of a trailing block
    (:data:`PANEL`, :data:`UPDATE`); smaller ones take every path of the loop
    on a small matrix.

    Examples
    --------
    >>> A = np.asfortranarray([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    >>> K = A.copy()
    >>> blocked_cholesky(A, panel=2)
    0
    >>> L = np.tril(A)
    >>> bool(np.allclose(L @ L.T, K))
    True
    >>> blocked_cholesky(np.asfortranarray([[1.0, 2.0], [2.0, 1.0]]))
    1
    """
    m = A.shape[0]
    if A.shape != (m, m) or A.dtype != np.float64 or not A.flags.f_contiguous:
        raise ValueError("blocked_cholesky needs a square, Fortran-ordered float64 array")
    base, word = A.ctypes.data, A.itemsize

    def at(row: int, column: int) -> int:
        return base + word * (row + column * m)

    lower, right, transposed, plain = CHAR(b"L"), CHAR(b"R"), CHAR(b"T"), CHAR(b"N")
    potrf, trsm = _potrf(), _trsm()
    for k in range(0, m, panel):
        b = min(panel, m - k)
        info = ctypes.c_int(0)
        with single_blas_thread():  # LAPACK's own potrf, on a small panel only
            potrf(lower, by_int(b), at(k, k), by_int(m), ctypes.byref(info))
        pivots = np.diagonal(A)[k:k + b]
        if info.value != 0 or not np.all(pivots * pivots > cutoff):
            return k + 1
        rest = m - k - b
        if rest:
            trsm(right, lower, transposed, plain, by_int(rest), by_int(b), _double(1.0), at(k, k),
                 by_int(m), at(k + b, k), by_int(m))
            # The trailing matrix less L_k L_k^T (L_k the panel's rows below it): syrk on
            # diagonal blocks of `update` columns, gemm below each, where they lie.
            syrk_lower(A[k + b:, k:k + b].T, A[k + b:, k + b:], beta=1.0, alpha=-1.0,
                       update=update)
    return 0
