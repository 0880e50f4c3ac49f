"""memory_budget: the memory that work on a collection may use, on a cluster and locally."""

from __future__ import annotations

import dask
import dask.array as da
import psutil
import pytest
from _clusters import process_client

from kpca_dask._memory import memory_budget


@pytest.mark.slow
def test_a_cluster_budget_is_the_smallest_worker_limit():
    """On a LocalCluster the budget is a worker's memory_limit and its threads, not the
    client machine's memory."""
    with process_client(threads_per_worker=2, memory_limit="1000MiB"):
        budget = memory_budget(da.zeros(10, chunks=5))
        assert (budget.process_bytes, budget.threads, budget.on_cluster) == (
            1000 * 2**20, 2, True)
        assert budget.task_bytes == 500 * 2**20
        # A quarter of a thread's share of the worker's room, 60 % of its limit less its
        # code (600 - 450 MiB), not 128 MiB; whatever the worker holds now.
        assert budget.block_bytes == (600 - 450) * 2**20 // 8
        # What a refusal asks for: room below the pause threshold (800 MiB), less what the
        # worker holds now.
        assert budget.free_bytes <= 800 * 2**20 - 260 * 2**20
        assert "worker" in budget.describe()


def test_a_local_budget_is_the_available_memory_or_the_configured_figure():
    """With the threaded scheduler the budget is this machine's available memory, unless
    kpca-dask.memory-limit fixes it."""
    with dask.config.set(scheduler="threads", num_workers=2):
        budget = memory_budget(da.zeros(3))
        assert not budget.on_cluster and budget.threads == 2
        assert 0 < budget.process_bytes <= psutil.virtual_memory().total
        with dask.config.set({"kpca-dask.memory-limit": "1.5 GiB"}):
            assert memory_budget(da.zeros(3)).process_bytes == int(1.5 * 2**30)


def test_kernel_blocks_follow_the_budget_and_leave_the_statistics_unchanged():
    """A small memory figure makes a task's kernel blocks small (a quarter of a thread's
    share, at least 4 MiB); the pass's sums are those of the default blocks."""
    import numpy as np

    from kpca_dask.engine.passes.nystrom import compute_pass, pass_plan

    X = da.random.default_rng(0).standard_normal((30_000, 8), chunks=(15_000, 8))
    landmarks = np.random.default_rng(1).standard_normal((300, 8))
    with dask.config.set(scheduler="threads", num_workers=2):
        assert pass_plan(X, 300).block_bytes == 2**27
        default = compute_pass(X, landmarks, "rbf", {"gamma": 0.1})
        with dask.config.set({"kpca-dask.memory-limit": "64 MiB"}):
            assert memory_budget(X).block_bytes == 8 * 2**20
            assert pass_plan(X, 300).block_bytes == 8 * 2**20
            small = compute_pass(X, landmarks, "rbf", {"gamma": 0.1})
        with dask.config.set({"kpca-dask.memory-limit": "1 MiB"}):
            assert memory_budget(X).block_bytes == 4 * 2**20  # never below 4 MiB
    np.testing.assert_allclose(small.gram, default.gram, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(small.column_sums, default.column_sums, rtol=1e-12)


@pytest.mark.slow
def test_a_worker_counts_the_pass_statistics_at_their_size():
    """The scheduler learns the pass statistics' size from the worker that holds them (their
    m x m float64 words), so it weighs moving them and the worker counts them as managed;
    the chain's running sums, handed on as one object, count as a small one."""
    import numpy as np

    from kpca_dask.blocks.statistics import finish_statistics, statistics_of_block

    m = 400
    rng = np.random.default_rng(0)
    x, landmarks = rng.normal(size=(1000, 3)), rng.normal(size=(m, 3))
    with process_client(n_workers=1) as client:
        running = client.submit(statistics_of_block, None, x, 0, landmarks, "rbf",
                                {"gamma": 0.5}, np.float64, np.zeros(m), keep_buffers=False)
        finished = client.submit(finish_statistics, running)
        finished.result()

        def nbytes(dask_scheduler, keys=(running.key, finished.key)):
            return [dask_scheduler.tasks[key].nbytes for key in keys]

        running_bytes, finished_bytes = client.run_on_scheduler(nbytes)
        assert running_bytes < 2**12
        assert 8 * m * m <= finished_bytes < 8 * m * m + 2**16
