"""Same model whatever the chunking, the scheduler and the number of workers."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

from kpca_dask import KernelPCA
from kpca_dask.datasets import make_dataset

ESTIMATOR = dict(n_components=6, gamma=0.05, n_landmarks=120, landmarks="uniform",
                 random_state=7)


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_dataset("blobs", 3000, n_features=8, chunk_rows=3000, seed=1)
    return X.compute()


def _fit(X):
    return KernelPCA(**ESTIMATOR).fit(X)


def _assert_same_model(a, b, rtol=1e-10):
    np.testing.assert_array_equal(a.landmark_indices_, b.landmark_indices_)
    np.testing.assert_allclose(a.eigenvalues_, b.eigenvalues_, rtol=rtol)
    np.testing.assert_allclose(a.projection_, b.projection_, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("rows_per_chunk", [(3000,), (457,), (100,)])
def test_chunking_does_not_change_the_model(blobs, rows_per_chunk):
    """Three chunkings (1, 7 and 30 blocks) give eigenvalues equal to 1e-10."""
    reference = _fit(blobs)
    chunked = _fit(da.from_array(blobs, chunks=(rows_per_chunk[0], -1)))
    _assert_same_model(chunked, reference)


def test_uneven_chunks(blobs):
    """Irregular row chunks give the same model too."""
    chunks = ((1, 999, 1500, 500), (8,))
    _assert_same_model(_fit(da.from_array(blobs, chunks=chunks)), _fit(blobs))


def test_signs_and_values_are_deterministic(blobs):
    """Two fits with the same seed give bitwise identical embeddings."""
    np.testing.assert_array_equal(_fit(blobs).transform(blobs[:50]),
                                  _fit(blobs).transform(blobs[:50]))


def test_seed_changes_the_landmarks(blobs):
    """A different random_state draws different landmarks."""
    other = KernelPCA(**{**ESTIMATOR, "random_state": 8}).fit(blobs)
    assert not np.array_equal(other.landmark_indices_, _fit(blobs).landmark_indices_)


@pytest.mark.slow
def test_threads_vs_process_cluster(blobs, process_cluster):
    """Threaded scheduler and a LocalCluster with 2 worker processes agree to 1e-10."""
    X = da.from_array(blobs, chunks=(300, -1))
    threaded = _fit(X)
    with Client(process_cluster):
        distributed = _fit(X)
        Y = distributed.transform(X).compute()
    _assert_same_model(distributed, threaded)
    np.testing.assert_allclose(Y, threaded.transform(blobs), rtol=1e-8, atol=1e-10)


@pytest.mark.slow
def test_one_worker_vs_two(blobs, process_cluster):
    """One worker process and two give the same model."""
    X = da.from_array(blobs, chunks=(300, -1))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as one, Client(one):
        single = _fit(X)
    with Client(process_cluster):
        double = _fit(X)
    _assert_same_model(single, double)


@pytest.mark.slow
def test_large_landmark_sets_keep_the_graph_small(process_cluster):
    """12 MB of landmarks (m = 2000, p = 784) go to the workers once, not inside the graph:
    distributed sends no "large graph", and the model equals the threaded one."""
    import warnings

    X = da.random.default_rng(0).random((6000, 784), chunks=(2000, 784))
    params = dict(n_components=4, n_landmarks=2000, landmarks="uniform", random_state=0)
    with Client(process_cluster), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on_cluster = KernelPCA(**params).fit(X)
        Y = on_cluster.transform(X[:100]).compute()
    assert not [w for w in caught if "large graph" in str(w.message)]
    threaded = KernelPCA(**params).fit(X)
    np.testing.assert_allclose(on_cluster.eigenvalues_, threaded.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(Y, threaded.transform(X[:100]).compute(), rtol=1e-8, atol=1e-10)
