"""Saving and loading models: Zarr groups with JSON attributes, no pickle."""

from __future__ import annotations

import json
import uuid

import dask.array as da
import numpy as np
import pytest
import zarr

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.errors import InvalidParameterError, ModelFormatError, OutputExistsError
from kpca_dask.model.fitted import FITTED_ATTRIBUTES
from kpca_dask.storage.model_entries import REQUIRED_ARRAYS
from kpca_dask.storage.model_files import FORMAT_VERSION


def _data(n=300, p=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, p))


@pytest.fixture(scope="module")
def fitted():
    return KernelPCA(n_components=3, gamma=0.2, n_landmarks=60, random_state=0).fit(_data())


def _my_kernel(A, B):
    return A @ B.T


@pytest.mark.parametrize("kernel, extra", [
    ("rbf", {}),
    ("laplacian", {"gamma": 0.1}),
    ("polynomial", {"degree": 2, "coef0": 0.5}),
    ("matern", {"kernel_params": {"nu": 2.5}}),
    ("cosine", {}),
])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_round_trip_is_bitwise_identical(tmp_path, kernel, extra, dtype):
    """A loaded model transforms new data bitwise identically to the saved one."""
    X, X_new = _data(), _data(150, seed=1)
    model = KernelPCA(n_components=3, kernel=kernel, n_landmarks=50, dtype=dtype,
                      random_state=0, **extra).fit(X)
    loaded = kpca_dask.load(model.save(tmp_path / "model.zarr"))
    np.testing.assert_array_equal(loaded.transform(X_new), model.transform(X_new))
    lazy = da.from_array(X_new, chunks=(40, 4))
    np.testing.assert_array_equal(loaded.transform(lazy).compute(), model.transform(lazy).compute())
    assert loaded.get_params() == model.get_params()


def test_loaded_attributes_equal(tmp_path, fitted):
    """Every fitted attribute comes back with the same value."""
    loaded = kpca_dask.load(fitted.save(tmp_path / "model.zarr"))
    for name in FITTED_ATTRIBUTES:
        assert hasattr(loaded, name) == hasattr(fitted, name), name
        if not hasattr(fitted, name):
            continue
        value = getattr(fitted, name)
        if name == "statistics_":
            for field, part in vars(value).items():
                np.testing.assert_array_equal(getattr(loaded.statistics_, field), part,
                                              err_msg=field)
        else:
            np.testing.assert_array_equal(getattr(loaded, name), value, err_msg=name)


def test_store_layout_is_arrays_and_json(tmp_path, fitted):
    """The group holds the documented arrays and plain JSON attributes (no pickle)."""
    fitted.save(tmp_path / "model.zarr")
    group = zarr.open_group(str(tmp_path / "model.zarr"), mode="r")
    row_landmarks = {"landmark_indices"} if fitted.landmark_indices_ is not None else set()
    statistics = {"statistics_gram", "statistics_column_sums", "statistics_reference"}
    kept = set(REQUIRED_ARRAYS) | row_landmarks | statistics | {"novelty_weights",
                                                               "eigenvalue_residuals"}
    assert kept == set(group.array_keys())
    attrs = group.attrs.asdict()
    json.dumps(attrs)
    assert attrs["format_version"] == FORMAT_VERSION
    assert attrs["kpca_dask_version"] == kpca_dask.__version__
    assert attrs["params"]["gamma"] == 0.2 and attrs["params"]["n_landmarks"] == 60
    assert attrs["fitted"]["kernel_"] == "rbf"
    assert attrs["fitted"]["kernel_params_"] == {"gamma": 0.2}
    for name in ("n_samples_fit_", "n_features_in_", "trace_error_", "landmark_rank_",
                 "fit_seconds_"):
        assert name in attrs["fitted"]
    raw = b"".join(p.read_bytes() for p in (tmp_path / "model.zarr").rglob("*") if p.is_file())
    assert b"pickle" not in raw and b"\x80\x04\x95" not in raw


def test_explicit_landmarks_come_back_as_parameter(tmp_path):
    """A model fitted on explicit landmark points is saved; the points return as `landmarks`."""
    X = _data()
    model = KernelPCA(n_components=2, landmarks=X[:30], random_state=0).fit(X)
    loaded = kpca_dask.load(model.save(tmp_path / "model.zarr"))
    assert loaded.landmark_indices_ is None
    np.testing.assert_array_equal(loaded.get_params()["landmarks"], X[:30])
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


def test_generator_seed_is_not_saved(tmp_path):
    """A numpy Generator random_state cannot be stored; it is listed as unsaved."""
    model = KernelPCA(n_components=2, n_landmarks=30,
                      random_state=np.random.default_rng(0)).fit(_data())
    path = model.save(tmp_path / "model.zarr")
    assert zarr.open_group(path, mode="r").attrs["unsaved_params"] == ["random_state"]
    assert kpca_dask.load(path).random_state is None


def test_callable_kernel_cannot_be_saved(tmp_path):
    """A callable kernel is code, so saving refuses it and writes nothing."""
    model = KernelPCA(n_components=2, kernel=_my_kernel, n_landmarks=30).fit(_data())
    with pytest.raises(InvalidParameterError, match="callable kernel .*_my_kernel.* cannot be"):
        model.save(tmp_path / "model.zarr")
    assert list(tmp_path.iterdir()) == []


def test_unfitted_model_cannot_be_saved(tmp_path):
    """Saving before fit raises NotFittedError."""
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        KernelPCA().save(tmp_path / "model.zarr")


def test_overwrite_refused_without_flag(tmp_path, fitted):
    """Saving onto an existing model raises unless overwrite=True."""
    path = fitted.save(tmp_path / "model.zarr")
    other = KernelPCA(n_components=2, n_landmarks=20, random_state=1).fit(_data())
    with pytest.raises(OutputExistsError, match="exists already"):
        other.save(path)
    assert kpca_dask.load(path).n_components_ == 3
    other.save(path, overwrite=True)
    assert kpca_dask.load(path).n_components_ == 2


def _tamper(path, **attrs):
    group = zarr.open_group(str(path), mode="r+")
    for key, value in attrs.items():
        group.attrs[key] = value
    return group


def test_unknown_format_version(tmp_path, fitted):
    """A model from an unknown format version gives a clear ModelFormatError."""
    path = fitted.save(tmp_path / "model.zarr")
    _tamper(path, format_version=99)
    with pytest.raises(ModelFormatError, match="format version 99 .* reads format versions 1, 2"):
        kpca_dask.load(path)


@pytest.mark.parametrize("array", ["projection", "landmarks", "offset"])
def test_missing_array(tmp_path, fitted, array):
    """A model with an array missing gives a ModelFormatError naming it."""
    path = fitted.save(tmp_path / "model.zarr")
    del zarr.open_group(path, mode="r+")[array]
    with pytest.raises(ModelFormatError, match=f"damaged: {array} missing"):
        kpca_dask.load(path)


def test_not_a_model(tmp_path):
    """A Zarr group or array that is no model is refused as such."""
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(ModelFormatError, match="not a kpca-dask model"):
        kpca_dask.load(tmp_path / "g.zarr")
    zarr.create_array(str(tmp_path / "a.zarr"), shape=(2,), dtype="f8")
    with pytest.raises(ModelFormatError, match="not a kpca-dask model"):
        kpca_dask.load(tmp_path / "a.zarr")


def test_missing_model_path(tmp_path):
    """Loading from a path with nothing there raises FileNotFoundError."""
    with pytest.raises(FileNotFoundError, match="No model at"):
        kpca_dask.load(tmp_path / "nothing.zarr")


def test_attribute_names_are_checked(tmp_path, fitted):
    """A model file cannot set arbitrary (e.g. dunder) attributes on the estimator."""
    path = fitted.save(tmp_path / "model.zarr")
    group = zarr.open_group(path, mode="r+")
    group.attrs["fitted"] = {**group.attrs["fitted"], "__class__": "x"}
    with pytest.raises(ModelFormatError, match="invalid attribute name '__class__'"):
        kpca_dask.load(path)


def test_memory_url(fitted):
    """Models save to and load from a memory:// fsspec URL."""
    url = f"memory://kpca-dask-tests/{uuid.uuid4().hex}/model.zarr"
    fitted.save(url)
    X = _data(50, seed=3)
    np.testing.assert_array_equal(kpca_dask.load(url).transform(X), fitted.transform(X))
