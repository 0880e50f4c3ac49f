"""Saving and loading ExactKernelPCA models: the rows copied in, everything checked on load."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import kpca_dask
from kpca_dask import ExactKernelPCA
from kpca_dask.errors import InvalidParameterError, ModelFormatError


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(250, 4))


@pytest.fixture(scope="module")
def new():
    return np.random.default_rng(1).normal(size=(20, 4))


def test_a_matrix_free_model_round_trips(tmp_path, X, new):
    """transform, scores and every fitted attribute of the loaded model are the saved one's; its
    rows and eigenvectors are read lazily from the file, which stands alone."""
    model = ExactKernelPCA(n_components=3, gamma=0.2, eigen_solver="matrix-free").fit(X)
    path = model.save(tmp_path / "exact.zarr")
    loaded = kpca_dask.load(path)
    assert isinstance(loaded, ExactKernelPCA)
    np.testing.assert_array_equal(loaded.transform(new), model.transform(new))
    np.testing.assert_array_equal(loaded.reconstruction_error(new),
                                  model.reconstruction_error(new))
    for name in ("eigenvalues_", "explained_variance_ratio_", "eigenvalue_residuals_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
    assert (loaded.n_products_, loaded.eigen_solver_, loaded.kernel_params_) == (
        model.n_products_, "matrix-free", model.kernel_params_)
    assert loaded.get_params() == model.get_params()
    assert isinstance(loaded.eigenvectors_, da.Array) and isinstance(loaded.X_fit_, da.Array)
    np.testing.assert_array_equal(loaded.X_fit_.compute(), X)


def test_a_dense_model_of_lazy_rows_round_trips(tmp_path, X, new):
    """A dense fit (its rows a dask array, T-mode) saves its rows and centring; the loaded
    model transforms by panels to the dense model's values."""
    model = ExactKernelPCA(n_components=3, kernel="laplacian", gamma=0.1).fit(
        da.from_array(X, chunks=(100, 2)))
    loaded = kpca_dask.load(model.save(tmp_path / "dense.zarr"))
    assert loaded.eigen_solver_ == "dense" and not hasattr(loaded, "eigenvalue_residuals_")
    np.testing.assert_allclose(loaded.transform(new), model.transform(new), atol=1e-12)
    np.testing.assert_allclose(loaded.reconstruction_error(new),
                               model.reconstruction_error(new), atol=1e-12)


def test_a_loaded_model_projects_lazy_rows_run_by_run(tmp_path, X, new):
    """Lazy new rows in several blocks against the file's row panels: lazy scores and errors,
    made by one task per run of new rows (the panels read inside it), equal to those of the
    rows in memory."""
    model = ExactKernelPCA(n_components=3, gamma=0.2).fit(da.from_array(X, chunks=(100, 4)))
    loaded = kpca_dask.load(model.save(tmp_path / "dense.zarr"))
    assert loaded.X_fit_.numblocks[0] > 1  # several training panels
    lazy = da.from_array(new, chunks=(5, 4))
    scores, errors = loaded.transform(lazy), loaded.reconstruction_error(lazy)
    assert isinstance(scores, da.Array) and isinstance(errors, da.Array)
    runs = [key for key in dict(scores.__dask_graph__()) if str(key).startswith("_run-")]
    assert len(runs) == 1  # the 20 rows are one run, whatever their 4 blocks
    np.testing.assert_allclose(scores.compute(), model.transform(new), atol=1e-12)
    np.testing.assert_allclose(errors.compute(), model.reconstruction_error(new), atol=1e-12)


def test_a_field_model_keeps_its_layout(tmp_path):
    """A weighted DataArray fit: the loaded model takes the field and labels its output."""
    field = xr.DataArray(np.random.default_rng(2).normal(size=(80, 3, 2)),
                         dims=("time", "lat", "lon"), coords={"time": np.arange(80)})
    weights = xr.DataArray([0.5, 1.0, 0.5], dims="lat")
    model = ExactKernelPCA(n_components=2, gamma=0.1, weights=weights,
                           eigen_solver="matrix-free").fit(field)
    loaded = kpca_dask.load(model.save(tmp_path / "field.zarr"))
    Y = loaded.transform(field[:5])
    assert Y.dims == ("time", "mode")
    np.testing.assert_allclose(Y.values, model.transform(field[:5]).values, atol=1e-13)


def test_rows_changed_since_the_save_are_refused_by_name(tmp_path, X):
    model = ExactKernelPCA(n_components=2, eigen_solver="matrix-free").fit(X)
    path = model.save(tmp_path / "exact.zarr")
    zarr.open_group(path)["rows"][3, 1] = 7.0  # fresh chunk checksums, an old digest
    with pytest.raises(ModelFormatError, match=r"exact\.zarr: the array 'rows' differs"):
        kpca_dask.load(path)


def test_edited_attributes_are_refused(tmp_path, X):
    path = ExactKernelPCA(n_components=2).fit(X).save(tmp_path / "exact.zarr")
    group = zarr.open_group(path)
    fitted = dict(group.attrs["fitted"], grand_mean=0.0)
    group.attrs["fitted"] = fitted
    with pytest.raises(ModelFormatError, match="attributes differ"):
        kpca_dask.load(path)


@pytest.mark.parametrize(("kernel", "data", "match"), [
    (lambda A, B: A @ B.T, "rows", "callable kernel"),
    ("precomputed", "kernel", "holds no training rows"),
])
def test_models_a_file_cannot_hold_are_refused(tmp_path, X, kernel, data, match):
    model = ExactKernelPCA(n_components=2, kernel=kernel).fit(X if data == "rows" else X @ X.T)
    with pytest.raises(InvalidParameterError, match=match):
        model.save(tmp_path / "exact.zarr")
