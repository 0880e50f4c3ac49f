"""get_client: an explicit address, DASK_SCHEDULER_ADDRESS, or a local cluster."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from distributed import LocalCluster, default_client

import kpca_dask
from kpca_dask import KernelPCA, cli
from kpca_dask.dask_client import (
    SCHEDULER_ENV,
    describe_client,
    environment_kept,
    get_client,
)
from kpca_dask.errors import InvalidParameterError
from kpca_dask.io import write_array, write_embedding


@pytest.fixture(scope="module")
def cluster():
    """A real scheduler with one worker process, on 127.0.0.1."""
    with environment_kept():
        c = LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                         host="127.0.0.1", dashboard_address=":0", memory_limit="1GiB")
    with environment_kept(), c:
        yield c


@pytest.fixture
def no_scheduler_env(monkeypatch):
    monkeypatch.delenv(SCHEDULER_ENV, raising=False)


@pytest.mark.slow
def test_local_cluster_leaves_the_environment_unchanged(monkeypatch, no_scheduler_env):
    """Starting a local cluster of worker processes gives the workers distributed's
    thread and malloc settings, but leaves this process's environment as it was,
    both while the cluster runs and after it is closed."""
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    for name in ("OPENBLAS_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "MALLOC_TRIM_THRESHOLD_", "PYTHONHASHSEED")
    before = {name: os.environ.get(name) for name in names}
    with get_client(n_workers=1, threads_per_worker=1, memory_limit="1GiB",
                    processes=True) as client:
        on_worker = next(iter(client.run(
            lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_")).values()))
        assert on_worker == "65536"
        assert {name: os.environ.get(name) for name in names} == before
    assert {name: os.environ.get(name) for name in names} == before


@pytest.mark.slow
def test_explicit_address(cluster, no_scheduler_env):
    """An address connects to that scheduler."""
    with get_client(cluster.scheduler_address) as client:
        assert client.scheduler.address == cluster.scheduler_address
        assert len(client.scheduler_info()["workers"]) == 1


@pytest.mark.slow
def test_environment_variable(cluster, monkeypatch):
    """Without an address, DASK_SCHEDULER_ADDRESS names the scheduler."""
    monkeypatch.setenv(SCHEDULER_ENV, cluster.scheduler_address)
    with get_client() as client:
        assert client.scheduler.address == cluster.scheduler_address


@pytest.mark.slow
def test_address_beats_environment(cluster, monkeypatch):
    """An explicit address wins over the environment variable."""
    monkeypatch.setenv(SCHEDULER_ENV, "tcp://127.0.0.1:9")
    with get_client(cluster.scheduler_address) as client:
        assert client.scheduler.address == cluster.scheduler_address


def test_local_cluster_shape(no_scheduler_env):
    """With no address anywhere, a local cluster of the requested shape is started and stopped."""
    with get_client(n_workers=2, threads_per_worker=1, processes=False) as client:
        workers = client.scheduler_info()["workers"].values()
        assert sorted(w["nthreads"] for w in workers) == [1, 1]
        assert describe_client(client).startswith("Dask: 2 worker(s), 2 thread(s) at ")
        cluster = client.cluster
    assert cluster.status.name == "closed"


def test_tls_address_needs_configuration(no_scheduler_env):
    """A tls:// address without TLS credentials in the Dask config is a clear error."""
    with pytest.raises(InvalidParameterError, match="DASK_DISTRIBUTED__COMM__TLS__CA_FILE"):
        get_client("tls://127.0.0.1:8786")


def test_library_never_starts_a_client(tmp_path):
    """Fitting, transforming and writing run without creating any Dask client."""
    X = np.random.default_rng(0).normal(size=(200, 3))
    write_array(X, tmp_path / "x.zarr")
    kpca = KernelPCA(n_components=2, n_landmarks=30).fit(tmp_path / "x.zarr")
    write_embedding(kpca.transform(tmp_path / "x.zarr"), tmp_path / "y.zarr")
    kpca.save(tmp_path / "m.zarr")
    with pytest.raises(ValueError, match="No clients found"):
        default_client()


@pytest.mark.slow
def test_cli_runs_on_the_given_scheduler(cluster, tmp_path, no_scheduler_env, capsys):
    """`kpca-dask fit --scheduler ADDRESS` computes on that scheduler."""
    write_array(np.random.default_rng(0).normal(size=(500, 3)), tmp_path / "x.zarr")
    status = cli.main(["fit", str(tmp_path / "x.zarr"), "--model", str(tmp_path / "m.zarr"),
                       "--n-components", "2", "--n-landmarks", "40",
                       "--scheduler", cluster.scheduler_address])
    assert status == 0
    assert f"at {cluster.scheduler_address}" in capsys.readouterr().err
    assert kpca_dask.load(tmp_path / "m.zarr").n_samples_fit_ == 500


@pytest.mark.slow
def test_cli_subprocess_uses_environment_scheduler(cluster, tmp_path):
    """A `kpca-dask transform` process finds the scheduler through DASK_SCHEDULER_ADDRESS."""
    X = np.random.default_rng(1).normal(size=(300, 3))
    write_array(X, tmp_path / "x.zarr")
    model = KernelPCA(n_components=2, n_landmarks=30, random_state=0).fit(X)
    model.save(tmp_path / "m.zarr")
    env = {**os.environ, SCHEDULER_ENV: cluster.scheduler_address}
    done = subprocess.run(
        [sys.executable, "-m", "kpca_dask", "transform", "m.zarr", "x.zarr", "--out", "y.zarr"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"at {cluster.scheduler_address}" in done.stderr
    written = kpca_dask.io.open_array(tmp_path / "y.zarr").compute()
    np.testing.assert_array_equal(written, model.transform(X))
