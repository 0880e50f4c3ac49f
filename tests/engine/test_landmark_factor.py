"""K_mm factorised once: Cholesky, pivoted Cholesky at the cut-off, eigen for indefinite kernels."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine.solve.landmark_factor import (
    PANEL_BYTES,
    factor_landmarks,
    landmark_kernel_panels,
    reference_row,
)
from kpca_dask.errors import InvalidParameterError


def _landmarks(rng, m=80, p=4):
    return rng.normal(size=(m, p))


def test_well_conditioned_kmm_is_one_cholesky_and_w_whitens_it(rng):
    Z = _landmarks(rng)
    K = pairwise_kernel(Z, Z, "rbf", gamma=0.5)
    factor = factor_landmarks(Z, "rbf", {"gamma": 0.5}, 1e-10)
    assert factor.method == "cholesky" and factor.rank == len(Z) and factor.kept is None
    np.testing.assert_allclose(factor.W @ factor.W.T, np.linalg.inv(K), rtol=1e-8, atol=1e-8)
    Y = rng.normal(size=(len(Z), 3))
    np.testing.assert_allclose(factor.whiten(Y), factor.W.T @ Y, rtol=1e-10, atol=1e-12)
    V = rng.normal(size=(len(Z), 3))
    np.testing.assert_allclose(factor.unwhiten(V), factor.W @ V, rtol=1e-10, atol=1e-12)


def test_inverse_gram_is_the_inverse_in_the_lower_triangle(rng):
    Z = _landmarks(rng, m=40)
    K = pairwise_kernel(Z, Z, "rbf", gamma=0.5)
    inverse = factor_landmarks(Z, "rbf", {"gamma": 0.5}, 1e-10).inverse_gram()
    np.testing.assert_allclose(np.tril(inverse), np.tril(np.linalg.inv(K)), rtol=1e-8,
                               atol=1e-8)


def test_repeated_landmarks_are_left_out_by_the_pivoted_factor(rng):
    """K W W^T K = K on every landmark, with each repeat counted once."""
    Z = _landmarks(rng, m=30)
    Z = np.vstack([Z, Z[:10]])
    K = pairwise_kernel(Z, Z, "rbf", gamma=0.5)
    factor = factor_landmarks(Z, "rbf", {"gamma": 0.5}, 1e-10)
    assert factor.method == "pivoted cholesky" and factor.rank == 30
    assert len(set(map(tuple, Z[factor.kept]))) == 30
    np.testing.assert_allclose(K @ factor.W @ factor.W.T @ K, K, atol=1e-8)


@pytest.mark.parametrize(("variance", "rank"), [(5e-10, 2), (2e-10, 2), (0.9e-10, 1), (1e-14, 1)])
def test_rcond_is_a_cut_off_on_each_landmarks_residual_variance(variance, rank):
    """A landmark is kept when its variance given the others is above rcond * max k(z, z)."""
    Z = np.array([[1.0, 0.0], [0.0, np.sqrt(variance)]])
    factor = factor_landmarks(Z, "linear", {}, 1e-10)
    assert factor.rank == rank
    assert factor.method == ("cholesky" if rank == 2 else "pivoted cholesky")


def test_pivoted_factor_is_made_in_the_one_kmm_buffer(rng):
    """With repeated landmarks the pivoted factor L of the kept r landmarks
    (L L^T = K_kk) is left in the m x m buffer K_mm was computed in: the factorisation's
    peak memory is that buffer and a few panels of kernel values, no second r x r block."""
    Z = _landmarks(rng, m=2000)
    Z = np.vstack([Z, Z[:100]])  # the repeats stop Cholesky, so pivoting moves the block
    m = len(Z)
    factor_landmarks(Z[:50], "rbf", {"gamma": 0.5}, 1e-10)  # compiled kernels, warm caches
    tracemalloc.start()
    try:
        factor = factor_landmarks(Z, "rbf", {"gamma": 0.5}, 1e-10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert factor.method == "pivoted cholesky" and 0.9 * m < factor.rank < m
    # The buffer (8 m^2 bytes, 34 MiB) and the panels in flight (a few of PANEL_BYTES,
    # 4 MiB) stay below 1.5 buffers; a copy of the kept block would add nearly one more.
    assert peak < 1.5 * 8 * m * m, f"peak {peak / 2**20:.1f} MiB, buffer {8 * m * m / 2**20:.1f}"
    # Only the lower triangle is the factor (the solves read no more).
    L, kept = np.tril(factor.lower), factor.kept
    np.testing.assert_allclose(L @ L.T, pairwise_kernel(Z[kept], Z[kept], "rbf", gamma=0.5),
                               atol=1e-10)


def test_kernel_that_is_not_positive_semidefinite_takes_the_eigen_way_with_a_warning(rng):
    Z = _landmarks(rng, m=40)
    params = {"gamma": 1.0, "coef0": 1.0}
    with pytest.warns(UserWarning, match="not positive semi-definite"):
        factor = factor_landmarks(Z, "sigmoid", params, 1e-10)
    assert factor.method == "eigen"
    K = pairwise_kernel(Z, Z, "sigmoid", **params)
    s, U = np.linalg.eigh(K)
    positive = U[:, s > factor.cutoff]
    # W spans K's positive eigenspace and whitens K there.
    np.testing.assert_allclose(factor.W.T @ K @ factor.W, np.eye(factor.rank), atol=1e-8)
    assert factor.rank == positive.shape[1]


def test_a_kernel_with_no_positive_direction_is_refused():
    Z = np.zeros((5, 2))
    with pytest.raises(InvalidParameterError, match="no positive eigenvalue"):
        factor_landmarks(Z, "linear", {}, 1e-10)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_overflowing_kernel_values_are_refused_with_the_fix():
    Z = np.full((3, 2), 1e200)
    with pytest.raises(InvalidParameterError, match="not finite.*Scale the data"):
        factor_landmarks(Z, "linear", {}, 1e-10)


def test_panels_and_the_reference_row_match_the_whole_kernel_matrix(rng):
    """K_mm computed by several row panels (the last one shorter), its column sums, its
    largest absolute row sum and the reference row equal those of the whole matrix."""
    m = 1000
    # 8 m^2 bytes are more than one panel holds, and not a whole number of panels.
    assert 8 * m * m > PANEL_BYTES and m % (PANEL_BYTES // (8 * m))
    Z = _landmarks(rng, m=m)
    K = pairwise_kernel(Z, Z, "laplacian", gamma=0.3)
    out = np.empty((m, m))
    sums, norm = landmark_kernel_panels(Z, "laplacian", {"gamma": 0.3}, out=out)
    np.testing.assert_allclose(out, K, rtol=1e-13)
    np.testing.assert_allclose(sums, K.sum(axis=0), rtol=1e-13)
    assert norm == pytest.approx(np.abs(K).sum(axis=1).max())
    np.testing.assert_allclose(reference_row(Z, "laplacian", {"gamma": 0.3}), K.mean(axis=0),
                               rtol=1e-13)


def test_the_kernel_panels_on_one_thread_or_two_give_the_same_numbers(rng, monkeypatch):
    """K_mm's panels run on the process's BLAS threads, their sums added in panel order:
    the reference row and the matrix do not depend on how many threads made them."""
    from kpca_dask.engine.solve import landmark_factor

    m = 900
    Z = _landmarks(rng, m=m)
    results = []
    for threads in (1, 2):  # what the process's BLAS would allow, whatever the runner has
        monkeypatch.setattr(landmark_factor, "blas_thread_count", lambda threads=threads: threads)
        out = np.empty((m, m))
        sums, norm = landmark_kernel_panels(Z, "rbf", {"gamma": 0.3}, out=out)
        results.append((out, sums, norm, reference_row(Z, "rbf", {"gamma": 0.3})))
    (out1, sums1, norm1, row1), (out2, sums2, norm2, row2) = results
    np.testing.assert_array_equal(out1, out2)
    np.testing.assert_array_equal(sums1, sums2)
    np.testing.assert_array_equal(row1, row2)
    assert norm1 == norm2
    np.testing.assert_allclose(out1, pairwise_kernel(Z, Z, "rbf", gamma=0.3), rtol=1e-13,
                               atol=1e-15)
