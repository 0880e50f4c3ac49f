"""ExactKernelPCA given its lazy training field again: the maps, the scores and a rotation take
the fit's known embedding A_q Lambda_q^(1/2) instead of a second n x n product.

Each result equals the one of the general path (the training rows projected by panels, the
model without its ``training_key``) to 1e-10; the maps of the training field read each of
its chunks once; other data, a part of the training field included, take the general path,
lazy new rows by panels of the training rows, each read once.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from _counting import CountingRows

import kpca_dask
from kpca_dask import ExactKernelPCA

N, NLAT, NLON, CHUNK = 90, 6, 10, 20


def _field(values, name="sst") -> xr.DataArray:
    """A lazy (time, lat, lon) field chunked along time, NaN over a land box."""
    return xr.DataArray(da.from_array(values, chunks=(CHUNK, NLAT, NLON)),
                        dims=("time", "lat", "lon"), name=name,
                        coords={"time": np.arange(values.shape[0]),
                                "lat": np.linspace(-60, 60, NLAT),
                                "lon": np.linspace(0, 324, NLON)})


@pytest.fixture(scope="module")
def values() -> np.ndarray:
    t = np.arange(N)[:, None, None]
    lon = np.linspace(0, 324, NLON)[None, None, :]
    rng = np.random.default_rng(7)
    values = (np.cos(np.deg2rad(2 * lon) - 2 * np.pi * t / 30)
              + 0.4 * rng.normal(size=(N, NLAT, NLON)))
    values[:, 2:4, 3:5] = np.nan
    return values


def _general(model: ExactKernelPCA) -> ExactKernelPCA:
    """The same model without its training key: every method projects by panels."""
    general = ExactKernelPCA(**model.get_params())
    general.model_ = model.model_.replace(training_key=None)
    return general


def _close(got, expected, rtol=1e-10):
    got, expected = np.asarray(got), np.asarray(expected)
    scale = np.nanmax(np.abs(expected))
    np.testing.assert_allclose(got, expected, rtol=0, atol=rtol * scale)


@pytest.mark.parametrize(("kernel", "params"), [("linear", {}), ("rbf", {"gamma": "median"})])
def test_training_field_takes_the_known_embedding(values, kernel, params):
    X = _field(values)
    weights = np.sqrt(np.cos(np.deg2rad(X.lat)))
    model = ExactKernelPCA(n_components=3, kernel=kernel, weights=weights, sample_dim="time",
                           **params).fit(X)
    assert model.model_.training_key is not None
    general = _general(model)
    for kind in ("eof", "covariance", "correlation"):
        _close(model.patterns(X, kind=kind).compute(), general.patterns(X, kind=kind).compute())
    _close(model.transform(X), general.transform(X))
    _close(model.transform(X, pcscaling=1), general.transform(X, pcscaling=1))
    # The same store opened again is the same data: the same dask names.
    _close(model.transform(_field(values)), general.transform(X))


def test_rotation_of_the_training_field(values):
    X = _field(values)
    model = ExactKernelPCA(n_components=3, kernel="linear", sample_dim="time").fit(X)
    general = _general(model)
    rotated, expected = kpca_dask.rotate(model, X), kpca_dask.rotate(general, X)
    _close(rotated.transform(X), expected.transform(X))


def test_maps_of_the_training_field_read_each_chunk_once(values):
    """The maps' pass reads the field once."""
    stored = CountingRows(values)
    X = xr.DataArray(da.from_array(stored, chunks=(CHUNK, NLAT, NLON)),
                     dims=("time", "lat", "lon"))
    model = ExactKernelPCA(n_components=2, kernel="linear", sample_dim="time").fit(X)
    stored.clear()
    with dask.config.set(scheduler="threads"):
        model.patterns(X, kind="eof").compute()
    assert stored.total() == len(X.chunks[0])


def test_new_lazy_rows_read_the_training_field_once(values):
    """Lazy new rows give lazy scores; computing them reads each training chunk once however
    many blocks the new rows have (one task per block and training panel), and they equal
    the scores of the same rows in memory; so do the maps and the reconstruction errors."""
    stored = CountingRows(values)
    dims = ("time", "lat", "lon")
    X = xr.DataArray(da.from_array(stored, chunks=(CHUNK, NLAT, NLON)), dims=dims)
    model = ExactKernelPCA(n_components=2, kernel="rbf", gamma=0.05, sample_dim="time").fit(X)
    new = xr.DataArray(da.from_array(values[::-1].copy(), chunks=(10, NLAT, NLON)), dims=dims)
    stored.clear()
    scores = model.transform(new)
    assert dask.is_dask_collection(scores) and stored.total() == 0
    with dask.config.set(scheduler="threads"):
        computed = scores.compute()
    assert new.data.numblocks[0] == 9 and stored.total() == len(X.chunks[0])
    _close(computed, model.transform(new.compute()))
    _close(model.patterns(new).compute(), _general(model).patterns(new.compute()).compute())
    errors = model.reconstruction_error(new)
    assert dask.is_dask_collection(errors)
    # Two chains of runs at once, on two threads: each names its reads' scheduler for its
    # own thread, and dask's configuration is left as it was.
    with dask.config.set(scheduler="threads"):
        together = dask.compute(scores, errors)
    assert dask.config.get("scheduler", None) is None
    _close(together[0], computed)
    _close(together[1], model.reconstruction_error(new.compute()))


def test_other_data_take_the_general_path(values):
    """Another field, or a part of the training one, is projected against the training rows."""
    X = _field(values)
    model = ExactKernelPCA(n_components=2, kernel="rbf", gamma=0.05, sample_dim="time").fit(X)
    other = _field(values[::-1].copy())
    _close(model.transform(other), _general(model).transform(other))
    part = X.isel(time=slice(0, 40))
    _close(model.patterns(part).compute(), _general(model).patterns(part).compute())
    assert model.transform(part).shape == (40, 2)


def test_matrix_free_maps_of_the_training_field(values):
    """The matrix-free solver's model takes the known embedding for its maps too."""
    X = _field(values)
    model = ExactKernelPCA(n_components=2, kernel="rbf", gamma=0.05, sample_dim="time",
                           eigen_solver="matrix-free").fit(X)
    assert model.eigen_solver_ == "matrix-free" and model.model_.training_key is not None
    general = ExactKernelPCA(**model.get_params())
    general.model_ = model.model_.replace(training_key=None)
    for kind in ("eof", "correlation"):
        _close(model.patterns(X, kind=kind).compute(), general.patterns(X, kind=kind).compute(),
               rtol=1e-8)
