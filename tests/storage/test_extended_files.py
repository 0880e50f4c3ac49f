"""ExtendedKernelEOF model files: ``save`` and ``kpca_dask.load`` give back the same model.

Every way to the stages (landmarks, the Gram way, a linear stage first with
``n_pca_modes``), arrays and a masked, weighted field: the spectrum, the space-time maps
with their labels and mask, and the scores of a new series equal the fitted model's.
The file is written whole or not at all; a damaged file is refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import zarr

import kpca_dask
from kpca_dask import ExactKernelPCA, ExtendedKernelEOF, KernelPCA
from kpca_dask.errors import ModelFormatError, OutputExistsError

N, TAU, EMBEDDING = 50, 2, 3


def _field(n: int = N, width: int = 5) -> xr.DataArray:
    rng = np.random.default_rng(0)
    t, lat, lon = np.arange(n), np.array([0.0, 10.0, 20.0]), np.arange(width) * 360.0 / width
    wave = np.sin(0.4 * t[:, None, None] - np.deg2rad(lon) * 2 + lat[:, None] / 10)
    field = xr.DataArray(wave + 0.5 * rng.normal(size=(n, 3, width)),
                         dims=("time", "lat", "lon"), name="sst",
                         coords={"time": np.arange(n) * 6.0, "lat": lat, "lon": lon})
    return field.where(~((field.lat == 20) & (field.lon == 0)))


def _values(output) -> np.ndarray:
    return np.asarray(output.values if isinstance(output, xr.DataArray) else output)


@pytest.mark.parametrize("solver, width, stage", [("nystrom", 5, KernelPCA),
                                                  ("gram", 40, ExactKernelPCA)])
@pytest.mark.parametrize("n_pca_modes", [None, 4])
@pytest.mark.parametrize("kind", ["array", "field"])
def test_a_loaded_model_gives_the_fitted_models_outputs(tmp_path, solver, width, stage,
                                                        n_pca_modes, kind):
    field = _field(width=width)
    X = field if kind == "field" else field.fillna(0.0).values.reshape(N, -1)
    weights = "coslat" if kind == "field" else None
    model = ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING, kernel="rbf", gamma=0.05,
                              n_landmarks=30, random_state=0, solver=solver, weights=weights,
                              n_pca_modes=n_pca_modes).fit(X)
    assert type(model.kpca_) is (stage if n_pca_modes is None else KernelPCA)
    loaded = kpca_dask.load(model.save(tmp_path / "eeof.zarr"))
    assert type(loaded) is ExtendedKernelEOF and loaded.get_params() == model.get_params()
    assert (type(loaded.kpca_), type(loaded.pca_)) == (type(model.kpca_), type(model.pca_))
    assert (loaded.solver_, loaded.delay_, loaded.n_features_in_) == (
        model.solver_, model.delay_, model.n_features_in_)
    xr.testing.assert_allclose(loaded.spectrum(), model.spectrum(), rtol=1e-13)
    assert type(loaded.components()) is type(model.components())
    np.testing.assert_array_equal(loaded.components_, model.components_)
    if kind == "field":
        xr.testing.assert_identical(loaded.components(), model.components())
    new = X[10:40]
    np.testing.assert_allclose(_values(loaded.transform(new)), _values(model.transform(new)),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore:X has .* chunks along the feature axis")  # the callable
def test_a_failed_save_leaves_nothing_and_an_existing_path_is_kept(tmp_path):
    model = ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING, kernel=lambda a, b: a @ b.T,
                              n_landmarks=20, random_state=0).fit(_field().fillna(0.0).values
                                                                  .reshape(N, -1))
    with pytest.raises(kpca_dask.InvalidParameterError, match="callable kernel"):
        model.save(tmp_path / "eeof.zarr")
    assert list(tmp_path.iterdir()) == []
    saved = ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING).fit(_field())
    path = saved.save(tmp_path / "eeof.zarr")
    with pytest.raises(OutputExistsError):
        saved.save(path)
    assert type(kpca_dask.load(path)) is ExtendedKernelEOF


def test_damaged_maps_and_edited_attributes_are_refused(tmp_path):
    path = ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING).fit(_field()).save(
        tmp_path / "eeof.zarr")
    group = zarr.open_group(path)
    fitted = group.attrs["fitted"]
    group.attrs["fitted"] = dict(fitted, delay=[3, 3])
    with pytest.raises(ModelFormatError, match="attributes differ"):
        kpca_dask.load(path)
    group.attrs["fitted"] = fitted
    group["components"][0, 0, 1, 1] = 7.0  # fresh chunk checksums, an old digest
    with pytest.raises(ModelFormatError, match=r"eeof\.zarr: the array 'components' differs"):
        kpca_dask.load(path)


def test_a_stage_from_another_file_or_a_missing_stage_is_refused(tmp_path):
    """Each stage is bound to its file by the digest of its attributes: a stage copied in
    from another model, or a linear stage removed, is refused by name."""
    import shutil

    field = _field()
    first = ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING, n_pca_modes=4).fit(field)
    other = ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING, n_pca_modes=4).fit(field[:40])
    path = first.save(tmp_path / "first.zarr")
    other_path = other.save(tmp_path / "other.zarr")
    copy = tmp_path / "swapped.zarr"
    shutil.copytree(path, copy)
    shutil.rmtree(copy / "kernel_stage")
    shutil.copytree(f"{other_path}/kernel_stage", copy / "kernel_stage")
    with pytest.raises(ModelFormatError, match="the stage 'kernel_stage' is not the one"):
        kpca_dask.load(copy)
    shutil.rmtree(f"{path}/linear_stage")
    with pytest.raises(ModelFormatError, match="its stages are not"):
        kpca_dask.load(path)


def test_a_file_without_its_steps_loads_and_steps_against_the_parameters_are_refused(
        tmp_path):
    """A file written before the preprocessing steps were recorded holds ``delay``, read as
    the delay embedding; a recorded step that contradicts the parameters is refused."""
    from _model_files import rewritten_attributes

    model = ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING).fit(_field())
    path = model.save(tmp_path / "eeof.zarr")

    def as_before(attrs):
        attrs["fitted"]["delay"] = [TAU, EMBEDDING]
        del attrs["fitted"]["preprocessing"]

    rewritten_attributes(path, as_before)
    old = kpca_dask.load(path)
    assert old.preprocessing_.steps == model.preprocessing_.steps and old.delay_ == (TAU,
                                                                                      EMBEDDING)
    xr.testing.assert_allclose(old.transform(_field()), model.transform(_field()))
    steps = [{"step": "delay_embedding", "tau": TAU + 1, "embedding": EMBEDDING}]
    rewritten_attributes(path, lambda attrs: attrs["fitted"].update(preprocessing=steps))
    with pytest.raises(ModelFormatError, match=r"is not its parameters' \[DelayEmbedding"):
        kpca_dask.load(path)


def test_a_rotated_models_file_keeps_its_rotated_maps_and_misses_none(tmp_path):
    """A rotated extended EOF's file holds the rotated maps beside its stages (the kernel
    stage's file holds the rotation); without them it is refused by name."""
    field = _field()
    rotated = kpca_dask.rotate(ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING).fit(field),
                               field)
    path = rotated.save(tmp_path / "eeof.zarr")
    again = kpca_dask.rotate(kpca_dask.load(path))
    xr.testing.assert_allclose(again.components(), rotated.components())
    del zarr.open_group(path, mode="r+")["rotated_components"]
    with pytest.raises(ModelFormatError, match="'rotated_components' is missing"):
        kpca_dask.load(path)


def test_rotated_maps_of_another_shape_than_the_maps_are_refused(tmp_path):
    from kpca_dask.eof.estimator_copies import holding

    field = _field()
    model = ExtendedKernelEOF(2, tau=TAU, embedding=EMBEDDING).fit(field)
    rotated = kpca_dask.rotate(model, field)
    maps = rotated.components()
    wrong = holding(model, rotation=rotated.rotation, rotated_maps=maps.values[..., :-1])
    path = wrong.save(tmp_path / "eeof.zarr")
    with pytest.raises(ModelFormatError, match="rotated components do not fit"):
        kpca_dask.load(path)
