"""The arrays a pass's tasks share survive the loss of every worker that holds them.

They are literal tasks whose keys come from their contents
(kpca_dask.engine.graph_values), never scattered data: the scheduler keeps
their recipe and reruns it after a loss, and a call that would give it more
than ``kpca-dask.scheduler-copy`` to keep is refused. Every public path with a
worker killed in its middle: tests/faults/test_fault_sweep.py.
"""

from __future__ import annotations

import os
import signal

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

from kpca_dask import InsufficientMemoryError, KernelPCA
from kpca_dask.engine.graph_values import SCHEDULER_COPY_KEY, shared_values

pytestmark = [pytest.mark.slow, pytest.mark.faults]

N_ROWS, N_FEATURES, ROWS_PER_BLOCK = 160_000, 8, 5_000
PARAMS = dict(n_components=6, kernel="rbf", gamma=0.1, n_landmarks=400, random_state=0)
FIT_TIMEOUT_S = 180


def _data() -> da.Array:
    """32 row blocks whose values are fixed by the seed, whichever worker computes them."""
    rng = da.random.default_rng(0)
    return rng.standard_normal((N_ROWS, N_FEATURES), chunks=(ROWS_PER_BLOCK, N_FEATURES))


def _cluster():
    return LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                        host="127.0.0.1", dashboard_address=None)


@pytest.fixture
def fresh_client():
    """A cluster of its own, for the test that kills its workers."""
    with _cluster() as cluster, Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def client():
    """One cluster for the tests that only need one: nothing is killed there."""
    with _cluster() as cluster, Client(cluster) as client:
        yield client


def test_shared_arrays_come_back_after_every_worker_holding_them_is_lost(fresh_client):
    """The arrays every task of a pass reads (landmarks, reference row) are tasks the
    scheduler reruns: killing every worker that holds them loses nothing, where
    scattered data would be gone for good and cancel every task that reads it."""
    client = fresh_client
    value = np.arange(1000.0)
    (shared,) = shared_values(client, value)
    shared.result(timeout=60)
    pids = client.run(os.getpid)
    for address in client.who_has([shared])[shared.key]:
        os.kill(pids[address], signal.SIGKILL)
    total = client.submit(np.sum, shared, pure=False).result(timeout=FIT_TIMEOUT_S)
    assert total == value.sum()


def _has_run_spec(keys, dask_scheduler) -> list[bool]:
    return [dask_scheduler.tasks[key].run_spec is not None for key in keys]


def test_arrays_beyond_the_scheduler_copy_are_refused_before_anything_is_sent(client):
    """Past ``kpca-dask.scheduler-copy`` a fit is refused with the key to raise, and no
    array is scattered instead (scattered data has no recipe to recompute it from)."""
    X = _data()[:20_000]
    params = dict(PARAMS, n_landmarks=100)
    before = client.run_on_scheduler(_keys_without_recipe)
    with dask.config.set({SCHEDULER_COPY_KEY: 100 * N_FEATURES * 8 - 1}):
        with pytest.raises(InsufficientMemoryError, match=SCHEDULER_COPY_KEY):
            KernelPCA(**params).fit(X)
    assert client.run_on_scheduler(_keys_without_recipe) == before == []


def test_equal_arrays_share_one_deterministic_key(client):
    """The same array shared twice has one key (from its contents) and one recipe."""
    value = np.arange(1000.0)
    (first,) = shared_values(client, value)
    (second,) = shared_values(client, value.copy())
    assert first.key == second.key
    first.result(timeout=60)
    assert client.run_on_scheduler(_has_run_spec, [first.key]) == [True]
    del first
    assert np.array_equal(second.result(timeout=60), value)


def _keys_without_recipe(dask_scheduler) -> list:
    """Keys the scheduler holds data of but could not recompute: scattered data."""
    return [key for key, task in dask_scheduler.tasks.items() if task.run_spec is None]
