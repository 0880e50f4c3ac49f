"""xarray fields: feature dimensions stacked lazily, a fixed mask, weights, and their checks."""

from __future__ import annotations

import collections

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from _counting import CountingRows

import kpca_dask
from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import (
    InvalidInputError,
    InvalidParameterError,
    NonFiniteInputError,
    NonNumericInputError,
)

ESTIMATORS = [
    lambda **kw: KernelPCA(n_landmarks=40,
                           solver="nystrom", landmarks="uniform", random_state=0, **kw),
    lambda **kw: ExactKernelPCA(**kw),
]
ESTIMATOR_IDS = ["KernelPCA", "ExactKernelPCA"]


def _field(n=40, chunks=10, seed=0, masked=((0, 0), (5, 7))):
    """A (time, lat, lon) field with NaN at every time at ``masked``, dask-backed."""
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(n, 6, 8))
    for i, j in masked:
        values[:, i, j] = np.nan
    return xr.DataArray(
        da.from_array(values, chunks=(chunks, 6, 8)), dims=("time", "lat", "lon"),
        coords={"time": np.arange(n) + 2000, "lat": np.linspace(-50.0, 50.0, 6),
                "lon": np.arange(8) * 10.0}, name="field")


def _weights(field):
    return np.sqrt(np.cos(np.deg2rad(field.lat)))


@pytest.mark.parametrize("make", ESTIMATORS, ids=ESTIMATOR_IDS)
def test_field_equals_its_stacked_rows(make):
    """A 3-D field fits as the 2-D array of its stacked, unmasked, weighted positions."""
    field = _field()
    w = _weights(field)
    stacked = field.stack(feature=("lat", "lon")).values
    kept = ~np.isnan(stacked).all(axis=0)
    rows = (stacked * np.broadcast_to(w.values[:, None], (6, 8)).ravel())[:, kept]
    from_field = make(n_components=3, kernel="rbf", gamma=0.05, weights=w).fit_transform(field)
    from_rows = make(n_components=3, kernel="rbf", gamma=0.05).fit_transform(rows)
    np.testing.assert_allclose(np.asarray(from_field), np.asarray(from_rows), atol=1e-10)


def test_mask_is_recorded_and_embedding_keeps_the_sample_coordinate():
    """The two all-NaN positions are dropped; the embedding is a lazy DataArray over time."""
    field = _field()
    kpca = KernelPCA(n_components=2, n_landmarks=20, solver="nystrom", random_state=0).fit(field)
    assert kpca.n_features_in_ == 6 * 8 - 2
    assert kpca.feature_layout_.dims == ("lat", "lon")
    assert sorted(kpca.feature_layout_.masked.tolist()) == [0, 47]
    Y = kpca.transform(field)
    assert isinstance(Y.data, da.Array) and Y.dims == ("time", "mode")
    np.testing.assert_array_equal(Y.time.values, field.time.values)


def test_inverse_transform_gives_the_field_back_with_nan_on_the_mask():
    """Pre-images come back over (time, lat, lon) with the fit's coordinates, NaN on the mask."""
    field = _field()
    kpca = KernelPCA(n_components=5, kernel="linear", n_landmarks=40,
                     solver="nystrom", landmarks="uniform",
                     fit_inverse_transform=True, alpha=1e-8, weights=_weights(field))
    X_hat = kpca.fit(field).inverse_transform(kpca.transform(field))
    assert X_hat.dims == ("time", "lat", "lon")
    np.testing.assert_array_equal(X_hat.lon.values, field.lon.values)
    assert np.isnan(X_hat.values[:, 0, 0]).all() and np.isnan(X_hat.values[:, 5, 7]).all()
    assert np.isfinite(X_hat.values[:, 1:5]).all()


def test_fit_of_a_field_reads_each_chunk_once_but_the_first():
    """The mask's candidates come from the first rows: the first chunk is read twice, the
    others once (given landmarks, so the pass is the only other read)."""

    source = CountingRows(np.asarray(_field().values))
    field = xr.DataArray(da.from_array(source, chunks=(10, 6, 8), asarray=True, fancy=False),
                         dims=("time", "lat", "lon"))
    landmarks = np.random.default_rng(1).normal(size=(5, 46))
    KernelPCA(2, landmarks=landmarks, n_landmarks=5, solver="nystrom").fit(field)
    assert source.reads == collections.Counter({0: 2, 10: 1, 20: 1, 30: 1})


def test_model_file_keeps_the_layout(tmp_path):
    """Dims, coordinates, mask and weights come back from a model file; transform is equal."""
    field = _field()
    kpca = KernelPCA(n_components=2, n_landmarks=20, solver="nystrom", random_state=0,
                     weights=_weights(field)).fit(field)
    loaded = kpca_dask.load(kpca.save(tmp_path / "model.zarr"))
    for name in ("sample_dim", "dims", "shape", "weight_dims"):
        assert getattr(loaded.feature_layout_, name) == getattr(kpca.feature_layout_, name)
    np.testing.assert_array_equal(loaded.feature_kept_, kpca.feature_kept_)
    np.testing.assert_array_equal(loaded.feature_weights_, kpca.feature_weights_)
    np.testing.assert_array_equal(loaded.feature_layout_.coords["lat"], field.lat.values)
    np.testing.assert_array_equal(loaded.transform(field).values, kpca.transform(field).values)


def test_info_shows_the_field_and_its_weights(capsys):
    """The summary names the sample and feature dimensions, the mask and the weights."""
    from kpca_dask.cli.summary import print_summary, summary

    field = _field()
    kpca = KernelPCA(n_components=2, n_landmarks=20, solver="nystrom", random_state=0,
                     weights=_weights(field)).fit(field)
    shown = summary(kpca, "model.zarr")["field"]
    assert shown["sample_dim"] == "time" and shown["dims"] == ["lat", "lon"]
    assert shown["masked"] == 2 and shown["weights"]["dims"] == ["lat"]
    assert shown["weights"]["min"] == pytest.approx(np.sqrt(np.cos(np.deg2rad(50.0))))
    print_summary(summary(kpca, "model.zarr"))
    printed = capsys.readouterr().out
    assert "samples along 'time'; features lat 6 x lon 8, 2 masked position(s)" in printed
    assert "weights      over lat: min 0.8017, mean 0.9" in printed


def test_field_from_netcdf_and_zarr_equals_the_field_in_memory(tmp_path):
    """A field read from netCDF or an xarray Zarr store by path fits as the DataArray does."""
    field = _field().compute()
    field.to_dataset().to_netcdf(tmp_path / "field.nc")
    field.to_dataset().to_zarr(tmp_path / "field.zarr", zarr_format=3, consolidated=False)
    expected = KernelPCA(n_components=2, n_landmarks=20,
                         solver="nystrom", random_state=0).fit_transform(field)
    for path in (tmp_path / "field.nc", tmp_path / "field.zarr"):
        kpca = KernelPCA(n_components=2, n_landmarks=20,
                         solver="nystrom", random_state=0).fit(str(path))
        assert kpca.feature_layout_.dims == ("lat", "lon")
        np.testing.assert_allclose(np.asarray(kpca.transform(str(path))),
                                   expected.values, atol=1e-10)


def test_sample_dim_picks_the_sample_dimension():
    """sample_dim="time" on a (lat, time, lon) field is the same fit as time first."""
    field = _field().compute()
    expected = KernelPCA(n_components=2, n_landmarks=20,
                         solver="nystrom", random_state=0).fit_transform(field)
    moved = field.transpose("lat", "time", "lon")
    kpca = KernelPCA(n_components=2, n_landmarks=20,
                     solver="nystrom", random_state=0, sample_dim="time")
    Y = kpca.fit_transform(moved.transpose("time", "lat", "lon"))
    np.testing.assert_allclose(Y.values, expected.values)
    assert KernelPCA(n_components=2, n_landmarks=20,
                     solver="nystrom", random_state=0, sample_dim="time").fit(
        moved).feature_layout_.dims == ("lat", "lon")


@pytest.mark.parametrize("make", ESTIMATORS, ids=ESTIMATOR_IDS)
def test_weights_of_an_array_multiply_its_columns(make):
    """A 1-D array of weights fits and transforms as the weighted array does."""
    X = np.random.default_rng(0).normal(size=(50, 4))
    w = np.array([1.0, 0.5, 2.0, 0.0])
    weighted, plain = make(n_components=2, weights=w).fit(X), make(n_components=2).fit(X * w)
    np.testing.assert_allclose(weighted.transform(X[:7]), plain.transform(X[:7] * w),
                               atol=1e-10)


# -- bad input: each one clear error -------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    field = _field()
    return field, KernelPCA(n_components=2, n_landmarks=20,
                            solver="nystrom", random_state=0).fit(field)


def test_feature_dimensions_in_another_order_are_refused(fitted):
    """(time, lon, lat) against a (time, lat, lon) fit: one error saying how to transpose."""
    field, kpca = fitted
    with pytest.raises(InvalidInputError, match=r"another order: X.transpose\('time', 'lat'"):
        kpca.transform(field.transpose("time", "lon", "lat"))


def test_other_coordinates_are_refused(fitted):
    """A grid shifted in longitude is refused, naming the dimension."""
    field, kpca = fitted
    with pytest.raises(InvalidInputError, match="other 'lon' coordinates than the fit's"):
        kpca.transform(field.assign_coords(lon=field.lon + 5.0))


def test_a_sample_dim_that_does_not_exist_is_refused():
    """sample_dim names no dimension of X: the error lists the dims."""
    with pytest.raises(InvalidParameterError, match=r"sample_dim='depth' is not a dimension"):
        KernelPCA(sample_dim="depth").fit(_field())


@pytest.mark.parametrize("bad, match", [
    (lambda f: xr.ones_like(f.time, dtype=float), r"\['time'\] are not feature dimensions"),
    (lambda f: -xr.ones_like(f.lat), "1?.* are negative"),
    (lambda f: xr.ones_like(f.lat).where(f.lat > 0), "are NaN or infinite"),
    (lambda f: xr.ones_like(f.lat).assign_coords(lat=f.lat + 1), "differ along 'lat'"),
], ids=["sample-dim", "negative", "nan", "other-coords"])
def test_bad_weights_are_refused(bad, match):
    """Weights over the sample dimension, negative, NaN or on another grid: one error each."""
    field = _field()
    with pytest.raises(InvalidParameterError, match=match):
        KernelPCA(n_landmarks=10, solver="nystrom", weights=bad(field)).fit(field)


def test_an_all_nan_sample_is_refused_by_its_coordinate():
    """A time step NaN everywhere is named by its time."""
    field = _field().compute()
    field[7] = np.nan
    with pytest.raises(NonFiniteInputError, match="sample time=2007 is NaN at every position"):
        KernelPCA(n_landmarks=10, solver="nystrom", random_state=0).fit(field.chunk({"time": 10}))


def test_a_nan_that_is_not_fixed_is_named_by_its_coordinates():
    """One NaN at a position with values elsewhere: the error gives its time, lat and lon."""
    field = _field().compute()
    field[12, 2, 3] = np.nan
    with pytest.raises(NonFiniteInputError,
                       match=r"NaN at time=2012, lat=-10.0, lon=30.0, a position that holds"):
        KernelPCA(n_landmarks=10, solver="nystrom", random_state=0).fit(field.chunk({"time": 10}))


def test_a_masked_position_with_a_value_later_is_refused():
    """NaN in the first samples but a value later: not a fixed mask, named by coordinates."""
    field = _field().compute()
    field[:30, 1, 1] = np.nan
    with pytest.raises(NonFiniteInputError, match=r"NaN at lat=-30.0, lon=10.0 in its first "
                                                  r"samples but holds a value at time=2030"):
        KernelPCA(n_landmarks=10, solver="nystrom", random_state=0).fit(field.chunk({"time": 10}))


def test_non_numeric_fields_are_refused():
    """A field of strings is refused before anything is read."""
    field = xr.DataArray(np.full((5, 2, 2), "a"), dims=("time", "lat", "lon"))
    with pytest.raises(NonNumericInputError, match="dtype <U1; kernel PCA needs numbers"):
        KernelPCA().fit(field)


def test_partial_fit_of_a_field_adds_its_samples():
    """Two batches of time steps give the model of the whole field (same landmarks)."""
    field = _field()
    whole = KernelPCA(n_components=2, n_landmarks=20, solver="nystrom", random_state=0).fit(field)
    grown = KernelPCA(n_components=2, landmarks=whole.landmarks_, n_landmarks=20, solver="nystrom")
    grown.partial_fit(field.isel(time=slice(0, 20))).partial_fit(field.isel(time=slice(20, 40)))
    assert grown.n_samples_fit_ == 40 and grown.feature_layout_.dims == ("lat", "lon")
    np.testing.assert_allclose(grown.eigenvalues_, whole.eigenvalues_, rtol=1e-10)


def test_models_of_other_weights_are_not_merged():
    """merge refuses models whose features are weighted differently."""
    field = _field()
    a = KernelPCA(n_components=2, n_landmarks=20, solver="nystrom", random_state=0).fit(field)
    b = KernelPCA(n_components=2, landmarks=a.landmarks_, n_landmarks=20, solver="nystrom",
                  weights=_weights(field)).fit(field)
    with pytest.raises(kpca_dask.errors.ModelMismatchError, match="weights its features"):
        kpca_dask.merge([a, b])


def test_a_plain_array_is_taken_as_the_stacked_field(fitted):
    """transform of the field's stacked positions (every position, C order) equals that of
    the DataArray; reconstruction_error keeps the sample coordinate."""
    field, kpca = fitted
    stacked = field.values.reshape(field.shape[0], -1)
    np.testing.assert_allclose(kpca.transform(stacked), kpca.transform(field).values,
                               rtol=1e-12)
    errors = kpca.reconstruction_error(field)
    assert errors.dims == ("time",) and errors.time.values[0] == 2000


@pytest.mark.parametrize("weights, match", [
    (np.ones(3), r"weights has shape \(3,\), but X has 4 features"),
    (xr.DataArray(np.ones(4), dims="x"), "weights is a DataArray but X is not labelled"),
], ids=["length", "labelled"])
def test_bad_weights_of_an_array_are_refused(weights, match):
    """Weights of an array: one per column, and not a DataArray."""
    with pytest.raises(InvalidParameterError, match=match):
        KernelPCA(n_landmarks=10,
                  solver="nystrom", weights=weights).fit(np.random.default_rng(0).normal(
            size=(20, 4)))


def _without_digests(path):
    """The model file as one written before digests (format version 2): only the checks of
    what a fit could make stand between an edit and the loaded model."""
    import zarr

    group = zarr.open_group(str(path), mode="r+")
    attrs = {k: v for k, v in group.attrs.asdict().items() if k != "checksums"}
    group.attrs.put({**attrs, "format_version": 2})
    return group


@pytest.mark.parametrize("edit, match", [
    (lambda g: g["feature_weights"].__setitem__(slice(None), -1.0),
     "'feature_weights' holds negative values"),
    (lambda g: g["feature_kept"].__setitem__(slice(None), 0), "feature_layout_ is invalid"),
    (lambda g: g.attrs.put({**g.attrs.asdict(), "fitted": {
        **g.attrs["fitted"], "feature_layout_": {**g.attrs["fitted"]["feature_layout_"],
                                                 "shape": [6, 9]}}}),
     "feature_layout_ is invalid"),
], ids=["negative-weights", "kept", "shape"])
def test_an_edited_layout_in_a_model_file_is_refused(tmp_path, edit, match):
    """Weights, kept positions and the field's shape are checked as a model file is read."""
    field = _field()
    path = KernelPCA(n_components=2, n_landmarks=20, solver="nystrom", random_state=0,
                     weights=_weights(field)).fit(field).save(tmp_path / "model.zarr")
    edit(_without_digests(path))
    with pytest.raises(kpca_dask.errors.ModelFormatError, match=match):
        kpca_dask.load(path)


def test_a_value_on_the_models_mask_at_transform_is_refused(fitted):
    """At transform, a value where the model masks the field is named, with the fix."""
    field, kpca = fitted
    filled = field.fillna(0.0)
    with pytest.raises(NonFiniteInputError, match=r"X holds a value at time=20\d\d, lat=-50.0, "
                                                  r"lon=0.0, a position the model masks"):
        kpca.transform(filled).compute()
    fixed = filled.where(~kpca.feature_layout_.mask())
    np.testing.assert_allclose(kpca.transform(fixed).values, kpca.transform(field).values)
