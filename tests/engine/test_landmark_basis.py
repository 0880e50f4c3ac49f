"""The whitening basis of K_mm: the Cholesky route and the eigendecomposition agree."""

from __future__ import annotations

import numpy as np
import pytest

from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine import nystrom


def _eigen_basis(kmm, rcond):
    """The eigendecomposition route alone, whatever the conditioning."""
    saved = nystrom._cholesky_whitening
    nystrom._cholesky_whitening = lambda kmm, rcond: None
    try:
        return nystrom.landmark_basis(kmm, rcond)
    finally:
        nystrom._cholesky_whitening = saved


def _kmm(rng, gamma, m=60, p=4):
    Z = rng.normal(size=(m, p))
    return Z, pairwise_kernel(Z, Z, "rbf", gamma=gamma)


def test_well_conditioned_kmm_takes_the_cholesky_route_with_the_same_model(rng):
    """W = L^{-T}: W W^T = K^{-1}, and the solved model equals the eigen route's."""
    Z, kmm = _kmm(rng, gamma=1.0)
    assert nystrom._cholesky_whitening(kmm, 1e-10) is not None
    fast, slow = nystrom.landmark_basis(kmm, 1e-10), _eigen_basis(kmm, 1e-10)
    np.testing.assert_allclose(fast.W @ fast.W.T, np.linalg.inv(kmm), rtol=1e-9, atol=1e-9)
    X = rng.normal(size=(500, 4))
    B = pairwise_kernel(X, Z, "rbf", gamma=1.0)
    r = nystrom.reference_row(Z, "rbf", {"gamma": 1.0}, kmm)
    D = B - r
    stats = nystrom.PassStatistics(500, D.sum(axis=0), D.T @ D, 500.0, 0, -1, r)
    a, b = nystrom.solve(stats, fast, 5), nystrom.solve(stats, slow, 5)
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-10)
    np.testing.assert_allclose(a.projection, b.projection, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a.offset, b.offset, rtol=1e-8, atol=1e-10)
    assert a.trace_error == pytest.approx(b.trace_error, abs=1e-12)


@pytest.mark.parametrize("gamma", [1e-3, 1e-5])
def test_ill_conditioned_kmm_keeps_the_eigen_route_and_its_rank(rng, gamma):
    """Eigenvalues below rcond * max are dropped as before: no Cholesky shortcut."""
    _, kmm = _kmm(rng, gamma=gamma)
    assert nystrom._cholesky_whitening(kmm, 1e-10) is None
    basis = nystrom.landmark_basis(kmm, 1e-10)
    assert basis.W.shape[1] == _eigen_basis(kmm, 1e-10).W.shape[1] < kmm.shape[0]


def test_borderline_conditioning_takes_the_eigen_route():
    """Just above the cut-off is still the eigendecomposition's call (margin of 10)."""
    kmm = np.diag([1.0, 5e-10])  # condition 2e9: nothing dropped at rcond 1e-10, no margin
    assert nystrom._cholesky_whitening(kmm, 1e-10) is None
    assert nystrom.landmark_basis(kmm, 1e-10).W.shape == (2, 2)
    assert nystrom._cholesky_whitening(np.diag([1.0, 1e-8]), 1e-10) is not None


def test_indefinite_kmm_warns_through_the_eigen_route():
    kmm = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    with pytest.warns(UserWarning, match="not positive semi-definite"):
        basis = nystrom.landmark_basis(kmm, 1e-10)
    assert basis.W.shape == (2, 1)


def test_whiten_is_w_transpose_m_w_on_both_routes(rng):
    """sygst on the Cholesky route, two products otherwise: the same W^T M W, symmetric."""
    _, kmm = _kmm(rng, gamma=1.0, m=40)
    S = rng.normal(size=(100, 40))
    M = S.T @ S
    for basis in (nystrom.landmark_basis(kmm, 1e-10), _eigen_basis(kmm, 1e-10)):
        C = basis.whiten(M)
        np.testing.assert_allclose(C, basis.W.T @ M @ basis.W, rtol=1e-10, atol=1e-8)
        np.testing.assert_array_equal(C, C.T)
    assert nystrom.landmark_basis(kmm, 1e-10).cholesky is not None
