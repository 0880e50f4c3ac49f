"""One contract over every estimator of the family: what each gives a user of a field.

KernelPCA, ExactKernelPCA, HilbertKernelEOF and ExtendedKernelEOF, each fitted on a
lazy, labelled field: the fitted attributes every estimator has, the spectrum over
``mode`` 1..q, a lazy transform of new samples labelled by their time, the bootstrap,
``save`` and ``kpca_dask.load`` back to the same estimator and spectrum, and a rotation.
What one estimator lacks is refused in words (tests of each estimator).
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
import xarray as xr

import kpca_dask
from kpca_dask import ExactKernelPCA, ExtendedKernelEOF, HilbertKernelEOF, KernelPCA

N, Q = 48, 2

ESTIMATORS = {
    "KernelPCA": lambda: KernelPCA(Q, kernel="linear", n_landmarks=N, random_state=0),
    "ExactKernelPCA": lambda: ExactKernelPCA(Q, kernel="rbf", gamma=0.05),
    "HilbertKernelEOF": lambda: HilbertKernelEOF(Q, kernel="linear", padding="none"),
    "ExtendedKernelEOF": lambda: ExtendedKernelEOF(Q, tau=1, embedding=2, kernel="linear",
                                                   n_landmarks=N, random_state=0),
}
#: Fitted attributes every estimator answers.
COMMON = ("n_components_", "n_samples_fit_", "n_features_in_", "eigenvalues_",
          "explained_variance_", "explained_variance_ratio_", "total_variance_",
          "total_variance_kind_", "sample_dim_")


def _field() -> xr.DataArray:
    rng = np.random.default_rng(0)
    t, lon = np.arange(N)[:, None, None], np.arange(6.0)[None, None, :] * 60
    values = np.sin(0.4 * t - np.deg2rad(lon)) + 0.3 * rng.normal(size=(N, 3, 6))
    return xr.DataArray(values, dims=("time", "lat", "lon"), name="field", coords={
        "time": np.arange("2000-01-01", N, dtype="datetime64[D]")[:N],
        "lat": [0.0, 10.0, 20.0], "lon": lon.ravel()}).chunk({"time": 16})


@pytest.fixture(scope="module")
def field() -> xr.DataArray:
    return _field()


@pytest.fixture(scope="module", params=sorted(ESTIMATORS))
def fitted(request, field):
    return ESTIMATORS[request.param]().fit(field)


def test_every_estimator_answers_the_common_attributes(fitted):
    for name in COMMON:
        getattr(fitted, name)
    assert fitted.n_components_ == Q and fitted.sample_dim_ == "time"
    assert fitted.total_variance_kind_ in ("exact", "nystrom-estimate")
    ratios = fitted.explained_variance_ratio_
    assert ratios.shape == (Q,) and np.all(np.diff(ratios) <= 0) and 0 < ratios.sum() <= 1


def test_every_estimator_gives_its_spectrum_over_modes(fitted):
    spectrum = fitted.spectrum()
    assert spectrum["mode"].values.tolist() == [1, 2]
    np.testing.assert_allclose(spectrum["explained_variance_ratio"].values,
                               fitted.explained_variance_ratio_)


def test_new_samples_give_lazy_scores_labelled_by_their_time(fitted, field):
    new = field if isinstance(fitted, HilbertKernelEOF) else field[8:40]
    scores = fitted.transform(new)
    assert isinstance(scores, xr.DataArray)
    assert scores.dims == ("time", "mode") and scores.sizes["mode"] == Q
    kept = scores.sizes["time"]
    np.testing.assert_array_equal(scores["time"].values, new["time"].values[:kept])
    assert dask.is_dask_collection(scores)


def test_maps_computed_by_the_fit_are_one_array_and_one_field(fitted):
    """Where the fit computes its maps (the Hilbert and extended EOFs), ``components()`` lays
    them on the field and ``components_`` is the same maps as an ndarray over the features
    fitted; the two kernel PCAs read their maps from the data (``patterns(X)``)."""
    if not hasattr(fitted, "components"):
        assert isinstance(fitted, (KernelPCA, ExactKernelPCA)) and hasattr(fitted, "patterns")
        return
    maps, flat = fitted.components(), fitted.components_
    assert isinstance(maps, xr.DataArray) and isinstance(flat, np.ndarray)
    assert maps.dims[0] == "mode" and maps.dims[-2:] == ("lat", "lon")
    assert flat.shape[0] == Q and flat.shape[-1] == fitted.n_features_in_
    np.testing.assert_array_equal(flat, maps.values.reshape(flat.shape))


def test_every_estimator_saves_and_loads(fitted, tmp_path):
    loaded = kpca_dask.load(fitted.save(tmp_path / "model.zarr"))
    assert type(loaded) is type(fitted) and loaded.get_params() == fitted.get_params()
    xr.testing.assert_allclose(loaded.spectrum(), fitted.spectrum(), rtol=1e-12)


#: The steps each estimator applies after reading the field's rows.
STEP_KINDS = {KernelPCA: [], ExactKernelPCA: [], HilbertKernelEOF: ["analytic_signal"],
              ExtendedKernelEOF: ["delay_embedding"]}


def test_every_estimator_holds_its_preprocessing_and_its_file_keeps_it(fitted, tmp_path):
    """The field's layout and then the estimator's steps, the same after save and load."""
    held = fitted.preprocessing_
    assert (held.layout.sample_dim, held.layout.dims, held.layout.shape) == (
        "time", ("lat", "lon"), (3, 6))  # the field's own layout, whatever the steps
    assert [step.kind for step in held.steps] == STEP_KINDS[type(fitted)]
    loaded = kpca_dask.load(fitted.save(tmp_path / "model.zarr")).preprocessing_
    assert loaded == held and loaded is not held


def test_every_estimator_rotates(fitted, field):
    rotated = kpca_dask.rotate(fitted, field, method="varimax", max_iter=20_000)
    assert rotated.n_components_ == Q
    assert rotated.transform(field).sizes["mode"] == Q
    # The estimator rotated is not changed; the result's estimator (or stage) holds it.
    assert fitted.model_.rotation is None
    held = rotated.stage.estimator if isinstance(fitted, ExtendedKernelEOF) else rotated.estimator
    assert held.model_.rotation is rotated.rotation


def test_every_rotation_is_saved_and_comes_back_without_the_data(fitted, field, tmp_path):
    """A rotated result's ``save`` writes the model with its rotation; ``rotate`` of the loaded
    model, with no data, gives the same rotated modes; the estimator rotated is unchanged."""
    rotated = kpca_dask.rotate(fitted, field, method="promax", power=3, max_iter=20_000)
    loaded = kpca_dask.load(rotated.save(tmp_path / "rotated.zarr"))
    assert fitted.model_.rotation is None and type(loaded) is type(fitted)
    again = kpca_dask.rotate(loaded)
    assert (again.rotation.method, again.rotation.power) == ("promax", 3)
    np.testing.assert_allclose(again.rotation.matrix, rotated.rotation.matrix, rtol=1e-12)
    xr.testing.assert_allclose(again.transform(field), rotated.transform(field))
    if hasattr(rotated, "components"):
        xr.testing.assert_allclose(again.components(), rotated.components())


def test_every_estimator_bootstraps_its_modes(fitted, field):
    """One call for every estimator: each mode's replicates, intervals and significance."""
    boot = kpca_dask.bootstrap(fitted, field, 6, seed=0)
    assert boot["mode"].values.tolist() == [1, 2] and boot.sizes["n"] == 6
    assert (boot["explained_variance_lower"] <= boot["explained_variance_upper"]).all()
    assert ((boot["congruence"] >= 0) & (boot["congruence"] <= 1)).all()
    np.testing.assert_allclose(boot["fit_explained_variance"].values,
                               fitted.explained_variance_[:Q])
