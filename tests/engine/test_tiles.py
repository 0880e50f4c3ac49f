"""The tiles of the sharded landmark problem: their size, K_mm's tiles, the pass's products."""

from __future__ import annotations

import numpy as np
import pytest

from kpca_dask._memory import MemoryBudget
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine.tiles.rows_pass import (
    LEAST_TILE,
    add_tile_row,
    chain_places,
    panel_loads,
    tile_size,
    tiles_peak_bytes,
)
from kpca_dask.engine.tiles.solve import landmark_tile


def _budget(room_bytes: int, workers: int = 4, threads: int = 1) -> MemoryBudget:
    return MemoryBudget(2 * room_bytes, threads, True, "a worker", None, room_bytes,
                        workers=workers, measured_room_bytes=room_bytes)


@pytest.mark.parametrize("room", [3 * 2**31, 2**33, 2**34])
def test_the_modelled_peak_of_the_tiles_fits_the_measured_room(room):
    """The tiles' modelled peak (the lower tiles of G, K_mm and L over the workers, and
    each thread's task) within a worker's measured room; at least 2 sqrt(4) = 4 tiles a
    side however large the room."""
    m = 40_000
    t = tile_size(m, _budget(room))
    assert tiles_peak_bytes(m, t, 4, 1) <= room
    assert t <= -(-m // 4)


def test_a_room_no_tiles_fit_gets_the_smallest_tiles():
    """m = 40 000 on four workers of 4 GiB of room: even tiles of LEAST_TILE exceed it (the
    three m x m arrays' shares alone do); the tiles are then the smallest, which hold the
    least, not the largest."""
    m = 40_000
    assert tile_size(m, _budget(2**32)) <= LEAST_TILE


def test_the_tiles_are_as_large_as_the_room_allows():
    """The next larger tiles (one fewer a side) would not fit; more room or fewer threads
    give larger tiles."""
    m, budget = 40_000, _budget(2**33)
    t = tile_size(m, budget)
    side = -(-m // t)
    if side > 4:
        assert tiles_peak_bytes(m, -(-m // (side - 1)), 4, 1) > budget.measured_room
    assert tile_size(m, _budget(2**31)) < t
    assert tile_size(m, _budget(2**33, threads=4)) < t


def test_there_are_tiles_for_every_worker():
    """At least ceil(2 sqrt(W)) tiles a side, however much memory a worker has."""
    assert -(-1000 // tile_size(1000, _budget(2**36, workers=2))) == 3
    assert -(-1000 // tile_size(1000, _budget(2**36, workers=16))) == 8


def test_landmark_tiles_are_the_kernel_with_the_jitter_on_the_diagonal():
    """K_mm's tiles, the last ones narrower, and tau I added on the diagonal tiles only."""
    Z = np.random.default_rng(0).normal(size=(5, 2))
    K = pairwise_kernel(Z, Z, "rbf", gamma=0.5)
    ranges = [(0, 3), (3, 5)]
    tiles = [[landmark_tile(Z, "rbf", {"gamma": 0.5}, rows, columns, 0.25)
              for columns in ranges] for rows in ranges]
    np.testing.assert_allclose(np.block(tiles), K + 0.25 * np.eye(5), rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_tile_rows_products_are_its_rows_of_the_gram_matrix(dtype):
    """add_tile_row adds D[:, start:]^T D into the panel: the GEMM left of the diagonal
    tile and the diagonal tile's lower triangle by the rank-k update."""
    D = np.random.default_rng(1).normal(size=(300, 70)).astype(dtype)
    panel = np.zeros((20, 70))
    add_tile_row(panel, D, 50)
    expected = (D[:, 50:].T @ D).astype(np.float64)
    tolerance = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(panel[:, :50], expected[:, :50], rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(np.tril(panel[:, 50:]), np.tril(expected[:, 50:]),
                               rtol=tolerance, atol=tolerance)


def test_the_chains_go_longest_first_to_the_least_loaded_thread():
    """LPT: with two threads and tile rows costing 1, 3 and 5 (t = 1), the 5 goes alone and
    the 3 and 1 share the other thread; each a hint a lost worker's chains do without."""
    places = chain_places([(0, 1), (1, 2), (2, 3)], [4], ["tcp://a", "tcp://b"])
    workers = {row: places[row, 0]["workers"][0] for row in range(3)}
    assert workers[2] != workers[1] == workers[0]
    assert all(place["allow_other_workers"] for place in places.values())


@pytest.mark.parametrize("m, t, workers, threads", [(16_000, 3200, 2, 1), (16_000, 4000, 4, 1),
                                                     (10_000, 700, 35, 1), (5000, 1000, 3, 2)])
def test_the_model_places_g_as_the_pass_does(m, t, workers, threads):
    """The model's placement of G's panels (chain_places, as the pass calls it, with equal
    chains): every lower tile once, a tile row whole on one worker; the modelled peak
    counts the worker holding most, which is more than an even share where the tile rows
    are few against the workers."""
    sizes = [min(t, m - start) for start in range(0, m, t)]
    lower = 8.0 * sum(sizes[i] * sizes[j] for i in range(len(sizes)) for j in range(i + 1))
    loads = panel_loads(m, t, workers, threads)
    assert len(loads) == workers
    assert sum(loads.values()) == pytest.approx(lower)
    row_bytes = [8.0 * size * sum(sizes[:i + 1]) for i, size in enumerate(sizes)]
    for load in loads.values():  # a sum of whole tile rows
        assert any(abs(load - total) < 1 for total in _subset_sums(row_bytes))
    assert tiles_peak_bytes(m, t, workers, threads) >= 3 * lower / workers
    if len(sizes) <= workers:  # one row a worker: the last row's, T tiles of T (T + 1) / 2
        assert max(loads.values()) == pytest.approx(max(row_bytes))


def _subset_sums(values):
    sums = {0.0}
    for value in values:
        sums |= {total + value for total in sums}
    return sums
