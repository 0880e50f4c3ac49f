"""dask counts what the sums and statistics that tasks hand on hold, not their objects alone."""

from __future__ import annotations

import numpy as np
import pytest
from dask.sizeof import sizeof

from kpca_dask.blocks.cross_sums import CoupledRunning, FieldKernel
from kpca_dask.blocks.replicate_statistics import ReplicateSums
from kpca_dask.blocks.statistics import RunningStatistics, statistics_of_block

M = 300
GRAM_BYTES = 8 * M * M


def test_a_chains_sums_count_their_m_by_m_words(rng):
    running = RunningStatistics.empty(np.zeros(M))
    assert GRAM_BYTES <= sizeof(running) < GRAM_BYTES + 16 * M + 2000
    finished = running.finished()
    assert GRAM_BYTES <= sizeof(finished) < GRAM_BYTES + 16 * M + 2000


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_held_workspace_is_counted_and_a_freed_one_is_not(rng, dtype):
    x, landmarks = rng.normal(size=(2 * M, 3)), rng.normal(size=(M, 3))
    running = statistics_of_block(None, x, 0, landmarks, "rbf", {"gamma": 0.5}, dtype,
                                  np.zeros(M))
    buffer, scratch = running.workspace.arrays(2 * M, M, dtype)
    held = buffer.nbytes + (0 if scratch is None else scratch.nbytes)
    assert sizeof(running) >= GRAM_BYTES + held
    running.finished()
    assert sizeof(running) < GRAM_BYTES + 16 * M + 2000


def test_coupled_and_replicate_sums_count_every_array():
    side = FieldKernel(np.zeros((M, 2)), "rbf", {"gamma": 1.0}, np.zeros(M), None)
    coupled = CoupledRunning.empty(side, side)
    assert sizeof(coupled) >= 3 * GRAM_BYTES  # G_x, G_y and S_xy
    replicates = ReplicateSums.empty(np.zeros(M), 4)
    assert sizeof(replicates) >= 4 * GRAM_BYTES
