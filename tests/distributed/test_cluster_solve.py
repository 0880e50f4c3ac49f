"""The m x m work on a cluster's workers: G stays there, the solve runs there.

On a LocalCluster of worker processes a fit leaves the pass's m x m sums on
the cluster (a persisted dask array) and solves the small problem in a task on
the worker that holds them; the client gets the O(m q) solution. Re-solves,
more rows and merges stay on the cluster, saving has the workers write G, and
a model whose cluster is gone reads G back from its file or says what is
missing. Every result equals the fit on the threaded scheduler.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from _clusters import process_client
from distributed import Client, futures_of

from kpca_dask import KernelPCA, load, merge
from kpca_dask.errors import InvalidParameterError, ModelFormatError, NoStatisticsError

pytestmark = pytest.mark.slow

PARAMS = dict(n_components=4, gamma=0.2, n_landmarks=300, random_state=0)


def _data() -> da.Array:
    X = np.random.default_rng(0).normal(size=(4000, 5))
    return da.from_array(X, chunks=(500, 5))


def _threaded(**params) -> KernelPCA:
    with dask.config.set(scheduler="threads"):
        return KernelPCA(**{**PARAMS, **params}).fit(_data())


def _assert_same(model: KernelPCA, reference: KernelPCA, rtol: float = 1e-10) -> None:
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=rtol, atol=0)
    scale = np.abs(reference.projection_).max()
    np.testing.assert_allclose(model.projection_, reference.projection_, rtol=0,
                               atol=rtol * scale)
    np.testing.assert_allclose(model.offset_, reference.offset_, rtol=0,
                               atol=rtol * max(1.0, np.abs(reference.offset_).max()))


def _names_run(dask_scheduler) -> set[str]:
    return {str(entry[0]).strip("('").split("-")[0] for entry in dask_scheduler.transition_log
            if entry[2] == "memory"}


@pytest.fixture(scope="module")
def client(process_cluster):
    with Client(process_cluster) as client:
        yield client


@pytest.fixture(scope="module")
def fitted(client):
    return KernelPCA(**PARAMS).fit(_data())


def test_a_cluster_fit_equals_the_threaded_fit(fitted):
    """Pass reduced and solved on the workers: the threaded fit's model, to 1e-10."""
    _assert_same(fitted, _threaded())


def test_the_statistics_stay_on_the_cluster_and_the_solve_runs_there(client, fitted):
    """G is a dask array of futures (nothing m x m in the client); the solve was a task."""
    gram = fitted.statistics_.gram
    assert isinstance(gram, da.Array) and gram.shape == (300, 300)
    assert futures_of(gram) and all(f.status == "finished" for f in futures_of(gram))
    assert "solve_on_worker" in client.run_on_scheduler(_names_run)


def test_set_n_components_partial_fit_and_merge_stay_on_the_cluster(client, fitted):
    """Re-solve, more rows and a merge, each held on the cluster and equal to the threaded."""
    X = _data()
    params = {**PARAMS, "landmarks": fitted.landmarks_, "gamma": fitted.gamma_}
    first = KernelPCA(**params).fit(X[:2000])
    second = KernelPCA(**params).fit(X[2000:])
    merged = merge([first, second])
    grown = KernelPCA(**params).fit(X[:2000]).partial_fit(X[2000:])
    for model in (merged, grown):
        assert isinstance(model.statistics_.gram, da.Array)
        _assert_same(model, fitted, rtol=1e-9)
    resolved = KernelPCA(**PARAMS).fit(X).set_n_components(7)
    _assert_same(resolved, _threaded(n_components=7))
    assert isinstance(first.statistics_.gram, da.Array)  # the inputs keep their own G
    assert first.n_samples_fit_ == 2000


def test_the_workers_write_the_statistics_into_the_model_file(client, fitted, tmp_path):
    """Saved and loaded on the cluster, G stays in the file until a worker reads it; its
    digest is checked on a worker; the model solves the same."""
    path = fitted.save(str(tmp_path / "model.zarr"))
    back = load(path)
    assert isinstance(back.statistics_.gram, da.Array)
    np.testing.assert_array_equal(back.statistics_.gram, fitted.statistics_.gram.compute())
    back.set_n_components(4)
    _assert_same(back, fitted)
    with dask.config.set(scheduler="threads"):  # and read into this process without one
        assert isinstance(load(path).statistics_.gram, np.ndarray)


def test_a_changed_gram_is_found_when_loaded_on_the_cluster(client, fitted, tmp_path):
    """G rewritten through Zarr (fresh chunk checksums): its digest, taken by a worker,
    differs from the recorded one."""
    path = fitted.save(str(tmp_path / "model.zarr"))
    gram = zarr.open_group(path, mode="r+")["statistics_gram"]
    gram[0, 0] = gram[0, 0] * 2
    with pytest.raises(ModelFormatError, match="'statistics_gram' differs from the array"):
        load(path)


def test_an_unknown_solve_mode_is_refused(client):
    """kpca-dask.landmark-solve takes 'auto', 'worker' or 'tiles' only."""
    with dask.config.set({"kpca-dask.landmark-solve": "client"}), \
            pytest.raises(InvalidParameterError, match="landmark-solve' must be one of"):
        KernelPCA(**PARAMS).fit(_data())


def test_a_model_whose_cluster_is_gone_reads_its_file_or_says_what_is_missing(tmp_path):
    """Client closed: a saved model re-solves from its file; an unsaved one says why not."""
    with process_client(n_workers=1):
        saved = KernelPCA(**PARAMS).fit(_data())
        saved.save(str(tmp_path / "model.zarr"))
        unsaved = KernelPCA(**PARAMS).fit(_data())
    with dask.config.set(scheduler="threads"):
        saved.set_n_components(7)
        _assert_same(saved, _threaded(n_components=7))
        with pytest.raises(NoStatisticsError, match="cluster that fitted it, and that cluster "
                                                    "is gone"):
            unsaved.set_n_components(7)
