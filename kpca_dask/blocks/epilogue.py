"""Compiled kernel epilogue: from a GEMM tile to shifted kernel values and column sums.

A kernel block is one GEMM (inner products, or the exponent of an rbf from
augmented rows) followed by elementwise work: the kernel's function, the
floor that keeps exp and the products of its results away from subnormal
numbers, the reference shift
``D = B - 1 r^T`` and the column sums (docs/design.md §2, §8). numpy does
each step as its own pass over the tile and takes whatever SIMD path it has
for ``exp``: on a CPU without AVX-512, numpy's float64 exp costs about
10 ns per value against 0.7 ns with it. Here the steps are one compiled loop
per tile row, with an exp of our own that LLVM vectorises on any CPU:

- Cody-Waite reduction ``x = k ln2 + r`` with ``|r| <= ln2 / 2``, ``ln2``
  split in a high part exact in ``k ln2`` and a low part;
- ``e^r`` by its Taylor polynomial in Horner form, to degree 13 in float64
  and 7 in float32 (:data:`TAYLOR_DEGREE`: truncation far below rounding);
- ``2^k`` built from the exponent bits: adding ``1.5 * 2^52`` (``2^23`` in
  float32) leaves ``k`` in the low bits of the sum, so
  ``(bits + bias) << mantissa_bits`` is ``2^k`` with integer operations
  only (a packed float-to-int64 conversion does not exist before AVX-512),
  read through a bit cast (:func:`_power_of_two`), so that the whole exp is
  one loop over the row, in float64 fused with the shift and the column sums:
  0.82 ns a value against 1.07 for three loops through scratch rows (float32,
  whose float64 sums keep a loop of their own: 0.45 against 0.59; m = 1000,
  Intel Xeon with AVX-512, where LLVM prefers 256-bit vectors).

The input exponent is clipped to ``[exponent_floor, 0]`` first, as in
:func:`kpca_dask.blocks.distance_kernels.exp_nonpositive`, so ``k + bias`` is always a
normal exponent. Only ``fastmath={"contract"}`` is used (fused multiply-adds):
no reassociation, so the shifter trick survives and results do not depend
on the vector width. No numba threading: Dask and BLAS supply parallelism,
and ``nogil=True`` lets Dask's threads run tiles at the same time.
Compiled functions are cached on disk (``NUMBA_CACHE_DIR`` when set).
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["EXP", "RBF", "LAPLACIAN", "MATERN_HALF", "MATERN_3_2", "MATERN_5_2",
           "POLYNOMIAL", "SIGMOID", "IDENTITY", "finish_tile", "exp_floor_into", "exponent_floor"]

#: Epilogue codes: what the tile holds and which function turns it into kernel values.
IDENTITY = 0     # the tile is the kernel (linear, cosine)
EXP = 1          # the tile is an exponent: exp(clip(t, floor, 0)) (rbf, laplacian)
RBF = EXP
LAPLACIAN = EXP
MATERN_HALF = 2  # the tile is d^2: exp(-a d)
MATERN_3_2 = 3   # the tile is d^2: (1 + t) exp(-t), t = a d
MATERN_5_2 = 4   # the tile is d^2: (1 + t + t^2 / 3) exp(-t), t = a d
POLYNOMIAL = 5   # the tile is <x, z>: (a <x, z> + b)^degree
SIGMOID = 6      # the tile is <x, z>: tanh(a <x, z> + b)

_JIT = dict(nogil=True, cache=True, fastmath={"contract"}, error_model="numpy")

_LN2 = math.log(2.0)

#: Degree of the Taylor polynomial of e^r, |r| <= ln2 / 2, by dtype. Its relative
#: truncation error, below (ln2 / 2)^(n + 1) / (n + 1)! / e^(-ln2 / 2), is 6e-18 at degree 13
#: (float64's unit roundoff 1.1e-16) and 7e-9 at degree 7 (float32's 6e-8); degree 6
#: would leave 1.7e-7 in float32. At degree 7 the float32 epilogue (exp, shift and column
#: sums) took 0.73-0.77 ns a value against 0.82-0.92 at degree 13 (m = 10^4, Intel Xeon).
TAYLOR_DEGREE = {np.dtype(np.float64): 13, np.dtype(np.float32): 7}


def exponent_floor(dtype) -> float:
    """The smallest exponent the epilogue's exp takes, for ``dtype``.

    Half the log of the smallest normal number, plus 1: exp of it squared is a
    normal number, e^2 times the smallest, so that neither a kernel value nor
    the product of two (the pass's B^T B, the updates of K_mm's Cholesky
    factorisation, a transform's B P) is subnormal. Subnormal numbers run on
    the CPU's slow path, on Intel's cores about a hundred times slower: with
    the floor at the log of the smallest number itself (kernel values down to
    1.6e-307), the Cholesky factorisation of a 5000 x 5000 rbf K_mm of
    well-separated blobs took 60 s against 0.5 s (Intel Xeon, AVX-512). A
    value clipped here is at most 1.3e-153 (float32: 2.9e-19) where the
    kernel's largest is 1: far below rounding.

    Examples
    --------
    >>> round(exponent_floor(np.float32), 2), round(exponent_floor(np.float64), 2)
    (-42.67, -353.2)
    """
    return 0.5 * float(np.log(np.finfo(dtype).tiny)) + 1.0


def _constants(dtype) -> tuple:
    """(log2 e, ln2 high, ln2 low, shifter) in ``dtype``."""
    dtype = np.dtype(dtype)
    f = dtype.type
    if dtype == np.float64:
        # fdlibm's split: ln2_hi has 32 significant bits, so k ln2_hi is exact for
        # |k| < 2^21, and ln2_hi + ln2_lo is ln 2 to 2^-85 (the double nearest
        # ln 2 is 2e-17 off, which k = -1000 would make 2e-14).
        ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
        shifter = 1.5 * 2.0**52
    else:
        # Cephes' float32 split: 0.693359375 has 9 significant bits.
        ln2_hi, ln2_lo = 0.693359375, -2.12194440e-4
        shifter = 1.5 * 2.0**23
    return f(1.0 / _LN2), f(ln2_hi), f(ln2_lo), f(shifter)


@intrinsic
def _power_of_two(typingctx, t):
    """``2^k`` for ``t = k + shifter`` (:func:`_constants`), whose significand's low bits
    hold ``k``: the bits of ``t`` plus the exponent bias, shifted into the exponent field,
    read as a float of ``t``'s width. Integer operations on the bits only, which LLVM
    vectorises with the rest of the loop."""
    if not isinstance(t, types.Float):
        return None
    width = t.bitwidth
    bias, bits = (1023, 52) if width == 64 else (127, 23)

    def codegen(context, builder, signature, args):
        integer = ir.IntType(width)
        exponent = builder.add(builder.bitcast(args[0], integer), ir.Constant(integer, bias))
        exponent = builder.shl(exponent, ir.Constant(integer, bits))
        return builder.bitcast(exponent, context.get_value_type(t))

    return t(t), codegen


@numba.njit(inline="always", **_JIT)
def _exp_floor(x, low, log2e, ln2_hi, ln2_lo, shifter, c, zero):
    """exp(clip(x, low, 0)) with x = k ln2 + r."""
    x = min(max(x, low), zero)
    t = x * log2e + shifter
    k = t - shifter
    r = (x - k * ln2_hi) - k * ln2_lo
    # Taylor series of e^r in Horner form, c[n] = 1/n! in the dtype of x, to the degree
    # of :data:`TAYLOR_DEGREE` (the tuple's length is known when compiled: unrolled).
    p = c[len(c) - 1]
    for n in range(len(c) - 2, -1, -1):
        p = p * r + c[n]
    return p * _power_of_two(t)


@numba.njit(**_JIT)
def _finish(tile, code, a, b, degree, low, tiny, shift, column_sums, use_shift, use_sums,
            one_loop, log2e, ln2_hi, ln2_lo, shifter, c, zero, one_third):
    n, m = tile.shape
    one, half, third = c[0], c[2], one_third
    for i in range(n):
        row = tile[i]
        if code == EXP and use_shift and use_sums and one_loop:  # one loop does it all
            for j in range(m):
                value = _exp_floor(row[j], low, log2e, ln2_hi, ln2_lo, shifter, c, zero)
                value -= shift[j]
                row[j] = value
                column_sums[j] += value
            continue
        if code == EXP:
            for j in range(m):
                row[j] = _exp_floor(row[j], low, log2e, ln2_hi, ln2_lo, shifter, c, zero)
        elif code == MATERN_HALF or code == MATERN_3_2 or code == MATERN_5_2:
            # e^-t as (e^(-t/2))^2 after the polynomial factor: (1 + t + t^2/3) e^-t
            # stays a normal number for t somewhat past -exponent_floor, where
            # e^-t alone is below the floor; the floor then applies to the product.
            for j in range(m):
                t = np.sqrt(max(row[j], zero)) * a
                e = _exp_floor(-half * t, low, log2e, ln2_hi, ln2_lo, shifter, c, zero)
                if code == MATERN_HALF:
                    factor = one
                elif code == MATERN_3_2:
                    factor = one + t
                else:
                    factor = one + t + t * t * third
                row[j] = max(factor * e * e, tiny)
        elif code == POLYNOMIAL:
            for j in range(m):
                row[j] = (a * row[j] + b) ** degree
        elif code == SIGMOID:
            for j in range(m):
                row[j] = np.tanh(a * row[j] + b)
        if use_shift:
            for j in range(m):
                row[j] -= shift[j]
        if use_sums:
            for j in range(m):
                column_sums[j] += row[j]


_EMPTY64 = np.zeros(0)


def finish_tile(tile: np.ndarray, code: int, *, a: float = 1.0, b: float = 0.0,
                degree: int = 1, shift: np.ndarray | None = None,
                column_sums: np.ndarray | None = None) -> np.ndarray:
    """Turn a GEMM tile into kernel values in place, shift them and add up their columns.

    ``tile`` (C-contiguous float32 or float64, rows x m) holds what the code
    says (module constants); ``a``, ``b`` and ``degree`` are the kernel's
    scale, offset and degree. Then ``tile -= shift`` (length m, when given),
    and the columns of the result are added to ``column_sums`` (float64, when
    given), in the same pass over each row.

    Examples
    --------
    >>> tile = np.array([[0.0, -1.0, -1e4]])
    >>> finish_tile(tile, EXP).round(4)
    array([[1.    , 0.3679, 0.    ]])
    >>> sums = np.zeros(2)
    >>> finish_tile(np.array([[1.0, 2.0], [3.0, 4.0]]), IDENTITY, shift=np.array([1.0, 1.0]),
    ...             column_sums=sums)
    array([[0., 1.],
           [2., 3.]])
    >>> sums
    array([2., 4.])
    """
    dtype = tile.dtype
    if dtype not in (np.float32, np.float64) or not tile.flags.c_contiguous or tile.ndim != 2:
        raise TypeError(f"finish_tile takes a C-contiguous 2-d float32/float64 tile, got "
                        f"{tile.dtype} {tile.shape}")
    f = dtype.type
    log2e, ln2_hi, ln2_lo, shifter = _constants(dtype)
    low = exponent_floor(dtype)
    _finish(tile, int(code), f(a), f(b), int(degree), f(low), f(math.exp(low)),
            _EMPTY64.astype(dtype) if shift is None else np.ascontiguousarray(shift, dtype),
            _EMPTY64 if column_sums is None else column_sums,
            shift is not None, column_sums is not None,
            # float32 values added to float64 sums in the exp's loop: 0.65 ns a value
            # against 0.47 in loops of their own (Intel Xeon, m = 1000).
            dtype == np.float64, log2e, ln2_hi, ln2_lo, shifter,
            tuple(f(1.0 / math.factorial(n)) for n in range(TAYLOR_DEGREE[dtype] + 1)), f(0.0),
            f(1.0 / 3.0))
    return tile


def exp_floor_into(x: np.ndarray) -> np.ndarray:
    """``exp(clip(x, exponent_floor, 0))`` in place, for any shape of float32/float64 array.

    Examples
    --------
    >>> exp_floor_into(np.array([0.0, -1.0])).round(4)
    array([1.    , 0.3679])
    """
    if not x.flags.c_contiguous:
        x[...] = exp_floor_into(np.ascontiguousarray(x))
        return x
    # One row of every value: the loop keeps nothing per column, so its length costs nothing.
    finish_tile(x.reshape(1, -1), EXP)
    return x


def compile_all() -> float:
    """Compile (or load from numba's cache) every epilogue; return the seconds it took.

    Run once where the cache directory is writable, for instance when a
    container image is built, so that workers start without compiling.

    Examples
    --------
    >>> compile_all() >= 0.0
    True
    """
    started = time.perf_counter()
    for dtype in (np.float32, np.float64):
        tile = np.zeros((1, 2), dtype)
        finish_tile(tile, EXP, shift=np.zeros(2), column_sums=np.zeros(2))
    return time.perf_counter() - started
