"""Losing a worker in the middle of a fit, as when a pod is OOM-killed or its node goes away.

A multi-process cluster runs the fit; one worker process is sent SIGKILL while it
holds statistics of row blocks that are not yet reduced. Dask recomputes the
lost blocks from the graph (the data are regenerated block by block from fixed
seeds, as they would be re-read from Zarr), so the fit completes with the same
model as an undisturbed run.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

from kpca_dask import KernelPCA
from kpca_dask.engine.graph_values import SCHEDULER_COPY_KEY, shared_values

pytestmark = pytest.mark.slow

N_ROWS, N_FEATURES, ROWS_PER_BLOCK = 160_000, 8, 5_000
PARAMS = dict(n_components=6, kernel="rbf", gamma=0.1, n_landmarks=400, random_state=0)
BLOCK_TASK = "statistics_of_block"
FIT_TIMEOUT_S = 180


def _data() -> da.Array:
    """32 row blocks whose values are fixed by the seed, whichever worker computes them."""
    rng = da.random.default_rng(0)
    return rng.standard_normal((N_ROWS, N_FEATURES), chunks=(ROWS_PER_BLOCK, N_FEATURES))


def _keys_computed_more_than_once(dask_scheduler) -> list[str]:
    """Keys the scheduler saw reach memory twice: results recomputed after a loss."""
    reached = Counter(str(entry[0]) for entry in dask_scheduler.transition_log
                      if entry[2] == "memory")
    return [key for key, count in reached.items() if count > 1]


@pytest.fixture
def client():
    # A long transition log, so that the whole fit can be read back from it.
    with dask.config.set({"distributed.admin.low-level-log-length": 200_000}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None) as cluster, \
                Client(cluster) as client:
            yield client


def _key_name(key) -> str:
    """A task key's name: the first element of a tuple key (a partition's), else the key."""
    return str(key[0] if isinstance(key, tuple) else key)


def _kill_when_held(client: Client, prefix: str, run, at_kill=lambda: None) -> dict:
    """Run ``run()`` in a thread; SIGKILL the first worker to hold a ``prefix`` result.

    Returns what ``run`` returned (``"result"``) or raised (``"error"``), and
    whether the kill came while it ran (``"killed_mid_run"``); ``at_kill()``'s
    return value, called just before the kill, is ``"at_kill"``.
    """
    pids = client.run(os.getpid)
    outcome: dict = {}

    def in_background():
        try:
            outcome["result"] = run()
        except BaseException as error:  # reported by the main thread
            outcome["error"] = error

    thread = threading.Thread(target=in_background, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    victim = None
    while victim is None and time.monotonic() < deadline:
        victim = next((address for address, keys in client.has_what().items()
                       if any(_key_name(key).startswith(prefix) for key in keys)), None)
        time.sleep(0.01)
    assert victim is not None, f"no worker held a {prefix} result within 60 s"
    outcome["at_kill"] = at_kill()
    os.kill(pids[victim], signal.SIGKILL)
    outcome["killed_mid_run"] = thread.is_alive()
    thread.join(FIT_TIMEOUT_S)
    assert not thread.is_alive(), f"it did not finish within {FIT_TIMEOUT_S} s"
    assert "error" not in outcome, outcome.get("error")
    assert outcome["killed_mid_run"]
    return outcome


def test_fit_survives_a_worker_killed_mid_pass(client):
    """SIGKILL of a worker mid-fit: the fit completes with the undisturbed eigenvalues (1e-10)."""
    reference = KernelPCA(**PARAMS).fit(_data())
    client.run_on_scheduler(_clear_transition_log)
    model = _kill_when_held(client, BLOCK_TASK, lambda: KernelPCA(**PARAMS).fit(_data()))["result"]
    recomputed = client.run_on_scheduler(_keys_computed_more_than_once)
    assert any(key.startswith(BLOCK_TASK) for key in recomputed), \
        "no block was recomputed: the kill came too late to test anything"
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10, atol=0)
    np.testing.assert_allclose(model.projection_, reference.projection_, rtol=1e-10,
                               atol=1e-10 * np.abs(reference.projection_).max())


def test_shared_arrays_come_back_after_every_worker_holding_them_is_lost(client):
    """The arrays every task of a pass reads (landmarks, reference row) are tasks the
    scheduler reruns: killing every worker that holds them loses nothing, where
    scattered data would be gone for good and cancel every task that reads it."""
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


def test_arrays_beyond_the_scheduler_copy_are_scattered_with_the_same_model(client):
    """Past ``kpca-dask.scheduler-copy`` the scheduler keeps no copy (the arrays are
    scattered, not tasks it could rerun), and the fit is the same."""
    value = np.arange(1000.0)
    (kept,) = shared_values(client, value)
    with dask.config.set({SCHEDULER_COPY_KEY: value.nbytes - 1}):
        (scattered,) = shared_values(client, value)
    assert np.array_equal(kept.result(timeout=60), scattered.result(timeout=60))
    assert client.run_on_scheduler(_has_run_spec, [kept.key, scattered.key]) == [True, False]

    X = _data()[:20_000]
    params = dict(PARAMS, n_landmarks=100)
    with dask.config.set({SCHEDULER_COPY_KEY: 0}):
        all_scattered = KernelPCA(**params).fit(X)
    np.testing.assert_allclose(all_scattered.eigenvalues_, KernelPCA(**params).fit(X).eigenvalues_,
                               rtol=1e-12)


def _clear_transition_log(dask_scheduler) -> None:
    dask_scheduler.transition_log.clear()


# -- a DataFrame's pass and a Parquet write ------------------------------------

N_PARTITIONS = 32


def _partition(i: int):
    """Partition i of a table: an id column and N_FEATURES values fixed by i."""
    import pandas as pd

    values = np.random.default_rng(i).standard_normal((ROWS_PER_BLOCK, N_FEATURES))
    frame = pd.DataFrame(values, columns=[f"f{j}" for j in range(N_FEATURES)])
    frame.insert(0, "id", np.arange(i * ROWS_PER_BLOCK, (i + 1) * ROWS_PER_BLOCK))
    return frame


def _table():
    """The table as a dask DataFrame without row counts in its metadata."""
    import dask.dataframe as dd

    return dd.from_map(_partition, range(N_PARTITIONS), enforce_metadata=False)


def test_fit_of_a_table_survives_a_worker_killed_mid_pass(client):
    """A DataFrame of unknown lengths, a worker killed in the pass: the undisturbed model."""
    features = [f"f{j}" for j in range(N_FEATURES)]
    with dask.config.set(scheduler="threads"):
        reference = KernelPCA(**PARAMS).fit(_table()[features].compute())
    client.run_on_scheduler(_clear_transition_log)
    outcome = _kill_when_held(client, BLOCK_TASK,
                              lambda: KernelPCA(**PARAMS).fit(_table()[features]))
    recomputed = client.run_on_scheduler(_keys_computed_more_than_once)
    assert any(key.startswith(BLOCK_TASK) for key in recomputed)
    np.testing.assert_allclose(outcome["result"].eigenvalues_, reference.eigenvalues_,
                               rtol=1e-10)


def test_parquet_write_survives_a_worker_killed_mid_write(client, tmp_path):
    """A worker killed while the embedding is written: until the write ends no output
    exists at its path; then it is whole and equal to the undisturbed one."""
    import pandas as pd

    from kpca_dask import transform_table, write_table

    features = [f"f{j}" for j in range(N_FEATURES)]
    with dask.config.set(scheduler="threads"):
        model = KernelPCA(**PARAMS).fit(_table()[features].compute())
    out = tmp_path / "embedding.parquet"

    def write():
        write_table(transform_table(model, _table(), keep_columns=["id"]), out)

    def what_exists():
        return out.exists(), [path.name for path in tmp_path.iterdir()]

    outcome = _kill_when_held(client, "toparquetdata", write, what_exists)
    final_existed, names = outcome["at_kill"]
    assert not final_existed, "the output was readable before its write ended"
    assert any(name.startswith(".embedding.parquet.tmp-") for name in names), names
    written = pd.read_parquet(out).sort_values("id")
    with dask.config.set(scheduler="threads"):  # in this process: the rows are here
        expected = np.asarray(model.transform(_table()[features].compute()))
    assert (written["id"].to_numpy() == np.arange(N_PARTITIONS * ROWS_PER_BLOCK)).all()
    np.testing.assert_allclose(written[model.get_feature_names_out()].to_numpy(), expected,
                               atol=1e-10)
