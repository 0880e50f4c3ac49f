"""The compiled kernel epilogue against the numpy formulas it replaced."""

from __future__ import annotations

import json
import math
import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest

from kpca_dask.blocks import epilogue
from kpca_dask.blocks.epilogue import exponent_floor
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.blocks.landmark_kernel import LandmarkKernel
from kpca_dask.blocks.matern import matern_from_scaled_distance

DTYPES = (np.float32, np.float64)


def _exponents(dtype):
    """Exponents over the whole range: 0, tiny, ordinary, near and far below the floor."""
    floor = exponent_floor(dtype)
    values = np.concatenate([
        [0.0, -0.0, 1e-7, -5e-324],  # a positive exponent is rounding
        -np.logspace(-12, 3, 3001),
        np.linspace(floor - 5.0, floor + 5.0, 1001),
        [floor, -1e30],
    ])
    return values.astype(dtype)


def _floored(values, dtype):
    """The numpy oracle's last step: no result below exp(exponent_floor), in ``dtype``."""
    values = np.maximum(values, math.exp(exponent_floor(dtype)))
    return values.astype(dtype)


def _assert_ulps(got, expected, dtype, ulps):
    spacing = np.spacing(np.abs(expected).astype(dtype)).astype(np.float64)
    error = np.abs(got.astype(np.float64) - expected.astype(np.float64)) / spacing
    excess = error - ulps
    assert excess.max() <= 0, f"{error[np.argmax(excess)]:.1f} ulp at {np.argmax(excess)}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_matches_numpy_exp_to_an_ulp_over_the_whole_range(dtype):
    """exp(clip(t, floor, 0)) is within 1 ulp of numpy's exp (float32 too, at degree 7)."""
    x = _exponents(dtype)
    got = epilogue.finish_tile(x.copy().reshape(1, -1), epilogue.EXP)[0]
    clipped = np.clip(x.astype(np.float64), exponent_floor(dtype), 0.0)
    _assert_ulps(got, np.exp(clipped).astype(dtype), dtype, 1)
    assert got.min() >= np.finfo(dtype).tiny  # no subnormal value
    assert got[0] == 1.0 and got[2] == 1.0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 4101), (7,), (0,), (8192,), (5, 3)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_exp_of_any_array_keeps_every_value_of_the_one_value_loop(dtype, shape, order):
    """exp_floor_into takes any shape, in place, in both orders, and every value is the one
    the epilogue gives it alone (a row of one: no vector lanes), bit for bit: no
    reassociation, so the vector width does not change a result."""
    x = np.resize(_exponents(dtype), shape).astype(dtype, order=order)
    expected = epilogue.finish_tile(x.reshape(-1, 1).copy(), epilogue.EXP).reshape(shape)
    got = epilogue.exp_floor_into(x)
    assert got is x
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("nu, code", [(0.5, epilogue.MATERN_HALF), (1.5, epilogue.MATERN_3_2),
                                      (2.5, epilogue.MATERN_5_2)])
def test_matern_closed_forms_match_the_numpy_formulas(dtype, nu, code):
    """Matérn 1/2, 3/2, 5/2 from squared distances: the numpy formulas to a few ulp, floored."""
    d2 = np.concatenate([[0.0, 1e-300], np.logspace(-12, 6, 4001)]).astype(dtype)
    scale = math.sqrt(2.0 * nu) * math.sqrt(2.0 * 0.7)
    got = epilogue.finish_tile(d2.copy().reshape(1, -1), code, a=scale)[0]
    d = np.sqrt(d2.astype(np.float64)) * math.sqrt(2.0 * 0.7)
    expected = matern_from_scaled_distance(d, nu)
    # Where exp(-t) is subnormal, numpy's product keeps fewer digits than the
    # compiled one: there the oracle is the same formula, as (factor e^(-t/2)) e^(-t/2).
    t = math.sqrt(2.0 * nu) * d
    factor = {0.5: np.ones_like(t), 1.5: 1 + t, 2.5: 1 + t + t * t / 3}[nu]
    deep = t > 700.0
    expected[deep] = factor[deep] * np.exp(-t[deep] / 2) * np.exp(-t[deep] / 2)
    expected = _floored(expected, dtype)
    # t = a d is rounded in the dtype before exp(-t), as numpy did: a few t ulps more.
    _assert_ulps(got, expected, dtype, 8 + 4 * t)
    assert got[0] == 1.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_polynomial_and_sigmoid_match_the_numpy_formulas(dtype):
    """(a t + b)^degree and tanh(a t + b) elementwise, negative products included."""
    t = np.linspace(-50.0, 50.0, 2001).astype(dtype)
    for code, formula, tolerance in [
        (epilogue.POLYNOMIAL, lambda v: (0.3 * v + 1.0) ** 3, 4),
        (epilogue.SIGMOID, lambda v: np.tanh(0.3 * v + 1.0), 4),
    ]:
        got = epilogue.finish_tile(t.copy().reshape(1, -1), code, a=0.3, b=1.0, degree=3)[0]
        expected = formula(t.astype(np.float64))
        scale = np.maximum(np.abs(expected), 1.0)  # cancellation near the root of a t + b
        error = np.abs(got - expected) / scale
        assert error.max() <= tolerance * np.finfo(dtype).eps * 50


@pytest.mark.parametrize("dtype", DTYPES)
def test_shift_and_column_sums_are_fused_into_the_same_pass(dtype):
    """tile - shift, and the float64 column sums of the shifted values, added to what was there."""
    rng = np.random.default_rng(0)
    tile = -rng.random((37, 11)).astype(dtype) * 5
    shift = rng.random(11)
    sums = np.full(11, 2.0)
    got = epilogue.finish_tile(tile.copy(), epilogue.EXP, shift=shift, column_sums=sums)
    expected = np.exp(tile.astype(np.float64)) - shift.astype(dtype)
    np.testing.assert_allclose(got, expected, rtol=0, atol=4 * np.finfo(dtype).eps)
    np.testing.assert_allclose(sums, 2.0 + got.astype(np.float64).sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel, params", [
    ("rbf", {"gamma": 0.2}), ("laplacian", {"gamma": 0.2}), ("matern", {"gamma": 0.2, "nu": 0.5}),
    ("matern", {"gamma": 0.2, "nu": 1.5}), ("matern", {"gamma": 0.2, "nu": 2.5}),
    ("matern", {"gamma": 0.2, "nu": math.inf}), ("matern", {"gamma": 0.2, "nu": 3.7}),
    ("polynomial", {"gamma": 0.2, "degree": 2, "coef0": 1.0}),
    ("sigmoid", {"gamma": 0.05, "coef0": 0.1}), ("linear", {}), ("cosine", {}),
])
def test_landmark_kernel_rows_equal_pairwise_kernel_minus_shift(dtype, kernel, params):
    """LandmarkKernel.into with shift and column sums is pairwise_kernel - shift, every kernel."""
    rng = np.random.default_rng(1)
    A = (rng.normal(size=(300, 6)) * 3).astype(dtype)
    Z = rng.normal(size=(40, 6)) * 3  # float64 landmarks, whatever the blocks' dtype
    shift = rng.random(40) * 0.1
    sums = np.zeros(40)
    out = np.empty((300, 40), dtype)
    LandmarkKernel(Z, kernel, params, dtype).into(out, A, shift, sums)
    expected = pairwise_kernel(A.astype(np.float64), Z, kernel, **params) - shift
    atol = (1e-11 if dtype == np.float64 else 2e-5) * max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(out, expected, rtol=0, atol=atol)
    np.testing.assert_allclose(sums, out.astype(np.float64).sum(axis=0), rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 registers")
def test_exp_loop_is_vectorised_with_packed_registers():
    """The compiled float64 epilogue uses packed ymm/zmm fused multiply-adds (its exp
    loops: a Horner step is one; the count covers every loop of the function)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__

    if not (__cpu_features__.get("AVX2") and __cpu_features__.get("FMA3")):
        pytest.skip("the CPU has no AVX2/FMA")
    import numba

    # A fresh, uncached compilation of the epilogue: numba cannot inspect cached code.
    finish = numba.njit(nogil=True, fastmath={"contract"})(epilogue._finish.py_func)
    tile = np.zeros((1, 64))
    log2e, ln2_hi, ln2_lo, shifter = epilogue._constants(np.float64)
    finish(tile, epilogue.EXP, 1.0, 0.0, 1, -700.0, 0.0, np.zeros(64), np.zeros(64),
           True, True, True, log2e, ln2_hi, ln2_lo, shifter,
           tuple(1.0 / math.factorial(n) for n in range(14)), 0.0, 1.0 / 3.0)
    assert tile[0, 0] == 1.0
    assembly = "\n".join(finish.inspect_asm().values())
    assert len(re.findall(r"vfmadd\w*pd\s[^\n]*%[yz]mm", assembly)) >= 10


@pytest.mark.slow
def test_cache_directory_is_honoured_and_a_second_process_does_not_compile(tmp_path):
    """With NUMBA_CACHE_DIR set, the first process writes the cache and the next only loads it."""
    script = ("import json; from kpca_dask.blocks import epilogue; epilogue.compile_all(); "
              "s = epilogue._finish.stats; "
              "print(json.dumps([sum(s.cache_hits.values()), sum(s.cache_misses.values())]))")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = []
    for _ in range(2):
        child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                               text=True, check=True)
        runs.append(tuple(json.loads(child.stdout.strip().splitlines()[-1])))
    assert list(tmp_path.rglob("*.nbi")), "no cache index written"
    assert runs[0][1] >= 1  # the first process compiled
    assert runs[1] == (2, 0)  # the second loaded both dtypes and compiled nothing
