"""The tiled Cholesky factor of the cluster's m x m problem (kpca_dask.engine.tiles.cholesky)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from kpca_dask.engine.tiles.cholesky import tiled_cholesky, tiled_inverse


@pytest.mark.parametrize("tile", [30, 15, 6, 7])
def test_the_factor_equals_one_process_cholesky(tile):
    """L L^T = A and L equals numpy's factor, for one tile and several (7: the last
    narrower)."""
    rng = np.random.default_rng(0)
    B = rng.standard_normal((30, 40))
    A = B @ B.T + 1e-3 * np.eye(30)
    with dask.config.set(scheduler="threads"):
        L = tiled_cholesky(da.from_array(A, chunks=tile)).compute()
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("tile", [30, 7])
def test_the_inverse_by_tiles_is_the_factors_inverse(tile):
    """X = L^-1 by tiles: lower triangular, X L = I to rounding."""
    rng = np.random.default_rng(1)
    B = rng.standard_normal((30, 40))
    L = np.linalg.cholesky(B @ B.T + np.eye(30))
    with dask.config.set(scheduler="threads"):
        X = tiled_inverse(da.from_array(L, chunks=tile)).compute()
    np.testing.assert_allclose(X @ L, np.eye(30), atol=1e-12)
    np.testing.assert_array_equal(np.triu(X, 1), 0.0)


def test_a_matrix_that_is_not_positive_definite_gives_nan_pivots_not_an_error():
    """A failed pivot is NaN from its tile on, so the caller can retry with a jitter; no task
    raises (a raising task is logged by its worker as a failed computation)."""
    A = np.diag([4.0, 1.0, -1.0, 2.0])
    with dask.config.set(scheduler="threads"):
        pivots = np.diagonal(tiled_cholesky(da.from_array(A, chunks=2)).compute())
    np.testing.assert_array_equal(pivots[:2], [2.0, 1.0])
    assert np.isnan(pivots[2:]).all()


def test_a_failed_pivot_costs_its_tile_only():
    """After a failed pivot every later tile is NaN at once: a read-only view of one value,
    no memory and no products."""
    A = np.diag([-1.0, 1.0, 2.0, 3.0])
    with dask.config.set(scheduler="sync"):
        tiles = tiled_cholesky(da.from_array(A, chunks=2)).to_delayed()
        later = tiles[1, 1].compute()
    assert np.isnan(later).all() and later.strides == (0, 0)


def test_diagonal_tiles_that_are_not_square_are_refused():
    with pytest.raises(ValueError, match="square diagonal tiles"):
        tiled_cholesky(da.ones((5, 5), chunks=((3, 2), (2, 3))))


def test_a_pivot_at_or_below_the_cut_off_fails_at_its_tile():
    """With ``least_pivot`` the factor of a matrix of low rank is refused at the first tile
    that holds a pivot L_jj^2 at or below it, as one process's factor is, and every later
    tile is NaN at once: a refused factor costs one tile, not the whole factorisation."""
    A = np.diag([4.0, 1e-12, 2.0, 3.0])
    with dask.config.set(scheduler="sync"):
        accepted = np.diagonal(tiled_cholesky(da.from_array(A, chunks=2)).compute())
        refused = tiled_cholesky(da.from_array(A, chunks=2), least_pivot=1e-10).to_delayed()
        first, later = refused[0, 0].compute(), refused[1, 1].compute()
    assert np.isfinite(accepted).all()
    assert np.isnan(first).all() and np.isnan(later).all() and later.strides == (0, 0)
