"""Shared fixtures: real data locations and real dask clusters."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from _cluster_logs import (
    FAULT_TESTS,
    PRELOAD,
    PRELOADED,
    Allowed,
    LogFolder,
    preload_environment,
)
from _s3 import s3_endpoint  # noqa: F401  (the object-storage tests' server, a fixture)

REPO = Path(__file__).resolve().parents[1]

#: The warnings of distributed that a test may log, each with the tests it is allowed in and
#: why. Every other WARNING record of distributed, in any process of any cluster a test
#: starts (tests/_cluster_logs.py), fails the test that logged it.
ALLOWED_WARNINGS: list[Allowed] = [
    Allowed(".", r"^Shuffle \S+ (initialized by task|deactivated due to stimulus)",
            "distributed logs every P2P shuffle (a join of embeddings to labels, say) at "
            "WARNING level as a matter of course (distributed/shuffle/_scheduler_plugin.py)"),
    Allowed(r"test_memory_pressure\.py", r"^(Worker is at \d+% memory usage\. (Pausing|Resuming) "
            r"worker|Unmanaged memory use is high)",
            "the test persists more data than its small workers hold, on purpose: they spill, "
            "and may pause, and the fit must still complete"),
    Allowed(".", r"^Worker process still alive after [\d.]+ seconds, killing",
            "a cluster being closed: on a loaded machine a worker process can take longer "
            "than distributed's few seconds to end, and its nanny then ends it"),
    # Faults made on purpose: a worker or the scheduler killed mid-run.
    Allowed(FAULT_TESTS, r"^Removing worker .* caused the cluster to lose already computed "
            r"task\(s\), which will be recomputed elsewhere",
            "a worker SIGKILLed on purpose held results; the scheduler recomputes them (never "
            "'lose scattered data, which can't be recovered': that stays a failure)"),
    Allowed(FAULT_TESTS, r"^Restarting worker", "the nanny restarts a worker killed on purpose"),
    Allowed(FAULT_TESTS, r"^Worker process died unexpectedly",
            "a worker process ends when the scheduler it served is killed on purpose"),
    Allowed(FAULT_TESTS, r"^Couldn't gather (keys|\d+ keys, rescheduling)",
            "the client asked for a result held by the worker killed on purpose; the "
            "scheduler recomputes it"),
    Allowed(FAULT_TESTS, r"^(Worker stream died during communication|failed during get data)",
            "a surviving worker was fetching data from the worker killed on purpose"),
    Allowed(FAULT_TESTS, r"^Async instruction for <Task cancelled .* ended with CancelledError",
            "a surviving worker's running task is cancelled when its inputs die with the "
            "killed worker, then rerun"),
    Allowed(FAULT_TESTS, r"^(Failed to reconnect to scheduler.*|Failed to communicate with "
            r"scheduler during heartbeat\.)?$",
            "the scheduler is SIGKILLed on purpose: the client and the workers log the broken "
            "connection (the client an empty message with its traceback) and give up on it; "
            "the fit resumes from its checkpoint on a new cluster"),
]


def pytest_configure(config):
    """Every distributed client, scheduler, nanny and worker started by the tests, in this
    process or another, writes distributed's warnings where the fixture below reads them."""
    import tempfile

    import dask

    folder = tempfile.mkdtemp(prefix="kpca-dask-test-logs-")
    variables = preload_environment(folder)
    os.environ.update(variables)
    # dask read the environment when it was imported: set the same in this process.
    dask.config.set({f"distributed.{part}.preload": [PRELOAD] for part in PRELOADED})
    # A LocalCluster closes a worker's nanny for good when, some time after a worker was
    # lost (15 s by default), no worker of the same name is registered. The timer of one
    # loss also fires while a later loss of that worker is being restarted, and then
    # closes the nanny mid-restart: the tests that kill workers would wait for a worker
    # that never comes. No test needs the cluster to give up on a worker.
    dask.config.set({"distributed.deploy.lost-worker-timeout": "1 day"})
    config.kpca_dask_logs = LogFolder(folder)


def pytest_unconfigure(config):
    import shutil

    logs = getattr(config, "kpca_dask_logs", None)
    if logs is not None:
        shutil.rmtree(logs.folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_distributed_warnings(request):
    """Fail the test if distributed logged a warning it does not expect (ALLOWED_WARNINGS)."""
    logs = request.config.kpca_dask_logs
    logs.mark()
    yield
    unexpected = [record for record in logs.new_records()
                  if not any(allowed.covers(request.node, record)
                             for allowed in ALLOWED_WARNINGS)]
    if unexpected:
        pytest.fail("distributed logged warnings (tests/conftest.py ALLOWED_WARNINGS lists "
                    "the expected ones):\n" + "\n".join(map(str, unexpected)), pytrace=False)


def shared_data_dir() -> Path:
    """../shared/data beside the repository, or $KPCA_DASK_DATA."""
    return Path(os.environ.get("KPCA_DASK_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    path = shared_data_dir() / "mnist"
    if not (path / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"MNIST files not found in {path}")
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def process_cluster():
    """A distributed LocalCluster with 2 worker processes (one thread each)."""
    from distributed import LocalCluster

    from kpca_dask.dask_client import environment_kept

    # Kept twice: once the workers are up, and again after the close, in case a
    # nanny restarted a worker (and wrote its settings again) in between.
    with environment_kept():
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None)
    with environment_kept(), cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _environment_kept():
    """A test that starts worker processes leaves this process's environment as it was."""
    from kpca_dask.dask_client import environment_kept

    with environment_kept():
        yield
