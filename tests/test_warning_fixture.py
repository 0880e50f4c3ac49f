"""The suite's own check on distributed's warnings (tests/conftest.py, tests/_cluster_logs.py),
tested: a WARNING on any of distributed's loggers, in the test process or in a worker
process, fails the test that logged it; an allowed one, or one of another library, does not.

The suite's conftest is run as it is in a pytest session of its own (a subprocess, so that
its settings and its log folder are its own), on a small test file that logs on purpose.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parent

#: distributed's loggers a record may come from: the top one, those of the client, the
#: scheduler, workers and nannies, and those of the modules below them (communication,
#: memory, shuffles, deployment) that log on their own.
LOGGERS = ("distributed", "distributed.client", "distributed.scheduler", "distributed.worker",
           "distributed.nanny", "distributed.core", "distributed.comm.tcp",
           "distributed.worker_memory", "distributed.utils_perf",
           "distributed.shuffle._scheduler_plugin", "distributed.deploy.spec",
           "distributed.batched", "distributed.protocol.core")

CONFTEST = f"""
import runpy
import sys

sys.path.insert(0, {str(TESTS)!r})
globals().update({{name: value for name, value in
                  runpy.run_path({str(TESTS / "conftest.py")!r}).items()
                  if not name.startswith("__")}})
"""

LOGGING_TESTS = f"""
import logging
import warnings

import distributed
import pytest
from distributed import Client, LocalCluster

LOGGERS = {LOGGERS!r}


def log(name, message):
    logging.getLogger(name).warning(message)


def warn_from_distributed(message):
    warnings.warn_explicit(message, UserWarning, filename=distributed.__file__, lineno=1)


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


@pytest.mark.parametrize("name", LOGGERS)
def test_here(client, name):
    log(name, "a warning nobody allowed")


@pytest.mark.parametrize("name", LOGGERS)
def test_in_a_worker(client, name):
    client.run(log, name, "a warning nobody allowed")


def test_a_python_warning_of_distributed_in_a_worker(client):
    client.run(warn_from_distributed, "a warning nobody allowed")


def test_allowed_warnings_pass(client):
    log("distributed.scheduler", "Shuffle 0123 initialized by task 'x'")
    client.run(log, "distributed.worker", "Shuffle 0123 deactivated due to stimulus 'y'")


def test_another_librarys_warning_passes(client):
    log("kpca_dask", "a warning nobody allowed")
    client.run(log, "tornado.general", "a warning nobody allowed")


def test_no_warning_passes(client):
    assert list(client.run(abs, -1).values()) == [1]
"""


@pytest.mark.slow
def test_every_distributed_warning_fails_its_test_and_allowed_ones_do_not(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_logging=LOGGING_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rfE", "-q",
                                           timeout=300)
    failed = ([f"test_here[{name}]" for name in LOGGERS]
              + [f"test_in_a_worker[{name}]" for name in LOGGERS]
              + ["test_a_python_warning_of_distributed_in_a_worker"])
    # The check runs as the tests' fixtures are torn down: a test that logged fails there.
    summary = result.stdout.lines[result.stdout.lines.index(next(
        line for line in result.stdout.lines if "short test summary info" in line)):]
    errors = {line.split()[1].split("::")[1] for line in summary if line.startswith("ERROR ")}
    assert errors == set(failed), (sorted(set(failed) - errors), sorted(errors - set(failed)))
    result.assert_outcomes(passed=3 + len(failed), errors=len(failed))
    # One report a failing test (its teardown's, not the summary line that repeats it).
    reports = [line for line in result.stdout.lines
               if line.startswith("distributed logged warnings (tests/conftest.py")]
    assert len(reports) == len(failed)
