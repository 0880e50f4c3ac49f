"""Several fields fitted together (a list of DataArrays or a Dataset): eofs' MultivariateEof
and xeofs' list input with a linear kernel, outputs as the fields came, saved with the model."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import xarray as xr
from _counting import CountComputes

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.errors import InvalidInputError, InvalidParameterError, NonFiniteInputError

pytest.importorskip("eofs")
from _eof_data import linear_estimators, sqrt_coslat, sst, z500  # noqa: E402
from eofs.multivariate.standard import MultivariateEof  # noqa: E402

Q = 4
ESTIMATORS = linear_estimators(Q)


@pytest.fixture(scope="module")
def fields():
    """SST anomalies and 500 hPa height anomalies over the same 50 winters, dask-backed."""
    return sst().chunk({"time": 20}), z500().chunk({"time": 20, "latitude": 10})


@pytest.fixture(scope="module")
def solver(fields):
    """eofs' MultivariateEof of the two fields, weighted by sqrt(cos(lat))."""
    values = [np.asarray(field.values) for field in fields]
    weights = [sqrt_coslat(field).values[:, None] for field in fields]
    return MultivariateEof(values, weights=weights)


@pytest.fixture(scope="module", params=list(ESTIMATORS))
def fitted(request, fields):
    """A linear fit of the two fields as a list, and its embedding."""
    model = ESTIMATORS[request.param](weights=[sqrt_coslat(f) for f in fields])
    Y = model.fit_transform(list(fields))
    return model, Y


def _signs(Y, pcs):
    return np.sign(np.sum(np.asarray(Y) * pcs, axis=0))


def test_two_fields_equal_eofs_multivariate_pcs(fitted, solver):
    """The joint embedding is MultivariateEof's pcs(pcscaling=0); eigenvalues / (n - 1) its
    eigenvalues."""
    model, Y = fitted
    pcs = solver.pcs(npcs=Q)
    assert Y.dims == ("time", "mode")
    np.testing.assert_allclose(np.asarray(Y) * _signs(Y, pcs), pcs,
                               rtol=0, atol=1e-10 * np.abs(pcs).max())
    np.testing.assert_allclose(model.eigenvalues_ / 49, solver.eigenvalues(neigs=Q), rtol=1e-10)


def test_patterns_come_back_as_a_list_of_fields(fitted, fields, solver):
    """patterns of a list fit is a list of maps, one per field, each on its grid and equal to
    MultivariateEof's eofsAsCorrelation."""
    model, Y = fitted
    maps = model.patterns(list(fields), kind="correlation")
    expected = solver.eofsAsCorrelation(neofs=Q)
    signs = _signs(Y, solver.pcs(npcs=Q))
    assert isinstance(maps, list) and [m.name for m in maps] == ["sst", "z"]
    for got, want, field in zip(maps, expected, fields):
        assert got.dims == ("mode",) + field.dims[1:]
        np.testing.assert_allclose(got.values * signs[:, None, None], want, atol=1e-10,
                                   equal_nan=True)


def test_a_dataset_gives_a_dataset_and_the_same_numbers(fields, fitted):
    """A Dataset of the same fields (the heights' grid under its own dimension names, as a
    Dataset shares coordinates), weights by name, fits the same and gives Datasets back."""
    model, Y = fitted
    z = fields[1].rename(latitude="zlat", longitude="zlon")
    dataset = xr.Dataset({"sst": fields[0], "z": z})
    other = type(model)(**model.get_params()).set_params(
        weights={"sst": sqrt_coslat(fields[0]), "z": sqrt_coslat(fields[1]).rename(
            latitude="zlat")})
    np.testing.assert_allclose(np.asarray(other.fit_transform(dataset)), np.asarray(Y),
                               atol=1e-9 * np.abs(np.asarray(Y)).max())
    maps = other.patterns(dataset)
    assert isinstance(maps, xr.Dataset) and list(maps.data_vars) == ["sst", "z"]
    assert maps["z"].dims == ("mode", "zlat", "zlon")


def test_fields_stay_lazy_until_computed(fields):
    """transform and patterns of dask-backed fields compute nothing when called."""
    model = ESTIMATORS["KernelPCA"]().fit(list(fields))
    with CountComputes() as counted:
        Y, maps = model.transform(list(fields)), model.patterns(list(fields))
    assert counted.computes == 0 and dask.is_dask_collection(Y) and dask.is_dask_collection(maps[1])


def test_model_file_keeps_the_fields(tmp_path, fields):
    """Names, grids, masks and weights of each field come back from a model file."""
    model = ESTIMATORS["KernelPCA"](weights=[sqrt_coslat(fields[0]), None]).fit(list(fields))
    loaded = kpca_dask.load(model.save(tmp_path / "model.zarr"))
    parts = loaded.feature_layout_.parts
    assert [p.name for p in parts] == ["sst", "z"] and loaded.feature_layout_.container == "list"
    assert parts[0].weights is not None and parts[1].weights is None
    np.testing.assert_array_equal(parts[0].kept, model.feature_layout_.parts[0].kept)
    np.testing.assert_allclose(loaded.transform(list(fields)).values,
                               model.transform(list(fields)).values, rtol=0, atol=1e-12)


def test_fields_with_other_samples_are_refused(fields):
    """Fields fitted together need the same samples."""
    with pytest.raises(InvalidInputError, match="same samples"):
        ESTIMATORS["KernelPCA"]().fit([fields[0], fields[1].isel(time=slice(0, 40))])


def test_one_field_is_refused_by_a_model_of_two(fields):
    """A model of two fields names them when given one field."""
    model = ESTIMATORS["KernelPCA"]().fit(list(fields))
    with pytest.raises(InvalidInputError, match=r"fitted on 2 fields \['sst', 'z'\]"):
        model.transform(fields[0])
    with pytest.raises(InvalidInputError, match=r"no variable \['z'\]"):
        model.transform(xr.Dataset({"sst": fields[0]}))


def test_weights_that_do_not_match_the_fields_are_refused(fields):
    """weights for several fields: a list of as many, or a dict of their names."""
    with pytest.raises(InvalidParameterError, match="a list of 2"):
        ESTIMATORS["KernelPCA"](weights=[sqrt_coslat(fields[0])]).fit(list(fields))
    with pytest.raises(InvalidParameterError, match=r"\['slp'\]"):
        ESTIMATORS["KernelPCA"](weights={"slp": sqrt_coslat(fields[1])}).fit(list(fields))


def test_a_value_on_one_fields_mask_is_named_by_field(fields):
    """At transform, a value where the SST is masked is named by field and coordinates."""
    model = ESTIMATORS["KernelPCA"]().fit(list(fields))
    filled = fields[0].fillna(0.0)
    with pytest.raises(NonFiniteInputError, match="field 'sst', latitude="):
        model.transform([filled, fields[1]]).compute()


def test_two_fields_equal_xeofs_list_input(fields):
    """xeofs' EOF of the list [sst, z] with the same weights: its scores, variances, their
    ratios and per-field unit EOFs (patterns kind="eof"), with a linear kernel."""
    xe = pytest.importorskip("xeofs")
    weights = [sqrt_coslat(f) for f in fields]
    computed = [f.compute() for f in fields]
    expected = xe.single.EOF(n_modes=Q, solver="full").fit(computed, dim="time",
                                                           weights=weights)
    model = ESTIMATORS["KernelPCA"](weights=weights).fit(list(fields))
    scores = expected.scores().transpose("time", "mode").values
    Y = model.transform(list(fields)).values
    signs = _signs(Y, scores)
    np.testing.assert_allclose(Y * signs, scores, rtol=0, atol=1e-8 * np.abs(scores).max())
    np.testing.assert_allclose(model.explained_variance_,
                               expected.explained_variance().values, rtol=1e-8)
    np.testing.assert_allclose(model.explained_variance_ratio_,
                               expected.explained_variance_ratio().values, rtol=1e-8)
    for got, want in zip(model.patterns(list(fields), kind="eof"), expected.components()):
        np.testing.assert_allclose(got.values * signs[:, None, None],
                                   want.transpose("mode", ...).values, rtol=0, atol=1e-8,
                                   equal_nan=True)


def test_a_kernel_fit_of_two_fields_is_that_of_their_joined_rows(fields):
    """An rbf fit of two fields equals the fit of their weighted, unmasked rows side by side."""
    weights = [sqrt_coslat(f) for f in fields]
    joined = []
    for field, w in zip(fields, weights):
        rows = (field * w).transpose("time", ...).values.reshape(50, -1)
        joined.append(rows[:, ~np.isnan(rows).all(axis=0)])
    make = lambda **kw: KernelPCA(n_components=3, kernel="rbf", gamma=1e-6, n_landmarks=50,  # noqa: E731
                                  solver="nystrom", landmarks="uniform", **kw)
    expected = make().fit_transform(np.hstack(joined))
    got = make(weights=weights).fit_transform(list(fields))
    np.testing.assert_allclose(got.values, expected, rtol=0, atol=1e-9 * np.abs(expected).max())


def test_partial_fit_adds_the_winters_of_both_fields(fields):
    """Two batches of both fields make the model of all their winters."""
    weights = [sqrt_coslat(f) for f in fields]
    whole = KernelPCA(3, kernel="linear", n_landmarks=25, solver="nystrom", landmarks="uniform",
                      weights=weights).fit(list(fields))
    grown = KernelPCA(3, kernel="linear", landmarks=whole.landmarks_, n_landmarks=25,
                      solver="nystrom",
                      weights=weights)
    for part in (slice(0, 25), slice(25, 50)):
        grown.partial_fit([f.isel(time=part) for f in fields])
    assert grown.n_samples_fit_ == 50
    np.testing.assert_allclose(grown.eigenvalues_, whole.eigenvalues_, rtol=1e-10)
