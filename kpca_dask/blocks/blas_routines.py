"""scipy's BLAS and LAPACK routines called through ctypes, which releases the GIL.

scipy publishes its Fortran BLAS and LAPACK for Cython code (``scipy.linalg.cython_blas``,
``cython_lapack``); numba's ``get_cython_function_address`` finds a routine's address
there, and a ctypes prototype calls it. Every argument is a pointer, as in Fortran.
Unlike scipy's Python wrappers, which hold the GIL for the whole call, the call then
lets the process's other threads run: a distributed worker's event loop, the pass's
other chains. Used where the wrappers cannot say what is needed (a block inside a larger
array, in place) or where holding the GIL would stall the process
(:mod:`kpca_dask.engine.solve.blocked_cholesky`, :mod:`kpca_dask.blocks.rank_update`).
"""

from __future__ import annotations

import ctypes
import functools

__all__ = ["routine", "CHAR", "INT", "by_int"]

#: Argument types: a one-character option, and an integer by reference.
CHAR, INT = ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)


@functools.lru_cache(maxsize=None)
def routine(module: str, name: str, *argtypes):
    """scipy's ``module.name`` (e.g. ``"cython_blas", "dsyrk"``) as a ctypes function.

    Examples
    --------
    >>> import numpy as np
    >>> double = ctypes.POINTER(ctypes.c_double)
    >>> dscal = routine("cython_blas", "dscal", INT, double, ctypes.c_void_p, INT)
    >>> x = np.array([1.0, 2.0])
    >>> dscal(by_int(2), ctypes.byref(ctypes.c_double(3.0)), x.ctypes.data, by_int(1))
    >>> x
    array([3., 6.])
    """
    from numba.extending import get_cython_function_address  # noqa: PLC0415 - at first use

    address = get_cython_function_address(f"scipy.linalg.{module}", name)
    return ctypes.CFUNCTYPE(None, *argtypes)(address)


def by_int(value: int):
    """``value`` as a Fortran integer argument (a pointer to a C int).

    Examples
    --------
    >>> type(by_int(3)).__name__  # passed where a routine takes an INT (see routine)
    'CArgObject'
    """
    return ctypes.byref(ctypes.c_int(value))
