"""The tiles of the sharded landmark problem: their size and the padded K_mm tiles."""

from __future__ import annotations

import numpy as np
import pytest

from kpca_dask._memory import WORKER_CODE_BYTES, MemoryBudget
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine.tiled_pass import LEAST_TILE, TASK_SHARE, tile_size
from kpca_dask.engine.tiled_solve import landmark_tile


def _budget(limit_bytes: int, workers: int = 4, threads: int = 1) -> MemoryBudget:
    room = int(0.8 * limit_bytes) - WORKER_CODE_BYTES
    return MemoryBudget(limit_bytes, threads, True, "a worker", None, room, workers=workers)


@pytest.mark.parametrize("limit", [2**30, 2**31, 2**33])
def test_a_tile_rows_panel_and_its_product_fit_a_share_of_a_worker(limit):
    """2 t m float64 words (the panel and its GEMM's product) within TASK_SHARE of a
    worker thread's room, whenever that allows tiles of LEAST_TILE or more."""
    m = 40_000
    budget = _budget(limit)
    t = tile_size(m, budget)
    if t > LEAST_TILE:
        assert 2 * 8 * t * m <= TASK_SHARE * budget.sizing_bytes
    assert t <= -(-m // 4)  # 2 sqrt(4) = 4 tiles a side at least


def test_the_tile_follows_the_limit():
    """A worker with more memory gets larger tiles, more threads smaller ones."""
    m = 40_000
    assert tile_size(m, _budget(2**31)) < tile_size(m, _budget(2**33))
    assert tile_size(m, _budget(2**33, threads=4)) < tile_size(m, _budget(2**33))


def test_there_are_tiles_for_every_worker():
    """At least ceil(2 sqrt(W)) tiles a side, however much memory a worker has."""
    assert -(-1000 // tile_size(1000, _budget(2**36, workers=2))) == 3
    assert -(-1000 // tile_size(1000, _budget(2**36, workers=16))) == 8


def test_padded_landmark_tiles_are_the_kernel_then_the_identity():
    """K_mm's tiles, padded past m with an identity block, so that its Cholesky factor is
    K_mm's with an identity block beside it."""
    Z = np.random.default_rng(0).normal(size=(5, 2))
    K = pairwise_kernel(Z, Z, "rbf", gamma=0.5)
    t, m = 3, 5
    tiles = [[landmark_tile(Z, "rbf", {"gamma": 0.5}, i * t, j * t, t, m) for j in range(2)]
             for i in range(2)]
    padded = np.block(tiles)
    np.testing.assert_allclose(padded[:m, :m], K, rtol=1e-14)
    np.testing.assert_array_equal(padded[m:, m:], np.eye(1))
    np.testing.assert_array_equal(padded[:m, m:], 0.0)
    L = np.linalg.cholesky(padded)
    np.testing.assert_allclose(L[:m, :m], np.linalg.cholesky(K), rtol=1e-12)
