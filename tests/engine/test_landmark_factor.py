"""K_mm factorised once: Cholesky, pivoted Cholesky at the cut-off, eigen for indefinite kernels."""

from __future__ import annotations

import numpy as np
import pytest

from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine.landmark_factor import (
    _leading_block,
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


def test_leading_block_moves_the_kept_block_without_a_second_buffer(rng):
    L = np.asfortranarray(rng.normal(size=(7, 7)))
    expected = L[:4, :4].copy()
    block = _leading_block(L, 4)
    np.testing.assert_array_equal(block, expected)
    assert block.flags.f_contiguous and np.shares_memory(block, L)


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


def test_panels_and_the_reference_row_match_the_whole_kernel_matrix(rng, monkeypatch):
    import kpca_dask.engine.landmark_factor as module

    monkeypatch.setattr(module, "PANEL_BYTES", 8 * 50 * 7)  # 7 rows per panel
    Z = _landmarks(rng, m=50)
    K = pairwise_kernel(Z, Z, "laplacian", gamma=0.3)
    out = np.empty((50, 50))
    sums, norm = landmark_kernel_panels(Z, "laplacian", {"gamma": 0.3}, out=out)
    np.testing.assert_allclose(out, K, rtol=1e-13)
    np.testing.assert_allclose(sums, K.sum(axis=0), rtol=1e-13)
    assert norm == pytest.approx(np.abs(K).sum(axis=1).max())
    np.testing.assert_allclose(reference_row(Z, "laplacian", {"gamma": 0.3}), K.mean(axis=0),
                               rtol=1e-13)
