"""A landmark matrix of low rank on tiles takes one process's pivoted factor, made by columns
(kpca_dask.engine.tiles.low_rank), and gives one process's model."""

from __future__ import annotations

import dataclasses

import dask
import dask.array as da
import numpy as np
import pytest

from kpca_dask.engine.passes.nystrom import compute_pass
from kpca_dask.engine.solve.landmark_factor import factor_landmarks
from kpca_dask.engine.solve.nystrom import solve_small_problem
from kpca_dask.engine.tiles.low_rank import BLOCK, most_kept, pivoted_by_columns
from kpca_dask.engine.tiles.solve import solve_tiles
from kpca_dask.errors import InvalidParameterError

PARAMS = {"gamma": 0.1}


def _smooth(m: int, seed: int = 0, features: int = 4) -> np.ndarray:
    """Uniform rows in 4-d: an rbf of gamma 0.1 on them has a numerical rank far below m
    (15 of 600 at rcond 1e-3, 55 at 1e-6; in 8-d 87 of 1000 at 1e-3)."""
    return np.random.default_rng(seed).uniform(size=(m, features))


@pytest.mark.parametrize(("m", "features", "rcond", "blocks"),
                         [(600, 4, 1e-3, 1), (600, 4, 1e-6, 1), (1000, 8, 1e-3, 2)])
def test_the_columns_give_lapacks_pivoted_factor(m, features, rcond, blocks):
    """The same kept landmarks in the same order as pstrf, and the same factor to 1e-12,
    within one block of columns and across two (87 kept: past the first 64)."""
    Z, params = _smooth(m, features=features), PARAMS
    expected = factor_landmarks(Z, "rbf", params, rcond)
    assert expected.method == "pivoted cholesky" and expected.rank < most_kept(m)
    assert -(-expected.rank // BLOCK) == blocks
    factor = pivoted_by_columns(Z, "rbf", params, expected.cutoff, most_kept(m))
    assert factor.method == "pivoted cholesky" and factor.cutoff == expected.cutoff
    np.testing.assert_array_equal(factor.kept, expected.kept)
    np.testing.assert_allclose(factor.lower, np.tril(expected.lower), rtol=0, atol=1e-12)


def test_the_columns_give_up_past_their_share_and_on_an_indefinite_kernel():
    """None when more landmarks would be kept than allowed (the tiled jitter's turn), and
    for a kernel that is not positive semi-definite, as one process's pstrf gives up."""
    Z = _smooth(200)
    rank = factor_landmarks(Z, "rbf", PARAMS, 1e-6).rank
    assert pivoted_by_columns(Z, "rbf", PARAMS, 1e-6, rank) is not None
    assert pivoted_by_columns(Z, "rbf", PARAMS, 1e-6, rank - 1) is None
    sigmoid = {"gamma": 1.0, "coef0": -2.0}
    with pytest.warns(UserWarning, match="not positive semi-definite"):
        assert factor_landmarks(Z, "sigmoid", sigmoid, 1e-10).method == "eigen"
    assert pivoted_by_columns(Z, "sigmoid", sigmoid, 1e-10, 200) is None


@pytest.mark.parametrize("n_components", [5, 0.5])
def test_a_low_rank_problem_on_tiles_is_one_process_problem(n_components):
    """G as 4 x 4 tiles, K_mm of rank far below m: the model of one process to rounding
    (eigenvalues, projection, offset, the mean's weights, the ratios and the trace error),
    not that of the jittered K_mm + tau I."""
    m = 400
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(3000, 4))
    Z = X[rng.choice(3000, m, replace=False)]
    params = PARAMS
    with dask.config.set(scheduler="threads"):
        stats = compute_pass(da.from_array(X, chunks=(1000, 4)), Z, "rbf", params)
        expected = solve_small_problem(stats, Z, "rbf", params, 1e-4, n_components)
        tiled = dataclasses.replace(stats, gram=da.from_array(np.array(stats.gram),
                                                              chunks=m // 4))
        small = solve_tiles(tiled, Z, "rbf", params, 1e-4, n_components)
    assert expected.factor_method == small.factor_method == "pivoted cholesky"
    assert small.landmark_rank == expected.landmark_rank < most_kept(m)
    assert small.method == f"tiles, factor by columns, {expected.method}"
    ours, theirs = small.solution, expected.solution
    np.testing.assert_allclose(ours.eigenvalues, theirs.eigenvalues, rtol=1e-10)
    for name in ("projection", "offset", "explained_variance_ratio"):
        want = getattr(theirs, name)
        np.testing.assert_allclose(getattr(ours, name), want, rtol=0,
                                   atol=1e-9 * np.abs(want).max())
    np.testing.assert_allclose(ours.trace_error, theirs.trace_error, rtol=1e-9)
    np.testing.assert_allclose(small.novelty.mean_weights, expected.novelty.mean_weights,
                               atol=1e-9 * np.abs(expected.novelty.mean_weights).max())
    left_out = np.setdiff1d(np.arange(m), np.flatnonzero(np.abs(ours.projection).sum(1)))
    assert left_out.size == m - small.landmark_rank  # P is zero on the landmarks left out


def test_equal_residuals_pick_the_landmark_pstrf_picks():
    """pstrf takes the first of equal residuals in its swapped order: with K = diag(1, 1, 2)
    and the first landmark repeated, landmarks 2, 1, 0 (not 2, 0, 1)."""
    Z = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, np.sqrt(2.0)],
                  [1.0, 0.0, 0.0]])
    expected = factor_landmarks(Z, "linear", {}, 1e-10)
    factor = pivoted_by_columns(Z, "linear", {}, expected.cutoff, 4)
    assert expected.kept.tolist() == factor.kept.tolist() == [2, 1, 0]


def test_precomputed_landmarks_give_their_own_columns():
    """kernel="precomputed": each column of K_mm is read off the landmarks' rows at its
    own index (not their first columns), and the tiles give one process's model."""
    rng = np.random.default_rng(2)
    points = rng.uniform(size=(1200, 4))
    chosen = points[rng.choice(1200, 300, replace=False)]

    def rows(A):  # [k(x, z_1), ..., k(x, z_m), k(x, x)]
        return np.hstack([np.exp(-0.1 * ((A[:, None] - chosen[None]) ** 2).sum(-1)),
                          np.ones((len(A), 1))])

    X, Z = rows(points), rows(chosen)
    with dask.config.set(scheduler="threads"):
        stats = compute_pass(da.from_array(X, chunks=(400, -1)), Z, "precomputed", {})
        expected = solve_small_problem(stats, Z, "precomputed", {}, 1e-4, 3)
        tiled = dataclasses.replace(stats, gram=da.from_array(np.array(stats.gram), chunks=75))
        small = solve_tiles(tiled, Z, "precomputed", {}, 1e-4, 3)
    assert small.landmark_rank == expected.landmark_rank < most_kept(300)
    np.testing.assert_allclose(small.solution.eigenvalues, expected.solution.eigenvalues,
                               rtol=1e-10)


def test_kernel_values_that_are_not_finite_are_refused():
    Z = np.array([[0.0], [1.0], [np.inf]])
    with pytest.raises(InvalidParameterError, match="not finite"):
        pivoted_by_columns(Z, "linear", {}, 1e-10, 3)
