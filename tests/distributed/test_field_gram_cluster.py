"""The Gram way of a field on a LocalCluster of worker processes (docs/design.md §19): the
workers read and check the store's time chunks, the client sums the Gram matrix; the
models equal the threaded scheduler's, and each worker stays within its memory model."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import xarray as xr
from _clusters import assert_within_model, process_client, resident_bytes

from kpca_dask import ExactKernelPCA, HilbertKernelEOF
from kpca_dask.diagnostics import watch_workers

pytestmark = pytest.mark.slow

SHAPE, CHUNK = (600, 90, 180), 50  # 39 MB of float32, chunks of 50 time steps


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    nt, nlat, nlon = SHAPE
    rng = np.random.default_rng(0)
    t = np.arange(nt)[:, None, None]
    lat = np.linspace(-89, 89, nlat)[None, :, None]
    lon = np.linspace(0, 358, nlon)[None, None, :]
    values = (np.exp(-(lat / 15) ** 2) * np.cos(np.deg2rad(3 * lon) - 2 * np.pi * t / 60)
              + 0.5 * rng.standard_normal(SHAPE)).astype(np.float32)
    values[:, 40:50, 100:120] = np.nan  # land
    field = xr.DataArray(values, dims=("time", "lat", "lon"), name="field",
                         coords={"time": np.arange(nt), "lat": lat.ravel(), "lon": lon.ravel()})
    path = str(tmp_path_factory.mktemp("field") / "field.zarr")
    field.chunk({"time": CHUNK}).to_dataset().to_zarr(path, consolidated=False)
    return path


def _fits(path: str) -> dict:
    X = xr.open_dataarray(path, engine="zarr", chunks={}, consolidated=False)
    weights = np.sqrt(np.cos(np.deg2rad(X.lat)))
    common = dict(weights=weights, sample_dim="time")
    return {
        "linear": ExactKernelPCA(n_components=4, kernel="linear", **common).fit(X),
        "rbf": ExactKernelPCA(n_components=4, kernel="rbf", gamma=1e-4, **common).fit(X),
        "hilbert": HilbertKernelEOF(3, padding="none", solver="gram", **common).fit(X),
    }


def test_gram_way_on_worker_processes_equals_threads(store, tmp_path):
    """Exact linear and rbf kernel EOF and the Hilbert Gram way on two worker processes of
    1.25 GiB: the threaded scheduler's variances and maps, each worker within 60 % of its
    limit over its own baseline."""
    with dask.config.set(scheduler="threads"):
        expected = _fits(store)
    with process_client(memory_limit="1.25 GiB", local_directory=str(tmp_path)) as client:
        baselines = client.run(resident_bytes)
        with watch_workers(client) as workers:
            models = _fits(store)
        assert_within_model("the Gram way of a field", workers, baselines)
    for name, model in models.items():
        np.testing.assert_allclose(model.explained_variance_ratio_,
                                   expected[name].explained_variance_ratio_, rtol=1e-10)
    np.testing.assert_allclose(models["hilbert"].components_, expected["hilbert"].components_,
                               atol=1e-10)
