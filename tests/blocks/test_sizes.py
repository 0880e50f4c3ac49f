"""dask sizes a pass's results at what they hold, and a chain's running sums as small objects.

A chain hands its running sums on as the same object, which a worker holds under two keys
for a moment (three at a merge): counted at their size there, they would be counted twice
and spilled for nothing (kpca_dask._memory.SizedByFields).
"""

from __future__ import annotations

import numpy as np
from dask.sizeof import sizeof

from kpca_dask.blocks.cross_sums import CoupledRunning, FieldKernel
from kpca_dask.blocks.replicate_statistics import ReplicateSums
from kpca_dask.blocks.statistics import RunningStatistics, statistics_of_block

M = 300
GRAM_BYTES = 8 * M * M
SMALL = 2000  # an object's own bytes, far below one m x m array


def test_the_pass_statistics_count_their_m_by_m_words():
    finished = RunningStatistics.empty(np.zeros(M)).finished()
    assert GRAM_BYTES <= sizeof(finished) < GRAM_BYTES + 16 * M + SMALL


def test_running_sums_handed_on_are_sized_as_small_objects(rng):
    x, landmarks = rng.normal(size=(2 * M, 3)), rng.normal(size=(M, 3))
    running = statistics_of_block(None, x, 0, landmarks, "rbf", {"gamma": 0.5}, np.float64,
                                  np.zeros(M))
    assert sizeof(running) < SMALL
    assert sizeof(ReplicateSums.empty(np.zeros(M), 4)) < SMALL


def test_coupled_statistics_count_both_fields_and_their_cross_sums():
    side = FieldKernel(np.zeros((M, 2)), "rbf", {"gamma": 1.0}, np.zeros(M), None)
    running = CoupledRunning.empty(side, side)
    assert sizeof(running) < SMALL
    assert sizeof(running.finished()) >= 3 * GRAM_BYTES  # G_x, G_y and S_xy
