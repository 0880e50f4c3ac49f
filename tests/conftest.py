"""Shared fixtures: real data locations and real dask clusters."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from _s3 import s3_endpoint  # noqa: F401  (the object-storage tests' server, a fixture)

REPO = Path(__file__).resolve().parents[1]


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
