"""The model file's schema is the fitted model's declarations: nothing else lists its fields."""

from __future__ import annotations

import dataclasses

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.model.fitted import DECLARED, FittedModel, Stored, declared, stored
from kpca_dask.storage.model_entries import (
    MODEL_ARRAYS,
    MODEL_ATTRIBUTES,
    file_entries,
    model_from_entries,
)

#: The names model files have held since format version 3: new files keep them.
FILE_ARRAYS = {"landmarks", "landmark_indices", "projection", "offset", "eigenvalues",
               "explained_variance_ratio", "eigenvalue_residuals", "novelty_weights",
               "preimage_centres", "preimage_coefficients", "feature_weights", "feature_kept"}
FILE_ATTRIBUTES = {"kernel_", "kernel_params_", "gamma_", "n_landmarks_", "landmark_rank_",
                   "n_components_", "trace_error_", "trace_error_std_", "n_features_in_",
                   "n_samples_fit_", "novelty_mean_norm2_", "landmark_path_", "fit_seconds_",
                   "row_provenance_", "feature_names_in_", "fit_settings_", "feature_layout_"}
#: A rotation's (kpca_dask.rotate), written only by models that hold one.
FILE_ARRAYS |= {"rotation_matrix", "rotation_correlation", "rotation_order", "rotation_signs",
                "rotation_explained_variance", "rotation_loadings"}
FILE_ATTRIBUTES |= {"rotation_method_", "rotation_power_", "rotation_total_variance_"}
#: The pre-image map's intercept, alpha and score, written since the map has an intercept.
FILE_ARRAYS |= {"preimage_intercept"}
FILE_ATTRIBUTES |= {"inverse_alpha_", "inverse_alpha_score_"}
#: The linear kernel's exact total, written since its pass adds up the rows.
FILE_ATTRIBUTES |= {"centred_trace_"}


@pytest.fixture(scope="module")
def models() -> list[KernelPCA]:
    """Fits that between them learn every part a model can have."""
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    values = rng.normal(size=(40, 4, 5))
    values[:, 0, 0] = np.nan
    field = xr.DataArray(da.from_array(values, chunks=(10, 4, 5)), dims=("time", "lat", "lon"),
                         coords={"lat": np.linspace(-30.0, 30.0, 4)})
    weights = np.sqrt(np.cos(np.deg2rad(field.lat)))
    rotated = kpca_dask.rotate(KernelPCA(n_components=2, n_landmarks=15, landmarks="kmeans",
                                         weights=weights, random_state=0).fit(field),
                               field, method="promax").estimator  # the copy holding it
    other = xr.DataArray(rng.normal(size=(40, 3)), dims=("time", "x"), name="other")
    return [
        KernelPCA(n_components=2, n_landmarks="auto", tol=0.1, gamma=0.5, landmarks="uniform",
                  fit_inverse_transform=True, random_state=0).fit(table),
        rotated,
        KernelPCA(n_components=2, n_landmarks=15, weights=[weights, None],
                  random_state=0).fit([field.rename("field"), other]),
        KernelPCA(n_components=2, kernel="linear", n_landmarks=2, random_state=0).fit(table),
    ]


def _equal(first, second) -> bool:
    if dataclasses.is_dataclass(first):
        return type(first) is type(second) and all(
            _equal(getattr(first, f.name), getattr(second, f.name))
            for f in dataclasses.fields(first))
    if isinstance(first, dict):
        return (isinstance(second, dict) and first.keys() == second.keys()
                and all(_equal(first[key], second[key]) for key in first))
    if isinstance(first, (list, tuple)):  # JSON keeps a tuple as a list
        return (isinstance(second, (list, tuple)) and len(first) == len(second)
                and all(_equal(a, b) for a, b in zip(first, second)))
    if isinstance(first, np.ndarray) or isinstance(second, np.ndarray):
        return np.array_equal(np.asarray(first), np.asarray(second))
    return type(first) is type(second) and first == second


def test_every_field_is_declared():
    """Every field of the model, and of each value rebuilt from parts, declares how it is kept:
    a field added without a declaration fails here."""
    for each in dataclasses.fields(FittedModel):
        assert isinstance(each.metadata.get("stored"), Stored), each.name
    for each in DECLARED:
        if each.declaration.build is not None:
            fields = {f.name for f in dataclasses.fields(each.declaration.build)}
            assert fields == {name for name, _ in each.declaration.parts}, each.path


def test_file_names_are_those_files_hold():
    """The declarations give a model file the arrays and attributes it has always had."""
    assert set(MODEL_ARRAYS) == FILE_ARRAYS
    assert set(MODEL_ATTRIBUTES) == FILE_ATTRIBUTES


def test_every_declared_value_round_trips(models, tmp_path):
    """Save and load give back every declared value of the model; between them the fits
    learn each one (so a new declared field must be learnt by a fit here to pass)."""
    learnt = set()
    for i, model in enumerate(models):
        loaded = kpca_dask.load(model.save(tmp_path / f"model{i}.zarr"))
        for each in DECLARED:
            if not each.declaration.place:
                continue
            value = each.read(model.model_)
            assert _equal(each.read(loaded.model_), value), each.path
            if value is not None:
                learnt.add(each.path)
    assert learnt == {each.path for each in DECLARED if each.declaration.place}


def test_a_new_declared_field_is_written_and_read_with_no_other_edit(models):
    """A field declared on a model class is written to and read from a file's fields by the
    storage layer as it stands."""
    extended = dataclasses.make_dataclass(
        "ExtendedModel",
        [("note", str, dataclasses.field(default="", metadata=stored("note_", "json"))),
         ("scales", np.ndarray | None, dataclasses.field(
             default=None, metadata=stored("scales_", "array", shape=("m",), absent="omitted",
                                           since=None)))],
        bases=(FittedModel,), frozen=True)
    base = models[0].model_
    values = {f.name: getattr(base, f.name) for f in dataclasses.fields(FittedModel)}
    model = extended(**values, note="hello", scales=np.arange(base.n_landmarks, dtype=float))
    arrays, attributes = file_entries(model)
    assert attributes["note_"] == "hello" and "scales" in arrays
    back = model_from_entries(arrays, attributes, model.statistics, cls=extended)
    assert back.note == "hello" and _equal(back.scales, model.scales)
    assert {"note_", "scales_"} <= {each.declaration.attribute for each in declared(extended)}
