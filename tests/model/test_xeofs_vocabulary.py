"""An xeofs user's words, answered in kpca-dask's: ``weights="coslat"`` on every estimator, and
``n_modes=``, ``use_coslat=`` or ``fit(X, dim=...)`` refused with the equivalent named."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from sklearn.base import clone

import kpca_dask
from kpca_dask import ExactKernelPCA, ExtendedKernelEOF, HilbertKernelEOF, KernelPCA
from kpca_dask.errors import InvalidInputError, InvalidParameterError
from kpca_dask.io.preprocessing.latitude import coslat_weights

N_TIMES = 40


def _field(latitude_name: str = "lat", **latitude_attrs) -> xr.DataArray:
    """A (time, lat, lon) field with a travelling wave and noise, poles included."""
    rng = np.random.default_rng(0)
    lat, lon = np.linspace(-90.0, 90.0, 7), np.arange(0.0, 360.0, 45.0)
    t = np.arange(N_TIMES)[:, None, None]
    wave = np.cos(np.deg2rad(lon)[None, None, :] - 0.4 * t) * np.cos(np.deg2rad(lat))[None, :,
                                                                                         None]
    values = wave + 0.3 * rng.standard_normal((N_TIMES, lat.size, lon.size))
    field = xr.DataArray(values, dims=("time", latitude_name, "lon"),
                         coords={"time": np.arange(N_TIMES), latitude_name: lat, "lon": lon})
    field[latitude_name].attrs.update(latitude_attrs)
    return field


#: Each estimator, linear and exact where it has a choice, as a factory of its keywords.
ESTIMATORS = {
    "KernelPCA": lambda **kw: KernelPCA(3, kernel="linear", n_landmarks=N_TIMES,
                                        landmarks="uniform", **kw),
    "ExactKernelPCA": lambda **kw: ExactKernelPCA(3, kernel="linear", **kw),
    "HilbertKernelEOF": lambda **kw: HilbertKernelEOF(2, padding="none", **kw),
    "ExtendedKernelEOF": lambda **kw: ExtendedKernelEOF(3, kernel="linear", embedding=2,
                                                        n_landmarks=N_TIMES, **kw),
}


def _variance(model) -> np.ndarray:
    return np.asarray(model.explained_variance_ratio_)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_coslat_weights_by_name_equal_the_weights_given(name):
    """weights="coslat" takes √cos(lat) from the field's own latitude: the same model as the
    weights passed as a DataArray."""
    field = _field()
    by_name = ESTIMATORS[name](weights="coslat").fit(field)
    given = ESTIMATORS[name](weights=coslat_weights(field.lat)).fit(field)
    np.testing.assert_allclose(_variance(by_name), _variance(given), rtol=1e-12)
    assert by_name.get_params()["weights"] == "coslat"


@pytest.mark.parametrize("attrs", [{"standard_name": "latitude"}, {"units": "degrees_north"}])
def test_a_latitude_is_found_by_its_cf_attributes(attrs):
    """A latitude coordinate named otherwise is found by its standard_name or units."""
    field = _field("y", **attrs)
    model = ESTIMATORS["KernelPCA"](weights="coslat").fit(field)
    given = ESTIMATORS["KernelPCA"](weights=coslat_weights(field.y.rename("y"))).fit(field)
    np.testing.assert_allclose(_variance(model), _variance(given), rtol=1e-12)


def test_coslat_weights_of_several_fields_take_each_fields_latitude():
    """Two fields on different grids: "coslat" weights each by its own latitude."""
    a, b = _field().rename("a"), _field("latitude").isel(latitude=slice(1, 6)).rename("b")
    model = ESTIMATORS["KernelPCA"](weights="coslat").fit([a, b])
    given = ESTIMATORS["KernelPCA"](weights=[coslat_weights(a.lat),
                                             coslat_weights(b.latitude)]).fit([a, b])
    np.testing.assert_allclose(_variance(model), _variance(given), rtol=1e-12)


def test_a_model_fitted_with_coslat_weights_is_saved_and_loaded(tmp_path):
    """The parameter is kept as written; the weights themselves are in the file."""
    field = _field()
    model = ESTIMATORS["KernelPCA"](weights="coslat").fit(field)
    model.save(tmp_path / "model.zarr")
    loaded = kpca_dask.load(tmp_path / "model.zarr")
    assert loaded.get_params()["weights"] == "coslat"
    np.testing.assert_allclose(np.asarray(loaded.transform(field)),
                               np.asarray(model.transform(field)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_coslat_weights_of_an_array_say_a_labelled_field_is_needed(name):
    with pytest.raises(InvalidParameterError, match="latitude coordinate of a labelled field"):
        ESTIMATORS[name](weights="coslat").fit(_field().values.reshape(N_TIMES, -1))


def test_coslat_weights_without_a_latitude_name_the_coordinates():
    field = _field("y")
    with pytest.raises(InvalidInputError, match=r"no latitude coordinate over the feature "
                                                r"dimensions y, lon \(coordinates: time, y, lon\)"):
        ESTIMATORS["KernelPCA"](weights="coslat").fit(field)


def test_coslat_weights_of_a_latitude_beyond_90_degrees_are_refused():
    field = _field().assign_coords(lat=np.linspace(-100.0, 100.0, 7))
    with pytest.raises(InvalidInputError, match="'lat' is not a latitude in degrees"):
        ESTIMATORS["ExactKernelPCA"](weights="coslat").fit(field)


def test_a_weights_string_other_than_coslat_is_refused():
    with pytest.raises(InvalidParameterError, match="'coslat'"):
        ESTIMATORS["KernelPCA"](weights="cos").fit(_field())


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("keyword, equivalent", [
    ("n_modes", "n_components"), ("use_coslat", 'weights="coslat"'),
    ("standardize", "X.std"), ("n_jobs", "Dask scheduler")])
def test_an_xeofs_keyword_of_the_constructor_names_the_equivalent(name, keyword, equivalent):
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{keyword}': .*"
                                        f"{equivalent}"):
        ESTIMATORS[name](**{keyword: True})


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_an_xeofs_keyword_of_fit_names_the_equivalent(name):
    """xeofs' fit(X, dim="time") is the constructor's sample_dim here; nothing is fitted."""
    model = ESTIMATORS[name]()
    with pytest.raises(TypeError, match=r"\.fit\(\) got an unexpected keyword argument 'dim'"
                                        r": .*sample_dim"):
        model.fit(_field(), dim="time")
    assert not hasattr(model, "n_features_in_")


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_the_explained_keywords_leave_the_parameters_as_they_were(name):
    """scikit-learn reads the constructor's own signature: get_params and clone see the
    parameters, not the wrapper's (*args, **kwargs)."""
    model = ESTIMATORS[name](weights="coslat")
    params = model.get_params()
    assert "weights" in params and "n_modes" not in params and "kwargs" not in params
    assert clone(model).get_params() == params
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_thing'"):
        ESTIMATORS[name](no_such_thing=1)


@pytest.mark.parametrize("estimator", [HilbertKernelEOF, ExtendedKernelEOF])
def test_the_eof_estimators_default_to_the_linear_kernel(estimator):
    """The EOF family's default is the EOF (xeofs' answer), a kernel EOF is asked for by name:
    a fit with defaults gives the linear fit's ratios, not an rbf fit's."""
    field = _field()
    default = estimator(2).fit(field)
    linear = estimator(2, kernel="linear").fit(field)
    rbf = estimator(2, kernel="rbf").fit(field)
    assert default.get_params()["kernel"] == "linear"
    np.testing.assert_allclose(_variance(default), _variance(linear), rtol=1e-12)
    assert not np.allclose(_variance(default), _variance(rbf), rtol=1e-3)
