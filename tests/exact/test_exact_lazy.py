"""ExactKernelPCA of lazy wide data (T-mode): the Gram summed over feature chunks."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

from kpca_dask import ExactKernelPCA
from kpca_dask.errors import InsufficientMemoryError, NonFiniteInputError


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(3).normal(size=(120, 40)) + np.linspace(0.0, 4.0, 40)


def _close(got, expected, rtol=1e-10):
    np.testing.assert_allclose(got, expected, rtol=0, atol=rtol * np.abs(expected).max())


@pytest.mark.parametrize(("kernel", "params"), [
    ("rbf", {"gamma": 0.01}), ("laplacian", {"gamma": 0.005}), ("linear", {}),
    ("cosine", {}), ("polynomial", {"gamma": 0.01, "degree": 2}),
    ("matern", {"gamma": 0.01, "kernel_params": {"nu": 1.5}})])
def test_lazy_input_equals_the_dense_exact_fit(data, kernel, params):
    """Embeddings, transform and reconstruction errors of a dask array chunked along the
    features equal those of the same rows in memory, to 1e-10."""
    dense = ExactKernelPCA(n_components=6, kernel=kernel, **params)
    lazy = ExactKernelPCA(n_components=6, kernel=kernel, **params)
    X = da.from_array(data, chunks=(50, (9, 21, 10)))
    _close(lazy.fit_transform(X), dense.fit_transform(data))
    _close(lazy.eigenvalues_, dense.eigenvalues_)
    _close(lazy.transform(data[:9]), dense.transform(data[:9]))
    _close(lazy.transform(X[:9]), dense.transform(data[:9]))
    _close(lazy.reconstruction_error(data[:9]), dense.reconstruction_error(data[:9]))
    assert isinstance(lazy.X_fit_, da.Array)


def test_zarr_and_dataarray_input(tmp_path, data):
    """A Zarr store chunked along the features and a dask-backed DataArray fit lazily."""
    path = tmp_path / "x.zarr"
    zarr.create_array(path, data=data, chunks=(40, 16))
    expected = ExactKernelPCA(n_components=4, gamma=0.01).fit_transform(data)
    _close(ExactKernelPCA(n_components=4, gamma=0.01).fit_transform(str(path)), expected)
    field = xr.DataArray(da.from_array(data, chunks=(60, 10)), dims=("time", "space"))
    _close(ExactKernelPCA(n_components=4, gamma=0.01).fit_transform(field), expected)


def test_gram_beyond_memory_is_refused_with_its_size(data):
    """An n x n matrix that the memory available cannot hold is one clear error for the dense
    solver, which names the matrix-free one."""
    X = da.from_array(data, chunks=(50, 10))
    with dask.config.set({"kpca-dask.memory-limit": 100_000}):
        with pytest.raises(InsufficientMemoryError,
                           match=r"120 x 120 kernel matrix.*112\.50 kiB.*matrix-free"):
            ExactKernelPCA(n_components=2, eigen_solver="dense").fit(X)


def test_nonfinite_lazy_value_is_named_by_row(data):
    """A NaN in the lazy data is reported with its row."""
    bad = data.copy()
    bad[77, 33] = np.inf
    with pytest.raises(NonFiniteInputError, match="row 77"):
        ExactKernelPCA(n_components=2).fit(da.from_array(bad, chunks=(50, 10)))


def test_lazy_rows_chunked_along_the_features_are_joined_with_a_warning():
    """patterns of lazy rows in several feature chunks, against a model of rows in memory,
    joins each block's rows (each task projects whole rows) and says so; the maps are the
    in-memory rows' maps."""
    from dask.array.core import PerformanceWarning

    X = np.random.default_rng(0).normal(size=(40, 6))
    model = ExactKernelPCA(2, gamma=0.5).fit(X)
    with pytest.warns(PerformanceWarning, match="2 chunks along the features"):
        maps = model.patterns(da.from_array(X, chunks=(20, 3)))
    np.testing.assert_allclose(maps.compute(), model.patterns(X), rtol=1e-12)
