"""Which scheduler computes a collection, found without importing distributed when no client
can exist (kpca_dask._parallel.scheduler_for)."""

from __future__ import annotations

import subprocess
import sys

import dask
import dask.array as da
import pytest

from kpca_dask._parallel import compute_options, scheduler_for

FIT_IN_A_NEW_PROCESS = r"""
import sys
import numpy as np
from kpca_dask import KernelPCA
X = np.random.default_rng(0).normal(size=(3000, 5))
Y = KernelPCA(3, n_landmarks=50, random_state=0).fit_transform(X)
print(Y.shape, "distributed" in sys.modules)
"""


def test_a_fit_of_numpy_data_does_not_import_distributed():
    """About 0.2 s of a process's first fit went to importing distributed, only for dask to
    learn that no client exists."""
    done = subprocess.run([sys.executable, "-c", FIT_IN_A_NEW_PROCESS], capture_output=True,
                          text=True, timeout=300, check=True)
    assert done.stdout.split("\n")[-2] == "(3000, 3) False"


@pytest.mark.parametrize("scheduler", [None, "sync", "threads", "processes"])
def test_the_scheduler_found_is_dasks(scheduler):
    X = da.zeros((4, 2), chunks=2)
    with dask.config.set(scheduler=scheduler):
        assert scheduler_for(X) is dask.base.get_scheduler(collections=[X])
        options = compute_options(X)
        assert options.get("scheduler", scheduler_for(X)) is scheduler_for(X)


def test_without_distributed_imported_the_collections_scheduler_computes(monkeypatch):
    monkeypatch.delitem(sys.modules, "distributed", raising=False)
    X = da.ones((4, 2), chunks=2)
    with dask.config.set(scheduler=None):
        assert scheduler_for(X) is dask.threaded.get
        assert compute_options(X) == {"scheduler": dask.threaded.get}
        assert float(X.sum().compute(**compute_options(X))) == 8.0
    assert "distributed" not in sys.modules


def test_with_a_client_the_client_computes():
    from distributed import Client

    X = da.zeros((4, 2), chunks=2)
    with Client(processes=False, n_workers=1, threads_per_worker=1,
                dashboard_address=":0") as client:
        assert scheduler_for(X) == client.get
        assert compute_options(X) == {}
        assert X.sum().compute(**compute_options(X)) == 0
