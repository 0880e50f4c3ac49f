"""The Gram way of a field on a LocalCluster of worker processes (docs/design.md §19): the
workers read and check the store's time chunks, the client sums the Gram matrix; the
models equal the threaded scheduler's, and each worker stays within its memory model.

The default field is small (39 MB). ``KPCA_DASK_FIELD_SHAPE`` (time x lat x lon) sets
another, e.g. ``2000x250x1250`` for a 2.5 GB field, twice a worker's 1.25 GiB. The store is
written one time chunk at a time, so the test process never holds the field.
"""

from __future__ import annotations

import os

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from _clusters import assert_within_model, load_library, process_client, resident_bytes

from kpca_dask import ExactKernelPCA, ExtendedKernelEOF, HilbertKernelEOF
from kpca_dask.diagnostics import watch_workers

pytestmark = pytest.mark.slow

SHAPE = tuple(int(size) for size in os.environ.get("KPCA_DASK_FIELD_SHAPE",
                                                   "600x90x180").split("x"))
CHUNK = 50  # time steps a chunk


def _chunk(block_info=None) -> np.ndarray:
    """One time chunk of the field: an eastward wave in the tropics, noise and a land box,
    the same whatever the chunking (each step's noise is seeded by its index)."""
    (start, stop), (_, nlat), (_, nlon) = block_info[None]["array-location"]
    t = np.arange(start, stop)[:, None, None]
    lat = np.linspace(-89, 89, nlat)[None, :, None]
    lon = np.linspace(0, 358, nlon)[None, None, :]
    noise = np.stack([np.random.default_rng(step).standard_normal((nlat, nlon),
                                                                  dtype=np.float32)
                      for step in range(start, stop)])
    values = (np.exp(-(lat / 15) ** 2) * np.cos(np.deg2rad(3 * lon) - 2 * np.pi * t / 60)
              + 0.5 * noise).astype(np.float32)
    values[:, (4 * nlat) // 9:(5 * nlat) // 9, (5 * nlon) // 9:(6 * nlon) // 9] = np.nan
    return values


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    nt, nlat, nlon = SHAPE
    steps = tuple(min(CHUNK, nt - start) for start in range(0, nt, CHUNK))
    values = da.map_blocks(_chunk, chunks=(steps, (nlat,), (nlon,)), dtype=np.float32)
    field = xr.DataArray(values, dims=("time", "lat", "lon"), name="field",
                         coords={"time": np.arange(nt), "lat": np.linspace(-89, 89, nlat),
                                 "lon": np.linspace(0, 358, nlon)})
    path = str(tmp_path_factory.mktemp("field") / "field.zarr")
    with dask.config.set(scheduler="threads"):
        field.to_dataset().to_zarr(path, consolidated=False)
    return path


def _fits(path: str) -> dict:
    """Each way's variance ratios and maps: the exact EOF's and kernel EOF's EOFs (one more
    read, the training scores known) and the kernel EOF's scores of other rows, the Hilbert
    EOF's and the extended EOF's components."""
    X = xr.open_dataarray(path, engine="zarr", chunks={}, consolidated=False)
    weights = np.sqrt(np.cos(np.deg2rad(X.lat)))
    common = dict(weights=weights, sample_dim="time")
    linear = ExactKernelPCA(n_components=4, kernel="linear", **common).fit(X)
    rbf = ExactKernelPCA(n_components=4, kernel="rbf", gamma=1.6 / X[0].size, **common).fit(X)
    hilbert = HilbertKernelEOF(3, padding="none", solver="gram", **common).fit(X)
    # seeded: its kernel stage takes k-means landmarks once the lagged rows pass 1000, and
    # their signs follow the landmarks (the linear maps themselves do not)
    extended = ExtendedKernelEOF(3, tau=3, embedding=3, n_pca_modes=10, random_state=0,
                                 **common).fit(X)
    assert extended.solver_ == "gram"
    return {
        "linear": (linear.explained_variance_ratio_, np.asarray(linear.patterns(X, kind="eof"))),
        "rbf": (rbf.explained_variance_ratio_, np.asarray(rbf.patterns(X, kind="eof"))),
        # rows that are not the training field's: a lazy transform, whose task reads its
        # rows and the training field inside the worker that runs it
        "rbf scores": (rbf.explained_variance_ratio_,
                       np.asarray(rbf.transform(X.isel(time=slice(120, 330))))),
        "hilbert": (hilbert.explained_variance_ratio_, np.asarray(hilbert.components_)),
        "extended": (extended.explained_variance_ratio_, np.asarray(extended.components_)),
    }


def _warm_up(path: str) -> None:
    """A first small fit on the cluster, as a user's first fit would be: the code it runs
    (BLAS kernels, Zarr's codecs) is then resident in each worker, not counted as growth."""
    X = xr.open_dataarray(path, engine="zarr", chunks={}, consolidated=False)
    ExactKernelPCA(n_components=2, kernel="linear", sample_dim="time").fit(
        X.isel(time=slice(0, 2 * CHUNK), lat=slice(0, 8)))


def test_gram_way_on_worker_processes_equals_threads(store, tmp_path):
    """Exact linear and rbf kernel EOF with their maps, the Hilbert Gram way and the extended
    EOF's Gram way on two worker processes of 1.25 GiB: the threaded scheduler's variances
    and maps, each worker within 60 % of its limit over its own baseline."""
    with dask.config.set(scheduler="threads"):
        expected = _fits(store)
    with process_client(memory_limit="1.25 GiB", local_directory=str(tmp_path)) as client:
        client.run(load_library)  # a worker's code is modelled apart from its growth
        _warm_up(store)  # and the pages of what a fit runs (BLAS, codecs) with it
        baselines = client.run(resident_bytes)
        with watch_workers(client) as workers:
            models = _fits(store)
        assert_within_model("the Gram way of a field", workers, baselines)
    for name, (ratios, maps) in models.items():
        np.testing.assert_allclose(ratios, expected[name][0], rtol=1e-10)
        np.testing.assert_allclose(maps, expected[name][1], atol=1e-10)
