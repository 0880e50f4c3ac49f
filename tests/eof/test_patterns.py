"""Patterns: covariance and correlation maps of the components, equal to eofs' for a linear
kernel with every sample a landmark, computed lazily in one pass."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from _counting import CountComputes

from kpca_dask import KernelPCA
from kpca_dask.errors import InvalidParameterError

eofs = pytest.importorskip("eofs")
from _eof_data import linear_estimators  # noqa: E402
from eofs.examples import example_data_path  # noqa: E402
from eofs.xarray import Eof  # noqa: E402

Q = 4
ESTIMATORS = linear_estimators(Q)


@pytest.fixture(scope="module")
def sst():
    """eofs' NDJFM Pacific SST anomalies (50 winters on an 18 x 30 grid, land NaN)."""
    return xr.open_dataset(example_data_path("sst_ndjfm_anom.nc"))["sst"].load()


@pytest.fixture
def solver(sst):
    """A new solver for each test: eofs 2.0.0's eofsAsCovariance divides the solver's own
    data by the weights in place, so a second call on one solver gives other maps."""
    weights = np.sqrt(np.cos(np.deg2rad(sst.latitude.values)))[:, np.newaxis]
    return Eof(sst, weights=weights)


@pytest.fixture(scope="module", params=list(ESTIMATORS))
def fitted(request, sst):
    """A linear fit with weights sqrt(cos(lat)), on dask-backed data, and its embedding."""
    weights = np.sqrt(np.cos(np.deg2rad(sst.latitude)))
    field = sst.chunk({"time": 20})
    model = ESTIMATORS[request.param](weights=weights)
    Y = model.fit_transform(field)
    return field, model, np.asarray(Y)


def _signs(Y, pcs):
    return np.sign(np.sum(Y * pcs, axis=0))


def test_embedding_equals_eofs_unscaled_pcs(fitted, solver):
    """The embedding is eofs' pcs(pcscaling=0), each up to its sign; eigenvalues / (n - 1)
    are eofs' eigenvalues."""
    _, model, Y = fitted
    pcs = solver.pcs(npcs=Q, pcscaling=0).values
    np.testing.assert_allclose(Y * _signs(Y, pcs), pcs, atol=1e-10 * np.abs(pcs).max())
    np.testing.assert_allclose(model.eigenvalues_ / (50 - 1), solver.eigenvalues(neigs=Q).values,
                               rtol=1e-10)


@pytest.mark.parametrize("kind, method", [("covariance", "eofsAsCovariance"),
                                          ("correlation", "eofsAsCorrelation")])
def test_patterns_equal_eofs_maps(fitted, solver, kind, method):
    """covariance = eofsAsCovariance(pcscaling=1), correlation = eofsAsCorrelation, NaN on
    the land mask, on the field's grid."""
    field, model, Y = fitted
    expected = getattr(solver, method)(neofs=Q).values
    maps = model.patterns(field, kind=kind)
    assert maps.dims == ("mode", "latitude", "longitude")
    np.testing.assert_array_equal(maps.longitude.values, field.longitude.values)
    signs = _signs(Y, solver.pcs(npcs=Q, pcscaling=0).values)
    values = maps.values * signs[:, None, None]
    np.testing.assert_array_equal(np.isnan(values), np.isnan(expected))
    np.testing.assert_allclose(values, expected, atol=1e-10, equal_nan=True)


def test_patterns_are_lazy_and_one_pass(fitted):
    """patterns computes nothing when called, and one compute reads each chunk once."""
    field, model, _ = fitted
    with CountComputes() as counted:
        maps = model.patterns(field)
    assert counted.computes == 0 and isinstance(maps.data, da.Array)
    with CountComputes() as counted:
        maps.compute()
    assert counted.computes == 1


def test_patterns_of_arrays_are_a_lazy_q_by_p_array():
    """For array input the maps are a dask array of (components, features)."""
    X = np.random.default_rng(0).normal(size=(100, 5)) * [3.0, 2.0, 1.0, 0.5, 0.1]
    model = KernelPCA(n_components=2, kernel="linear", n_landmarks=100).fit(X)
    maps = model.patterns(da.from_array(X, chunks=(30, 5)), kind="correlation")
    assert isinstance(maps, da.Array) and maps.shape == (2, 5)
    Y = model.transform(X)
    expected = [[np.corrcoef(Y[:, j], X[:, i])[0, 1] for i in range(5)] for j in range(2)]
    np.testing.assert_allclose(maps.compute(), expected, atol=1e-12)


def test_an_unknown_kind_is_refused():
    """kind must be covariance, correlation or eof."""
    model = KernelPCA(n_components=1, n_landmarks=10).fit(np.eye(10))
    with pytest.raises(InvalidParameterError, match="kind must be .covariance., .correlation. or "):
        model.patterns(np.eye(10), kind="regression")
