"""The tiled Cholesky factor of the cluster's m x m problem (kpca_dask.engine.tiled_cholesky)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from kpca_dask.engine.tiled_cholesky import tiled_cholesky


@pytest.mark.parametrize("tiles", [1, 2, 5])
def test_the_factor_equals_one_process_cholesky(tiles):
    """L L^T = A and L equals numpy's factor, for one tile and several."""
    rng = np.random.default_rng(0)
    B = rng.standard_normal((30, 40))
    A = B @ B.T + 1e-3 * np.eye(30)
    with dask.config.set(scheduler="threads"):
        L = tiled_cholesky(da.from_array(A, chunks=30 // tiles)).compute()
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=1e-12, atol=1e-12)


def test_a_matrix_that_is_not_positive_definite_gives_nan_pivots_not_an_error():
    """A failed pivot is NaN from its tile on, so the caller can retry with a jitter; no task
    raises (a raising task is logged by its worker as a failed computation)."""
    A = np.diag([4.0, 1.0, -1.0, 2.0])
    with dask.config.set(scheduler="threads"):
        pivots = np.diagonal(tiled_cholesky(da.from_array(A, chunks=2)).compute())
    np.testing.assert_array_equal(pivots[:2], [2.0, 1.0])
    assert np.isnan(pivots[2:]).all()


def test_tiles_of_unequal_size_are_refused():
    with pytest.raises(ValueError, match="square tiles of one size"):
        tiled_cholesky(da.ones((5, 5), chunks=3))
