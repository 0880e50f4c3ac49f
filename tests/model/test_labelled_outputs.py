"""Labelled outputs in xarray's conventions, on eofs' SST example: a ``mode`` dimension
numbered from 1, named arrays with the input's units where they hold, the spectrum as one
Dataset, short reprs, one meaning per variance, and no silent choice of the sample axis."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import kpca_dask
from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import InvalidInputError, InvalidParameterError, NonFiniteInputError
from kpca_dask.io.preprocessing.fields import coslat_weights

pytest.importorskip("eofs")
from _eof_data import sqrt_coslat, sst  # noqa: E402
from eofs.xarray import Eof  # noqa: E402

Q = 4


@pytest.fixture(scope="module")
def field():
    """The SST anomalies with units, as a CF file would give them."""
    return sst().assign_attrs(units="K")


@pytest.fixture(scope="module")
def linear(field):
    """A linear fit weighted by sqrt(cos(lat)), every winter a landmark (exact)."""
    return KernelPCA(Q, kernel="linear", n_landmarks=50, landmarks="uniform",
                     fit_inverse_transform=True, alpha=1e-10,
                     weights=sqrt_coslat(field)).fit(field)


def test_scores_and_maps_carry_mode_from_one_and_their_names(linear, field):
    """Scores (time, mode) named scores; maps (mode, lat, lon) named by what they are;
    ``.sel(mode=1)`` works as with xeofs."""
    Y = linear.transform(field)
    assert Y.name == "scores" and Y.dims == ("time", "mode")
    assert Y["mode"].values.tolist() == [1, 2, 3, 4]
    assert Y.sel(mode=1).dims == ("time",)
    names = {kind: linear.patterns(field, kind=kind) for kind in ("covariance", "correlation",
                                                                   "eof")}
    assert {kind: maps.name for kind, maps in names.items()} == {
        "covariance": "covariance_maps", "correlation": "correlation_maps",
        "eof": "components"}
    for maps in names.values():
        assert maps.dims == ("mode", "latitude", "longitude")
        assert maps["mode"].values.tolist() == [1, 2, 3, 4]
    assert names["covariance"].attrs["units"] == "K"  # unit-variance scores: the field's units
    assert "units" not in names["correlation"].attrs and "units" not in names["eof"].attrs
    assert "units" not in linear.patterns(field, kind="covariance", pcscaling=0).attrs


def test_reconstruction_is_named_as_the_input_with_its_units(linear, field):
    """inverse_transform of labelled scores (a ``mode`` dimension) gives the variable back:
    its name, its units and long_name."""
    back = linear.inverse_transform(linear.transform(field))
    assert back.name == "sst" and back.dims == field.dims
    assert back.attrs["units"] == "K" and back.attrs["long_name"] == field.attrs["long_name"]
    renamed = linear.transform(field).rename(mode="component")  # the name before still taken
    assert linear.inverse_transform(renamed).name == "sst"


def test_rotated_outputs_carry_mode(linear, field):
    """The rotated scores and maps are over ``mode`` 1..r, named as xeofs names them."""
    rotated = kpca_dask.rotate(linear, field, n_components=3)
    scores, maps = rotated.transform(field), rotated.components()
    assert scores.name == "scores" and scores.dims == ("time", "mode")
    assert maps.name == "components" and maps["mode"].values.tolist() == [1, 2, 3]
    assert rotated.patterns(field)["mode"].values.tolist() == [1, 2, 3]


def test_spectrum_is_one_dataset_over_mode_equal_to_eofs(linear, field):
    """The spectrum Dataset holds eofs' eigenvalues, fractions and North's errors; the
    scikit-learn attributes stay numpy."""
    solver = Eof(field, weights=sqrt_coslat(field).values[:, None])
    ds = linear.spectrum()
    assert isinstance(ds, xr.Dataset) and ds["mode"].values.tolist() == [1, 2, 3, 4]
    atol = 1e-8 * float(solver.eigenvalues(neigs=1)[0])
    np.testing.assert_allclose(ds["explained_variance"], solver.eigenvalues(neigs=Q), atol=atol)
    np.testing.assert_allclose(ds["explained_variance_ratio"], solver.varianceFraction(neigs=Q),
                               atol=1e-8)
    np.testing.assert_allclose(ds["north_error"], solver.northTest(neigs=Q), atol=atol)
    np.testing.assert_allclose(ds["north_error_ratio"],
                               solver.northTest(neigs=Q, vfscaled=True), atol=1e-8)
    np.testing.assert_array_equal(ds["eigenvalues"], linear.eigenvalues_)
    assert ds.attrs["total_variance"] == pytest.approx(float(solver.totalAnomalyVariance()))
    assert ds.attrs["total_variance_kind"] == "exact" == linear.total_variance_kind_
    assert isinstance(linear.explained_variance_ratio_, np.ndarray)
    assert ExactKernelPCA(2, kernel="linear").fit(field).spectrum().attrs[
        "total_variance_kind"] == "exact"


def test_fewer_landmarks_than_samples_flag_the_total_as_an_estimate(field):
    """With fewer landmarks than winters an rbf kernel's total variance is the Nystrom
    estimate, and the attribute and the Dataset say so; the linear kernel's pass adds up
    the rows, so its total is exact with any landmarks: the field's own variance."""
    kpca = KernelPCA(Q, kernel="rbf", n_landmarks=20, random_state=0).fit(field)
    assert kpca.total_variance_kind_ == "nystrom-estimate"
    assert kpca.spectrum().attrs["total_variance_kind"] == "nystrom-estimate"
    assert not hasattr(kpca, "centred_trace_")
    linear = KernelPCA(Q, kernel="linear", n_landmarks=20, random_state=0).fit(field)
    assert linear.total_variance_kind_ == "exact"
    assert linear.spectrum().attrs["total_variance_kind"] == "exact"
    rows = field.values.reshape(field.shape[0], -1)
    rows = rows[:, ~np.isnan(rows).any(axis=0)]
    np.testing.assert_allclose(linear.total_variance_, rows.var(axis=0, ddof=1).sum(),
                               rtol=1e-10)


def test_outputs_follow_the_input_kind(linear, field):
    """patterns of numpy rows (or a field in memory) is in memory; of dask rows (or a
    dask-backed field) lazy, as transform is."""
    rows = field.values.reshape(50, -1)
    assert isinstance(linear.patterns(rows), np.ndarray)
    assert isinstance(linear.patterns(da.from_array(rows, chunks=(25, -1))), da.Array)
    chunked = field.chunk({"time": 25})
    assert isinstance(linear.patterns(chunked).data, da.Array)
    assert isinstance(linear.transform(chunked).data, da.Array)
    assert isinstance(linear.patterns(field).data, np.ndarray)
    assert isinstance(linear.transform(field).data, np.ndarray)
    X = np.random.default_rng(0).normal(size=(40, 3))
    assert isinstance(ExactKernelPCA(2, kernel="linear").fit(X).patterns(X), np.ndarray)


def test_reprs_are_short(linear, field):
    """The layout prints in one line (dims, sizes, mask, sample dim); so does a rotation."""
    text = repr(linear.feature_layout_)
    assert len(text) < 200 and "\n" not in text
    for part in ("latitude=18", "longitude=30", "90 masked", "sample_dim='time'"):
        assert part in text
    rotated = kpca_dask.rotate(linear, field, n_components=2)
    assert len(repr(rotated.estimator.rotation_)) < 200


def test_rotated_and_unrotated_ratios_are_in_one_space(field):
    """For rbf, the rotated modes' explained_variance_ratio_ is kernel-space, summing to the
    unrotated modes' (varimax is orthogonal); the field-space shares have their own name."""
    kpca = KernelPCA(Q, kernel="rbf", n_landmarks=50, landmarks="uniform").fit(field)
    rotated = kpca_dask.rotate(kpca, field)
    assert rotated.explained_variance_ratio_.sum() == pytest.approx(
        kpca.explained_variance_ratio_.sum(), rel=1e-10)
    assert not np.allclose(rotated.field_variance_ratio_.sum(),
                           kpca.explained_variance_ratio_.sum(), rtol=1e-2)
    scores = np.asarray(rotated.transform(field))  # the scores' variances: field space
    np.testing.assert_allclose(scores.var(axis=0, ddof=1), rotated.field_variance_, rtol=1e-8)


def test_rotated_linear_variances_agree_in_both_spaces(linear, field):
    """For a linear kernel fitted exactly the kernel and field spaces are one."""
    rotated = kpca_dask.rotate(linear, field, method="promax")
    np.testing.assert_allclose(rotated.explained_variance_, rotated.field_variance_,
                               rtol=1e-8)
    np.testing.assert_allclose(rotated.explained_variance_ratio_,
                               rotated.field_variance_ratio_, rtol=1e-8)


def test_more_than_two_dims_take_time_or_need_sample_dim(field):
    """(lat, lon, time) is fitted along time and says so; without a time dimension the fit
    lists the dimensions and asks for sample_dim."""
    reordered = field.transpose("latitude", "longitude", "time")
    kpca = KernelPCA(2, kernel="linear", n_landmarks=50).fit(reordered)
    assert kpca.sample_dim_ == "time" and kpca.n_samples_fit_ == 50
    assert "sample_dim='time'" in repr(kpca.feature_layout_)
    exact = ExactKernelPCA(2, kernel="linear").fit(reordered)
    assert exact.sample_dim_ == "time"
    winters = reordered.rename(time="winter")
    for estimator in (KernelPCA(2, n_landmarks=20), ExactKernelPCA(2)):
        with pytest.raises(InvalidParameterError, match="sample_dim=") as caught:
            estimator.fit(winters)
        assert "('latitude', 'longitude', 'winter')" in str(caught.value)
    with pytest.raises(InvalidParameterError, match="sample_dim="):
        KernelPCA(2, n_landmarks=20).fit([winters, winters.rename("other")])
    assert KernelPCA(2, n_landmarks=20, sample_dim="winter").fit(winters).sample_dim_ == "winter"


def test_arrays_against_a_field_model_are_refused_as_a_field(linear, field):
    """An array whose NaN are not the fit's mask is refused naming the place; a 3-d array
    of the field's shape is the field; another shape gets the field's message, not the
    hint for one feature."""
    rows = field.values.reshape(50, -1)
    np.testing.assert_allclose(linear.transform(field.values), linear.transform(rows))
    with pytest.raises(NonFiniteInputError, match="model masks"):
        linear.transform(np.nan_to_num(rows))
    holed = rows.copy()
    holed[3, np.flatnonzero(~np.isnan(rows[0]))[0]] = np.nan
    with pytest.raises(NonFiniteInputError, match="latitude="):
        linear.transform(holed)
    with pytest.raises(InvalidInputError, match="field") as caught:
        linear.transform(field.values[:, :5])
    assert "reshape(-1, 1)" not in str(caught.value)
    X = np.random.default_rng(0).normal(size=(20, 2, 3))
    for call in (lambda: KernelPCA(2, n_landmarks=10).fit(X),
                 lambda: ExactKernelPCA(2).fit(X)):
        with pytest.raises(InvalidInputError, match="DataArray") as caught:
            call()
        assert "reshape(-1, 1)" not in str(caught.value)


def test_nan_weights_are_named_by_their_coordinate():
    """sqrt(cos(lat)) on float32 latitudes is NaN at 90 degrees: refused naming lat=90.0;
    the library's recipe gives 0 there."""
    lat = np.array([-90.0, -45.0, 0.0, 45.0, 90.0], dtype=np.float32)
    X = xr.DataArray(np.random.default_rng(0).normal(size=(30, 5, 4)),
                     dims=("time", "lat", "lon"), coords={"lat": lat})
    naive = np.sqrt(np.cos(np.deg2rad(X.lat)))
    assert np.isnan(naive.values).any()
    with pytest.raises(InvalidParameterError, match=r"lat=-?90\.0"):
        KernelPCA(2, n_landmarks=10, weights=naive).fit(X)
    weights = coslat_weights(X.lat)
    assert weights.values[[0, -1]].tolist() == [0.0, 0.0]
    assert KernelPCA(2, n_landmarks=10, weights=weights).fit(X).n_features_in_ == 20


def test_rotated_spectrum_holds_both_spaces(linear, field):
    """The rotated modes' Dataset over mode holds the kernel- and field-space variances."""
    rotated = kpca_dask.rotate(linear, field, n_components=3)
    ds = rotated.spectrum()
    assert ds["mode"].values.tolist() == [1, 2, 3]
    np.testing.assert_array_equal(ds["field_variance_ratio"], rotated.field_variance_ratio_)
    np.testing.assert_array_equal(ds["explained_variance"], rotated.explained_variance_)
    assert ds.attrs["total_variance_kind"] == "exact"


def test_a_saved_model_keeps_the_names_and_units(linear, field, tmp_path):
    """A model file keeps what outputs are named and described by, and the sample choice."""
    loaded = kpca_dask.load(linear.save(tmp_path / "model.zarr"))
    back = loaded.inverse_transform(loaded.transform(field))
    assert back.name == "sst" and back.attrs["units"] == "K"
    assert repr(loaded.feature_layout_) == repr(linear.feature_layout_)


def test_scaled_scores_keep_their_labels(linear, field):
    """transform(pcscaling=1) keeps the name, the modes and the attributes."""
    Y, scaled = linear.transform(field), linear.transform(field, pcscaling=1)
    assert scaled.name == "scores" and scaled.attrs == Y.attrs
    np.testing.assert_allclose(scaled.std("time", ddof=1), 1.0, rtol=1e-8)
