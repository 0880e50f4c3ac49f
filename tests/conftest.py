"""Shared fixtures: real data locations and real dask clusters."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import uuid
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
    Allowed(".", r"^Failed to communicate with scheduler during heartbeat\.$",
            "a cluster being closed on a loaded machine: a worker's last heartbeat can meet a "
            "scheduler that has already closed (seen on a page's LocalCluster closing beside "
            "the worker-budget tests); a scheduler lost while a test computes fails that test "
            "by its result, whatever is logged"),
    Allowed(".", r"^UserWarning: Port 8787 is already in use\.",
            "the notebooks, the docs pages and the command line start a LocalCluster as a "
            "reader does, with distributed's default dashboard port; when the other test "
            "process runs one at that moment, distributed serves this dashboard on another "
            "port and says so (seen on notebook 03 beside another cluster); nothing else "
            "changes"),
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


#: Tests that must not share the machine: each is marked ``serial`` and, when the suite runs
#: on several processes (``pytest -n 2``, as ``make test`` runs it), runs alone, with no test
#: of another process at the same time (:func:`_one_at_a_time`). A node id pattern, and why.
#: A test may also carry ``@pytest.mark.serial`` itself.
#:
#: A process's peak memory alone is no reason: :class:`kpca_dask.diagnostics.MemoryWatch`
#: reads the kernel's high-water mark, exact whenever its samples come, and a fresh
#: process's peak (``ru_maxrss``) is exact too, so the sparse-memory test runs beside others.
#: Nor is a worker's: the worker-budget and tiles' tests measure each worker's growth over
#: its own baseline at its exact peak, which another test's load does not move, so they run
#: beside others too (their clusters, with those of tests/faults, still one at a time).
RUN_ALONE: list[tuple[str, str]] = [
    (r"^tests/distributed/test_memory_pressure\.py::",
     "workers of a small memory limit must spill in time, and still finish without a "
     "restart: how fast they spill against how fast they fill depends on the cores"),
    (r"^tests/engine/test_landmark_memory\.py::test_an_m_beyond_the_memory_is_refused",
     "the refusal must come within 5 s"),
]

#: Tests that start a cluster of worker processes and make it work hard (faults, memory
#: limits): in a parallel run no two of them run at the same time (:func:`_one_at_a_time`),
#: so that they do not share the cores and wait past their timeouts.
CLUSTER_TESTS = ("tests/distributed/", "tests/faults/")

#: Modules first in a parallel run, longest first (their times in a full run on 2 cores):
#: each test process always holds one module ahead of the one it runs, so a long module
#: late in the run can leave the other process idle at the end (the file-damage module,
#: 20-40 s, comes alphabetically near the end).
LONGEST_FIRST = ("tests/faults/", "tests/distributed/",  # one unit: about 200 s
                 "tests/interfaces/test_benchmarks.py", "tests/interfaces/test_doc_pages.py",
                 "tests/interfaces/test_notebooks.py", "tests/interfaces/test_docs.py",
                 "tests/checkpoints/test_checkpoints.py", "tests/interfaces/test_cli.py",
                 "tests/io/test_concurrent_writers.py", "tests/storage/test_file_damage.py",
                 "tests/deploy/test_tls_cluster.py", "tests/deploy/test_object_storage.py",
                 "tests/engine/test_small_problem.py", "tests/engine/test_large_m.py",
                 "tests/io/test_tables_object_storage.py", "tests/engine/test_determinism.py",
                 "tests/interfaces/test_demo.py", "tests/interfaces/test_readme.py",
                 "tests/coupled/test_coupled_kernel.py", "tests/engine/test_nystrom_accuracy.py",
                 "tests/engine/test_one_pass.py")


def pytest_collection_modifyitems(config, items):
    """Mark the tests of :data:`RUN_ALONE` ``serial``; in a parallel run (``pytest -n``, whose
    ``--dist loadfile`` gives each module to one process, which sets up its module
    fixtures once) put the longest modules first."""
    for item in items:
        if any(re.search(pattern, item.nodeid) for pattern, _ in RUN_ALONE):
            item.add_marker(pytest.mark.serial)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def rank(item) -> int:
        module = item.nodeid.split("::")[0]
        return next((i for i, first in enumerate(LONGEST_FIRST) if module.startswith(first)),
                    len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: each module keeps its order


def pytest_xdist_make_scheduler(config, log):
    """In a parallel run, the modules of :data:`CLUSTER_TESTS` are one unit of work, given
    to one process, so that they run one after another there while the other process
    runs the rest (rather than one process waiting on the clusters' lock); every other
    module is a unit of its own, as with ``--dist loadfile``."""
    from xdist.scheduler import LoadFileScheduling

    class ClusterTestsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return ("cluster tests" if nodeid.startswith(CLUSTER_TESTS)
                    else super()._split_scope(nodeid))

    return ClusterTestsTogether(config, log)


#: The locks a ``serial`` test keeps for the next test of its process when that one is
#: ``serial`` too (:func:`_one_at_a_time`): the open files of the door, the room and the
#: clusters' lock, all held; None otherwise.
_HELD_FOR_NEXT: tuple | None = None


def _serial(item) -> bool:
    return item is not None and item.get_closest_marker("serial") is not None


@contextlib.contextmanager
def _one_at_a_time(item, nextitem=None):
    """A ``serial`` test holds the room alone; every other test shares it (``flock``), and a
    test of :data:`CLUSTER_TESTS` also holds the clusters' lock.

    Only between the processes of one parallel run (their common
    ``PYTEST_XDIST_TESTRUNUID``). A test waiting to run alone first takes the door, so
    the others cannot keep the room shared forever: a test takes the door before the
    room, and a shared holder lets it go at once. Consecutive ``serial`` tests of one
    process keep the room between them: handing it to the other process after each
    made the two alternate, one idle while the other ran (about 140 s of a core in a
    run of ``make test``).
    """
    global _HELD_FOR_NEXT
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        yield
        return
    alone = _serial(item)
    busy = item.nodeid.startswith(CLUSTER_TESTS)
    if _HELD_FOR_NEXT is not None:  # the previous serial test left the room to this one
        door, room, clusters = _HELD_FOR_NEXT
        _HELD_FOR_NEXT = None
    else:
        folder = _lock_folder(run)
        folder.mkdir(exist_ok=True)
        door, room, clusters = (open(folder / name, "a")
                                for name in ("door", "room", "clusters"))
        fcntl.flock(door, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(door, fcntl.LOCK_UN)
    if busy:  # taken last, and only in the room: no two processes wait on each other
        fcntl.flock(clusters, fcntl.LOCK_EX)
    try:
        yield
    finally:
        if alone and _serial(nextitem):
            _HELD_FOR_NEXT = (door, room, clusters)
        else:
            for lock in (clusters, room, door):
                fcntl.flock(lock, fcntl.LOCK_UN)
                lock.close()


def _lock_folder(run: str) -> Path:
    """Where the processes of the parallel run ``run`` keep their locks (the room, its door,
    the clusters')."""
    return Path(tempfile.gettempdir()) / f"kpca-dask-tests-{run}"


def _is_parallel_controller(config) -> bool:
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses",
                                                               None))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Set-up, call and tear-down of a test within its share of the room."""
    with _one_at_a_time(item, nextitem):
        return (yield)


def pytest_configure(config):
    """Every distributed client, scheduler, nanny and worker started by the tests, in this
    process or another, writes distributed's warnings where the fixture below reads them."""
    import tempfile

    import dask

    folder = tempfile.mkdtemp(prefix="kpca-dask-test-logs-")
    variables = preload_environment(folder)
    # Worker processes are forked from a server that has imported numpy, pandas, dask and
    # distributed once (distributed's forkserver, as its own test suite uses), here and in
    # the subprocesses, rather than each spawned interpreter importing them again: about
    # 2 s of CPU per worker, in a suite that starts hundreds. The nanny's settings that
    # must come before numpy's import (OPENBLAS_NUM_THREADS=1, ...) are in the environment
    # when the first nanny starts that server, so every worker still has them.
    variables["DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"] = "forkserver"
    os.environ.update(variables)
    # dask read the environment when it was imported: set the same in this process.
    dask.config.set({f"distributed.{part}.preload": [PRELOAD] for part in PRELOADED})
    dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
    _preload_what_workers_import()
    # A LocalCluster closes a worker's nanny for good when, some time after a worker was
    # lost (15 s by default), no worker of the same name is registered. The timer of one
    # loss also fires while a later loss of that worker is being restarted, and then
    # closes the nanny mid-restart: the tests that kill workers would wait for a worker
    # that never comes. No test needs the cluster to give up on a worker.
    dask.config.set({"distributed.deploy.lost-worker-timeout": "1 day"})
    config.kpca_dask_logs = LogFolder(folder)
    if _is_parallel_controller(config) and config.option.testrunuid is None:
        # The run's id, known here, so that the lock folder its processes share is removed
        # once they have all ended (pytest_unconfigure).
        config.option.testrunuid = uuid.uuid4().hex


#: What a worker of this library's tests imports on its first task, beyond what distributed
#: has its forkserver import (numpy, pandas, dask, distributed): about 0.9 s of CPU per
#: worker process, in a suite that starts and restarts some two hundred.
WORKER_IMPORTS = ("dask.array", "dask.dataframe", "scipy.linalg", "sklearn.base", "xarray",
                  "zarr", "numba", "kpca_dask.estimators.kernel_pca",
                  "kpca_dask.estimators.exact", "kpca_dask.io")


def _preload_what_workers_import() -> None:
    """Have the forkserver import :data:`WORKER_IMPORTS` besides distributed's own list
    (``distributed.utils.get_mp_context``: distributed and the packages it reports), once,
    before it forks any worker. distributed sets its list on its first use of the forkserver
    and not again, so the full list is set after that use. Importing these starts no thread
    (a fork copies only the thread that calls it)."""
    import importlib.util

    from distributed.utils import get_mp_context
    from distributed.versions import optional_packages, required_packages

    context = get_mp_context()
    theirs = ["distributed"] + [name for name in required_packages + optional_packages
                                if importlib.util.find_spec(name) is not None]
    context.set_forkserver_preload(theirs + list(WORKER_IMPORTS))


def pytest_unconfigure(config):
    import shutil

    logs = getattr(config, "kpca_dask_logs", None)
    if logs is not None:
        shutil.rmtree(logs.folder, ignore_errors=True)
    if _is_parallel_controller(config) and config.option.testrunuid:
        shutil.rmtree(_lock_folder(config.option.testrunuid), ignore_errors=True)


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


@pytest.fixture(scope="module")
def process_cluster():
    """A distributed LocalCluster with 2 worker processes (one thread each), one per module.

    Per module, not per session: an idle cluster's scheduler and workers still use about a
    tenth of a core (2.2 CPU-s in 20 s: their event loops' ticks, heartbeats and monitors),
    which a cluster kept for the whole run by each test process took from a suite bound by
    its two cores; a start, its workers forked from the preloaded server, takes about 0.6 s."""
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


def pytest_terminal_summary(terminalreporter):
    """The time of the tests by directory (set-up, call and tear-down, summed over the
    processes of a parallel run), after the slowest tests: where the suite's minutes go."""
    seconds: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            duration, nodeid = getattr(report, "duration", None), getattr(report, "nodeid", "")
            if duration is None or not nodeid:
                continue
            path = nodeid.split("::")[0]
            folder = path.rsplit("/", 1)[0] if "/" in path else path
            seconds[folder] = seconds.get(folder, 0.0) + duration
    if not seconds:
        return
    terminalreporter.write_sep("=", "time by directory (all processes)")
    for folder, spent in sorted(seconds.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{spent:8.1f}s  {folder}")
    terminalreporter.write_line(f"{sum(seconds.values()):8.1f}s  in all")
