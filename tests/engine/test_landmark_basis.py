"""The whitening basis of K_mm: the Cholesky route and the eigendecomposition agree."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import lapack

from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.blocks.statistics import PassStatistics
from kpca_dask.engine import solve as small_problem


def _eigen_basis(kmm, rcond):
    """The eigendecomposition route alone, whatever the conditioning."""
    saved = small_problem._cholesky_whitening
    small_problem._cholesky_whitening = lambda kmm, rcond: None
    try:
        return small_problem.landmark_basis(kmm, rcond)
    finally:
        small_problem._cholesky_whitening = saved


def _kmm(rng, gamma, m=60, p=4):
    Z = rng.normal(size=(m, p))
    return Z, pairwise_kernel(Z, Z, "rbf", gamma=gamma)


def test_well_conditioned_kmm_takes_the_cholesky_route_with_the_same_model(rng):
    """W = L^{-T}: W W^T = K^{-1}, and the solved model equals the eigen route's."""
    Z, kmm = _kmm(rng, gamma=1.0)
    assert small_problem._cholesky_whitening(kmm, 1e-10) is not None
    fast, slow = small_problem.landmark_basis(kmm, 1e-10), _eigen_basis(kmm, 1e-10)
    np.testing.assert_allclose(fast.W @ fast.W.T, np.linalg.inv(kmm), rtol=1e-9, atol=1e-9)
    X = rng.normal(size=(500, 4))
    B = pairwise_kernel(X, Z, "rbf", gamma=1.0)
    r = small_problem.reference_row(Z, "rbf", {"gamma": 1.0}, kmm)
    D = B - r
    stats = PassStatistics(500, D.sum(axis=0), D.T @ D, 500.0, 0, -1, r)
    a, b = small_problem.solve(stats, fast, 5), small_problem.solve(stats, slow, 5)
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-10)
    np.testing.assert_allclose(a.projection, b.projection, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.offset, b.offset, rtol=1e-8, atol=1e-10)
    assert a.trace_error == pytest.approx(b.trace_error, abs=1e-12)


@pytest.mark.parametrize("gamma", [1e-3, 1e-5])
def test_ill_conditioned_kmm_keeps_the_eigen_route_and_its_rank(rng, gamma):
    """Eigenvalues below rcond * max are dropped as before: no Cholesky shortcut."""
    _, kmm = _kmm(rng, gamma=gamma)
    assert small_problem._cholesky_whitening(kmm, 1e-10) is None
    basis = small_problem.landmark_basis(kmm, 1e-10)
    assert basis.W.shape[1] == _eigen_basis(kmm, 1e-10).W.shape[1] < kmm.shape[0]


def test_near_the_cut_off_the_shifted_cholesky_decides():
    """Above the cut-off: Cholesky, with nothing dropped either way; at or below: eigen route."""
    above = np.diag([1.0, 5e-10])  # condition 2e9: the estimate alone leaves no margin
    estimate = lapack.dpocon(np.sqrt(above), 1.0, uplo="L")[0]
    assert not estimate > small_problem.CONDITION_MARGIN * 1e-10
    assert small_problem._cholesky_whitening(above, 1e-10) is not None
    assert small_problem.landmark_basis(above, 1e-10).W.shape == (2, 2)
    below = np.diag([1.0, 0.9e-10])
    assert small_problem._cholesky_whitening(below, 1e-10) is None
    assert small_problem.landmark_basis(below, 1e-10).W.shape == (2, 1)
    at = np.diag([1.0, 1e-10])  # the eigen route drops s <= rcond * max(s)
    assert small_problem._cholesky_whitening(at, 1e-10) is None
    assert small_problem.landmark_basis(at, 1e-10).W.shape == (2, 1)


def test_kmm_whose_condition_estimate_misleads_still_takes_the_cholesky_route(rng):
    """cond_1 far above cond_2: the estimate fails, the shifted Cholesky proves every
    eigenvalue kept, and the model equals the eigen route's."""
    Q, _ = np.linalg.qr(rng.normal(size=(200, 200)))
    s = np.geomspace(1.0, 3e-9, 200)  # every eigenvalue above rcond = 1e-9 * max(s)
    kmm = (Q * s) @ Q.T
    kmm = 0.5 * (kmm + kmm.T)
    L = np.linalg.cholesky(kmm)
    assert not lapack.dpocon(L, np.abs(kmm).sum(axis=0).max(), uplo="L")[0] > 1e-8
    fast, slow = small_problem.landmark_basis(kmm, 1e-9), _eigen_basis(kmm, 1e-9)
    assert fast.cholesky is not None and slow.W.shape == (200, 200)
    M = rng.normal(size=(200, 200))
    M = M @ M.T
    top = np.linalg.eigvalsh(fast.whiten(M))[-10:]  # the leading ones, which a model keeps
    np.testing.assert_allclose(top, np.linalg.eigvalsh(slow.whiten(M))[-10:], rtol=1e-8)


def test_indefinite_kmm_warns_through_the_eigen_route():
    kmm = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    with pytest.warns(UserWarning, match="not positive semi-definite"):
        basis = small_problem.landmark_basis(kmm, 1e-10)
    assert basis.W.shape == (2, 1)


def test_whiten_is_w_transpose_m_w_on_both_routes(rng):
    """sygst on the Cholesky route, two products otherwise: the same W^T M W, symmetric."""
    _, kmm = _kmm(rng, gamma=1.0, m=40)
    S = rng.normal(size=(100, 40))
    M = S.T @ S
    for basis in (small_problem.landmark_basis(kmm, 1e-10), _eigen_basis(kmm, 1e-10)):
        C = basis.whiten(M)
        np.testing.assert_allclose(C, basis.W.T @ M @ basis.W, rtol=1e-10, atol=1e-8)
        np.testing.assert_array_equal(C, C.T)
    assert small_problem.landmark_basis(kmm, 1e-10).cholesky is not None
