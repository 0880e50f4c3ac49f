"""Kernel blocks against scikit-learn and scipy on small arrays."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.gaussian_process.kernels import Matern
from sklearn.metrics import pairwise

from kpca_dask.blocks.distance_kernels import squared_distances
from kpca_dask.blocks.kernels import (
    POINT_KERNEL_NAMES,
    kernel_diagonal,
    pairwise_kernel,
)
from kpca_dask.model.parameters import resolve_kernel_params

SKLEARN_EQUIVALENTS = {
    "rbf": (pairwise.rbf_kernel, {"gamma": 0.3}),
    "laplacian": (pairwise.laplacian_kernel, {"gamma": 0.3}),
    "polynomial": (pairwise.polynomial_kernel, {"gamma": 0.2, "degree": 3, "coef0": 1.5}),
    "linear": (pairwise.linear_kernel, {}),
    "sigmoid": (pairwise.sigmoid_kernel, {"gamma": 0.1, "coef0": 0.5}),
    "cosine": (pairwise.cosine_similarity, {}),
}
TOLERANCE = {np.float64: 1e-12, np.float32: 2e-5}


@pytest.fixture
def blocks(rng):
    return rng.normal(size=(17, 4)), rng.normal(size=(9, 4))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", sorted(SKLEARN_EQUIVALENTS))
def test_kernel_matches_sklearn(blocks, kernel, dtype):
    """Each named kernel equals sklearn.metrics.pairwise in float64 and float32."""
    A, B = (b.astype(dtype) for b in blocks)
    reference, params = SKLEARN_EQUIVALENTS[kernel]
    expected = reference(blocks[0], blocks[1], **params)
    got = pairwise_kernel(A, B, kernel, **params)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5, 0.8, 4.0])
def test_matern_matches_sklearn(blocks, nu):
    """Matérn with gamma equals sklearn's Matern(length_scale=1/sqrt(2 gamma), nu)."""
    A, B = blocks
    gamma = 0.4
    expected = Matern(length_scale=1.0 / np.sqrt(2.0 * gamma), nu=nu)(A, B)
    np.testing.assert_allclose(pairwise_kernel(A, B, "matern", gamma=gamma, nu=nu), expected,
                               rtol=1e-9, atol=1e-12)


def test_matern_infinite_nu_is_rbf(blocks):
    """nu = inf gives exactly the rbf kernel with the same gamma."""
    A, B = blocks
    np.testing.assert_allclose(pairwise_kernel(A, B, "matern", gamma=0.7, nu=np.inf),
                               pairwise_kernel(A, B, "rbf", gamma=0.7), rtol=1e-12)


@pytest.mark.parametrize("kernel", POINT_KERNEL_NAMES)
def test_diagonal_matches_full_block(blocks, kernel):
    """kernel_diagonal equals the diagonal of k(A, A) for every kernel."""
    A = blocks[0]
    params = resolve_kernel_params(kernel, A.shape[1], gamma=0.3)
    np.testing.assert_allclose(kernel_diagonal(A, kernel, **params),
                               np.diag(pairwise_kernel(A, A, kernel, **params)), rtol=1e-12)


def test_callable_kernel_and_its_diagonal(blocks):
    """A callable kernel is used as given, with kernel_params as keyword arguments."""
    A, B = blocks

    def scaled_linear(a, b, scale=1.0):
        return scale * a @ b.T

    np.testing.assert_allclose(pairwise_kernel(A, B, scaled_linear, scale=2.0), 2.0 * A @ B.T)
    np.testing.assert_allclose(kernel_diagonal(A, scaled_linear, scale=2.0),
                               2.0 * np.sum(A * A, axis=1))


def _unclipped_expansion(A):
    """|a|^2 + |a'|^2 - 2 a.a' for the rows of A, as squared_distances computes it
    (centred when dense), before its clip at zero."""
    if sparse.issparse(A):
        norms = np.asarray(A.multiply(A).sum(axis=1)).ravel()
        products = (A @ A.T).toarray()
    else:
        A = A - A.mean(axis=0, dtype=np.float64).astype(A.dtype)
        norms = np.einsum("ij,ij->i", A, A)
        products = A @ A.T
    return -2.0 * products + norms[:, None] + norms[None, :]


@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_squared_distances_clipped_at_zero(layout):
    """Where the expansion |a|^2 + |b|^2 - 2ab cancels to a negative number (a row
    against itself, float32), the distance returned is zero, never negative."""
    rng = np.random.default_rng(0)
    if layout == "dense":
        A = rng.normal(size=(50, 30)).astype(np.float32)
    else:
        A = (sparse.random(40, 200, density=0.3, random_state=0, format="csr")
             * 1e4).astype(np.float32)
    assert (_unclipped_expansion(A) < 0).any(), "these inputs no longer test the clip"
    d2 = squared_distances(A, A)
    assert d2.min() == 0.0


def test_cosine_zero_row_is_zero(blocks):
    """A zero row has zero cosine similarity with everything, as in sklearn."""
    A = np.vstack([np.zeros((1, 4)), blocks[0]])
    K = pairwise_kernel(A, blocks[1], "cosine")
    np.testing.assert_array_equal(K[0], 0.0)


@pytest.mark.parametrize("degree", [2, 3])
def test_polynomial_kernel_is_finite_for_negative_bases(blocks, degree):
    """Negative gamma a.b + coef0 to a whole degree is (gamma a.b + coef0)^degree, as
    scikit-learn computes it: finite (no NaN from a fraction), negative for an odd degree and
    positive for an even one."""
    A, B = blocks
    params = resolve_kernel_params("polynomial", 4, gamma=1.0, degree=degree, coef0=-5.0)
    K = pairwise_kernel(A, B, "polynomial", **params)
    base = A @ B.T - 5.0
    assert (base < 0).all()  # every base negative: the case this test is about
    np.testing.assert_allclose(K, base**degree, rtol=1e-12)
    np.testing.assert_allclose(K, pairwise.polynomial_kernel(A, B, degree=degree, gamma=1.0,
                                                             coef0=-5.0), rtol=1e-12)


def _matern_reference(d, nu):
    """Matérn at scaled distances d by mpmath at 30 digits."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    out = []
    for value in d:
        t = mpmath.sqrt(2 * mpmath.mpf(nu)) * mpmath.mpf(float(value))
        k = 2 ** (1 - mpmath.mpf(nu)) / mpmath.gamma(nu) * t**nu * mpmath.besselk(nu, t)
        out.append(float(k))
    return np.array(out)


@pytest.mark.parametrize("nu", [3.7, 25.0, 200.0, 1000.0])
def test_matern_large_nu_matches_high_precision(nu):
    """General-nu Matérn is finite and accurate at large nu, near and far from 0."""
    from kpca_dask.blocks.matern import matern_from_scaled_distance

    d = np.array([0.0, 1e-8, 1e-4, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0])
    got = matern_from_scaled_distance(d, nu)
    expected = np.ones_like(d)
    expected[1:] = _matern_reference(d[1:], nu)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-300)


def test_matern_large_nu_is_close_to_rbf(blocks):
    """nu = 200 is within O(1/nu) of nu = inf (the rbf kernel) and has no NaN."""
    A, B = blocks
    large = pairwise_kernel(A, B, "matern", gamma=0.7, nu=200.0)
    rbf = pairwise_kernel(A, B, "matern", gamma=0.7, nu=np.inf)
    assert np.isfinite(large).all()
    np.testing.assert_allclose(large, rbf, atol=5e-3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "polynomial", "linear"])
def test_landmark_kernel_matches_pairwise_kernel(rng, kernel, dtype):
    """The prepared-landmark kernel (one augmented GEMM for rbf) gives pairwise_kernel's
    values, on data far from the origin too, where |a|^2 + |b|^2 - 2ab cancels."""
    from kpca_dask.blocks.landmark_kernel import LandmarkKernel

    offset = 1e3 if dtype == np.float64 else 10.0
    A = (offset + rng.normal(size=(300, 6))).astype(dtype)
    Z = (offset + rng.normal(size=(40, 6))).astype(dtype)
    params = resolve_kernel_params(kernel, 6, gamma=0.2)
    expected = pairwise_kernel(A.astype(np.float64), Z.astype(np.float64), kernel, **params)
    got = LandmarkKernel(Z, kernel, params, dtype).into(np.empty((300, 40), dtype), A)
    assert got.dtype == dtype
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, atol=TOLERANCE[dtype] * 10 * scale, rtol=0)
    if kernel == "rbf":
        assert got.max() <= 1.0  # the clip at zero distance: exp(0) at most


def test_landmark_kernel_rbf_of_a_landmark_with_itself_is_one(rng):
    from kpca_dask.blocks.landmark_kernel import LandmarkKernel

    Z = rng.normal(size=(30, 5)) + 50.0
    K = LandmarkKernel(Z, "rbf", {"gamma": 0.5}, np.float64).into(np.empty((30, 30)), Z)
    np.testing.assert_allclose(np.diagonal(K), 1.0, rtol=0, atol=1e-12)


def test_landmark_kernel_sparse_rows_use_the_sparse_path(rng):
    from scipy import sparse

    from kpca_dask.blocks.landmark_kernel import LandmarkKernel

    A = sparse.random(50, 8, density=0.2, format="csr", random_state=0)
    Z = rng.normal(size=(7, 8))
    got = LandmarkKernel(Z, "rbf", {"gamma": 0.3}, np.float64).into(np.empty((50, 7)), A)
    np.testing.assert_allclose(got, pairwise.rbf_kernel(A.toarray(), Z, gamma=0.3),
                               atol=1e-12)


def _subnormal(K) -> np.ndarray:
    return (K != 0) & (np.abs(K) < np.finfo(K.dtype).tiny)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "matern"])
def test_far_points_give_no_subnormal_kernel_values(kernel, dtype):
    """Far-apart points: every path gives the floor value, never a subnormal number, nor one
    as the product of two: the CPU computes with those on its slow path, a hundred times
    slower on Intel's cores (blocks/epilogue.py's exponent_floor)."""
    from scipy import sparse

    from kpca_dask.blocks.epilogue import exponent_floor
    from kpca_dask.blocks.kernels import pairwise_kernel_into
    from kpca_dask.blocks.landmark_kernel import LandmarkKernel

    # Squared distances from 0 to 2e6: the exponents sweep the subnormal range
    # of both dtypes and beyond.
    A = np.linspace(0.0, 1.0, 400)[:, None].astype(dtype) * np.ones((1, 2), dtype)
    A *= 1000.0
    Z = np.zeros((3, 2), dtype)
    params = resolve_kernel_params(kernel, 2, gamma=1.0)
    floor = np.exp(np.array(exponent_floor(dtype), dtype))
    paths = {
        "pairwise_kernel": pairwise_kernel(A, Z, kernel, **params),
        "pairwise_kernel_into": pairwise_kernel_into(np.empty((400, 3), dtype), A, Z, kernel,
                                                     **params),
        "LandmarkKernel": LandmarkKernel(Z, kernel, params, dtype).into(
            np.empty((400, 3), dtype), A),
        "sparse rows": pairwise_kernel(sparse.csr_matrix(A), Z, kernel, **params),
    }
    for path, K in paths.items():
        assert K.dtype == dtype, path
        assert not _subnormal(K).any(), path
        # Nor is a product of two: those of the pass's B^T B and of K_mm's factorisation.
        assert not _subnormal(K[:, :, None] * K[:, None, :]).any(), path
        assert K.min() == pytest.approx(floor, rel=1e-2), path  # far points: the floor
        assert K[0, 0] == 1.0, path
        # Values well above the floor are the kernel's own.
        exact = pairwise_kernel(A.astype(np.float64), Z.astype(np.float64), kernel, **params)
        big = exact > 1e3 * float(floor)
        np.testing.assert_allclose(K[big], exact[big], rtol=TOLERANCE[dtype] * 10)


def test_exp_nonpositive_keeps_values_above_the_floor_and_clips_positive_rounding():
    from kpca_dask.blocks.distance_kernels import exp_nonpositive
    from kpca_dask.blocks.epilogue import exponent_floor

    for dtype in (np.float32, np.float64):
        x = np.array([1e-7, 0.0, -3.0, exponent_floor(dtype) + 1.0, -1e30], dtype)
        got = exp_nonpositive(x.copy())
        assert got[0] == 1.0 and got[1] == 1.0  # a positive exponent is rounding
        np.testing.assert_allclose(got[2:4], np.exp(x[2:4].astype(np.float64)), rtol=1e-6)
        # Clipped to the floor: the value exp takes there (numpy's to 1 ulp), a normal number.
        assert got[4] == exp_nonpositive(np.array([exponent_floor(dtype)], dtype))[0]
        np.testing.assert_allclose(got[4], np.exp(np.array(exponent_floor(dtype), dtype)),
                                   rtol=2 * np.finfo(dtype).eps)
        assert got[4] >= np.finfo(dtype).tiny
