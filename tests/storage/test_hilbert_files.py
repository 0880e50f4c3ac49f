"""HilbertKernelEOF model files: ``save`` and ``kpca_dask.load`` give back the same model.

Both ways (the Gram way with its training rows copied in, and landmarks), numpy, dask
and a labelled field: the spectrum, the training scores, the maps, the scores of a new
record and a rotation equal the fitted model's; the outputs keep their kind and labels.
A damaged or edited file is refused by name; nothing is written over an existing path.
"""

from __future__ import annotations

import shutil

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from _complex_modes import travelling_waves

import kpca_dask
from kpca_dask import HilbertKernelEOF
from kpca_dask.errors import ModelFormatError, OutputExistsError

N, P, Q = 60, 40, 2


def _field(lazy: bool) -> xr.DataArray:
    values = travelling_waves(N, 4 * 10, seed=3).reshape(N, 4, 10)
    field = xr.DataArray(values, dims=("time", "lat", "lon"), coords={
        "time": np.arange("2001-01", "2006-01", dtype="datetime64[M]"),
        "lat": [-15.0, -5.0, 5.0, 15.0], "lon": np.arange(10.0) * 36})
    field[:, 0, :3] = np.nan  # land
    return field.chunk({"time": 20}) if lazy else field


def _data(kind: str):
    rows = travelling_waves(N, P, seed=1)
    return {"numpy": rows, "dask": da.from_array(rows, chunks=(20, P)),
            "field": _field(False), "lazy field": _field(True)}[kind]


def _values(output) -> np.ndarray:
    return np.asarray(output.values if isinstance(output, xr.DataArray) else output)


@pytest.mark.parametrize("solver", ["gram", "nystrom"])
@pytest.mark.parametrize("kind", ["numpy", "dask", "field", "lazy field"])
def test_a_loaded_model_gives_the_fitted_models_outputs(tmp_path, solver, kind):
    X = _data(kind)
    model = HilbertKernelEOF(Q, kernel="rbf", solver=solver, n_landmarks=40,
                             random_state=0, padding="exp").fit(X)
    loaded = kpca_dask.load(model.save(tmp_path / "hilbert.zarr"))
    assert type(loaded) is HilbertKernelEOF and loaded.get_params() == model.get_params()
    assert (loaded.solver_, loaded.total_variance_kind_) == (model.solver_,
                                                            model.total_variance_kind_)
    np.testing.assert_allclose(loaded.explained_variance_ratio_,
                               model.explained_variance_ratio_, rtol=1e-14)
    xr.testing.assert_allclose(loaded.spectrum(), model.spectrum(), rtol=1e-14)
    for name in ("scores", "components", "scores_phase", "components_amplitude"):
        got, expected = getattr(loaded, name)(), getattr(model, name)()
        assert type(got) is type(expected), name
        np.testing.assert_allclose(_values(got), _values(expected), rtol=1e-12, atol=1e-12)
        if isinstance(expected, xr.DataArray):
            assert got.dims == expected.dims and got.coords.equals(expected.coords), name
    new = X[5:]  # a shorter record: the same warning, the same scores
    with pytest.warns(kpca_dask.ShortRecordWarning):
        expected = model.transform(new)
    with pytest.warns(kpca_dask.ShortRecordWarning):
        got = loaded.transform(new)
    assert type(got) is type(expected)
    np.testing.assert_allclose(_values(got), _values(expected), rtol=1e-10, atol=1e-12)


def test_a_loaded_model_rotates_as_the_fitted_one(tmp_path):
    record = travelling_waves(N, P, seed=0)
    model = HilbertKernelEOF(Q, solver="gram").fit(record)
    loaded = kpca_dask.load(model.save(tmp_path / "hilbert.zarr"))
    got, expected = (kpca_dask.rotate(m, method="varimax") for m in (loaded, model))
    np.testing.assert_allclose(got.explained_variance_, expected.explained_variance_,
                               rtol=1e-12)
    np.testing.assert_allclose(got.scores(), expected.scores(), atol=1e-12)
    assert got.estimator.rotation_ is got.rotation and loaded.rotation_ is None


def test_a_lazy_nystrom_fit_holds_its_scores_read_and_the_file_holds_them(tmp_path):
    X = _data("dask")
    model = HilbertKernelEOF(Q, solver="nystrom", n_landmarks=30, random_state=0).fit(X)
    assert isinstance(model.model_.scores, np.ndarray)  # read at the fit, no graph of X
    assert isinstance(model.scores(), da.Array)  # lazy input, lazy outputs
    loaded = kpca_dask.load(model.save(tmp_path / "hilbert.zarr"))
    assert isinstance(loaded.model_.scores, np.ndarray)
    assert isinstance(loaded.scores(), da.Array)  # the kind of the fit's input
    np.testing.assert_allclose(loaded.scores().compute(), model.scores().compute(),
                               atol=1e-12)


def test_an_existing_path_is_not_written_over(tmp_path):
    model = HilbertKernelEOF(Q).fit(_data("numpy"))
    path = model.save(tmp_path / "hilbert.zarr")
    with pytest.raises(OutputExistsError):
        model.save(path)
    assert type(kpca_dask.load(path)) is HilbertKernelEOF
    model.save(path, overwrite=True)


@pytest.mark.parametrize("solver, name", [("gram", "rows"), ("gram", "scores"),
                                          ("nystrom", "landmarks"), ("nystrom", "projection")])
def test_a_changed_array_is_refused_by_name(tmp_path, solver, name):
    model = HilbertKernelEOF(Q, solver=solver, n_landmarks=30, random_state=0)
    path = model.fit(_data("numpy")).save(tmp_path / "hilbert.zarr")
    array = zarr.open_group(path)[name]
    array[(0,) * array.ndim] = 7.0  # fresh chunk checksums, an old digest
    with pytest.raises(ModelFormatError, match=rf"hilbert\.zarr: the array '{name}' differs"):
        kpca_dask.load(path)


def test_edited_attributes_and_missing_arrays_are_refused(tmp_path):
    path = HilbertKernelEOF(Q, solver="gram").fit(_data("numpy")).save(tmp_path / "h.zarr")
    copy = tmp_path / "copy.zarr"
    shutil.copytree(path, copy)
    group = zarr.open_group(str(copy))
    group.attrs["fitted"] = dict(group.attrs["fitted"], total_variance=1.0)
    with pytest.raises(ModelFormatError, match="attributes differ"):
        kpca_dask.load(copy)
    shutil.rmtree(path + "/norms")
    with pytest.raises(ModelFormatError, match="norms missing"):
        kpca_dask.load(path)


def test_a_field_with_a_scalar_coordinate_saves_and_loads(tmp_path):
    """A level selected from a 4-D field stays as a scalar coordinate: the model's samples
    keep only their own coordinates, and the loaded scores are labelled as the fitted."""
    field = _field(False).expand_dims(level=[500.0, 850.0]).isel(level=0)
    assert "level" in field.coords and field.coords["level"].ndim == 0
    model = HilbertKernelEOF(Q, padding="none").fit(field)
    loaded = kpca_dask.load(model.save(tmp_path / "hilbert.zarr"))
    xr.testing.assert_allclose(loaded.scores(), model.scores().drop_vars("level",
                                                                         errors="ignore"))


def test_a_file_without_its_steps_loads_and_steps_against_the_parameters_are_refused(
        tmp_path):
    """A file written before the preprocessing steps were recorded has the analytic signal
    of its parameters; a recorded step that contradicts them (or names no step) is refused."""
    from _model_files import rewritten_attributes

    model = HilbertKernelEOF(Q, padding="none").fit(_data("numpy"))
    path = model.save(tmp_path / "h.zarr")
    rewritten_attributes(path, lambda attrs: attrs["fitted"].pop("preprocessing"))
    old = kpca_dask.load(path)
    assert old.preprocessing_.steps == model.preprocessing_.steps
    np.testing.assert_allclose(old.transform(_data("numpy")), model.transform(_data("numpy")),
                               rtol=1e-12, atol=1e-12)
    for steps, match in (([{"step": "analytic_signal", "padding": "exp", "decay_factor": 0.2}],
                          "padding is not its parameters'"),
                         ([{"step": "blur"}], "'blur' is not a preprocessing step")):
        rewritten_attributes(path, lambda attrs, steps=steps: attrs["fitted"].update(
            preprocessing=steps))
        with pytest.raises(ModelFormatError, match=match):
            kpca_dask.load(path)
