"""Landmarks beyond memory are refused up front; automatic m stops at the memory's cap."""

from __future__ import annotations

import time

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster
from sklearn.exceptions import ConvergenceWarning

from kpca_dask import InsufficientMemoryError, KernelPCA
from kpca_dask.dask_client import environment_kept
from kpca_dask.engine.solve.landmark_memory import landmark_cap, landmark_problem_bytes


def _unreadable(n=5000, p=4):
    """A dask array whose every block fails when read: the refusal must come first."""
    def fail(block):
        raise AssertionError("the data were read before the refusal")
    return da.zeros((n, p), chunks=(1000, p)).map_blocks(fail, dtype=float)


def test_an_m_beyond_the_memory_is_refused_with_the_figure_before_reading():
    limit = landmark_problem_bytes(1000)
    with dask.config.set({"kpca-dask.memory-limit": limit, "scheduler": "threads"}):
        started = time.perf_counter()
        with pytest.raises(InsufficientMemoryError) as caught:
            KernelPCA(5, n_landmarks=2000, landmarks="uniform", gamma=0.1).fit(_unreadable())
    message = str(caught.value)
    assert "n_landmarks=2000 needs about 67.14 MiB" in message
    assert "Use at most n_landmarks=1000" in message
    assert "kpca-dask.memory-limit" in message
    assert time.perf_counter() - started < 5
    assert isinstance(caught.value, MemoryError)


def test_explicit_landmark_points_count_too():
    limit = landmark_problem_bytes(100)
    points = np.zeros((150, 4))
    with dask.config.set({"kpca-dask.memory-limit": limit, "scheduler": "threads"}):
        with pytest.raises(InsufficientMemoryError, match="n_landmarks=150"):
            KernelPCA(5, n_landmarks=150, landmarks=points, gamma=0.1).fit(_unreadable())


def test_automatic_m_stops_at_the_memory_cap_and_says_so(rng):
    X = rng.uniform(size=(3000, 6))
    limit = landmark_problem_bytes(300)
    with dask.config.set({"kpca-dask.memory-limit": limit, "scheduler": "threads"}):
        assert landmark_cap(da.from_array(X))[0] == 300
        with pytest.warns(ConvergenceWarning, match=r"cap of 300 landmarks \(the most "
                                                    r"landmarks that fit in .*configured"):
            model = KernelPCA(3, n_landmarks="auto", landmarks="uniform", gamma=5.0,
                              tol=1e-9, random_state=0).fit(X)
    assert [m for m, _ in model.landmark_path_] == [128, 256, 300]
    assert model.n_landmarks_ == 300


def test_automatic_m_below_the_memory_cap_names_max_landmarks(rng):
    X = rng.uniform(size=(2000, 6))
    with pytest.warns(ConvergenceWarning, match=r"\(max_landmarks=200\)"):
        KernelPCA(3, n_landmarks="auto", landmarks="uniform", gamma=5.0, tol=1e-9,
                  max_landmarks=200, random_state=0).fit(X)


@pytest.mark.slow
def test_on_a_cluster_the_workers_memory_limit_refuses():
    with environment_kept():
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None,
                               memory_limit="400MiB")
    with environment_kept(), cluster, Client(cluster):
        with pytest.raises(InsufficientMemoryError, match="pause threshold of the smallest worker"):
            KernelPCA(5, n_landmarks=4000, landmarks="uniform", gamma=0.1).fit(
                da.zeros((5000, 4), chunks=(1000, 4)))
