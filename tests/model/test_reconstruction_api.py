"""KernelPCA.inverse_transform, reconstruction_error and score_samples: input and output
types, errors, and the pre-image map in saved models."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from sklearn.exceptions import NotFittedError

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.errors import (
    InvalidInputError,
    InvalidParameterError,
    NonFiniteInputError,
    NotInvertibleError,
)


def _data(n=300, p=4, seed=0):
    return np.random.default_rng(seed).normal(size=(n, p))


@pytest.fixture(scope="module")
def invertible():
    return KernelPCA(n_components=3, gamma=0.2, n_landmarks=60, random_state=0,
                     fit_inverse_transform=True, alpha=0.1).fit(_data())


@pytest.fixture(scope="module")
def plain():
    return KernelPCA(n_components=3, gamma=0.2, n_landmarks=60, random_state=0).fit(_data())


def test_numpy_in_numpy_out(invertible):
    """numpy embeddings give numpy pre-images, numpy rows give numpy errors."""
    X = _data(20, seed=1)
    X_hat = invertible.inverse_transform(invertible.transform(X))
    errors = invertible.reconstruction_error(X)
    assert isinstance(X_hat, np.ndarray) and X_hat.shape == (20, 4)
    assert isinstance(errors, np.ndarray) and errors.shape == (20,) and (errors >= 0).all()
    np.testing.assert_array_equal(invertible.score_samples(X), -errors)


def test_dask_in_lazy_dask_out_equal_to_numpy(invertible):
    """dask input gives lazy dask output with the same row chunks and the numpy values."""
    X = _data(50, seed=1)
    Y = da.from_array(invertible.transform(X), chunks=(20, 3))
    X_hat = invertible.inverse_transform(Y)
    assert isinstance(X_hat, da.Array) and X_hat.chunks == ((20, 20, 10), (4,))
    np.testing.assert_allclose(X_hat.compute(), invertible.inverse_transform(Y.compute()),
                               rtol=1e-12)


def test_data_array_keeps_sample_coordinates(invertible):
    """A DataArray embedding gives a DataArray with the sample coordinates and a feature dim;
    a DataArray of rows gives errors labelled by sample."""
    rows = xr.DataArray(_data(10, seed=1), dims=("time", "channel"),
                        coords={"time": np.arange(100, 110)})
    Y = invertible.transform(rows)
    X_hat = invertible.inverse_transform(Y)
    assert X_hat.dims == ("time", "feature") and X_hat.shape == (10, 4)
    assert X_hat.coords["time"].values.tolist() == list(range(100, 110))
    errors = invertible.reconstruction_error(rows)
    assert errors.dims == ("time",) and errors.coords["time"].values[0] == 100
    np.testing.assert_allclose(errors.values, invertible.reconstruction_error(rows.values))


def test_wrong_number_of_components(invertible):
    """An embedding with the wrong number of columns is refused, naming both numbers."""
    with pytest.raises(InvalidInputError, match="2 column.*3 components"):
        invertible.inverse_transform(np.zeros((5, 2)))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_embedding(invertible, bad):
    """NaN or inf in an embedding is a NonFiniteInputError, for numpy and dask input."""
    Y = np.zeros((6, 3))
    Y[4, 1] = bad
    with pytest.raises(NonFiniteInputError):
        invertible.inverse_transform(Y)
    with pytest.raises(NonFiniteInputError, match="row 4"):
        invertible.inverse_transform(da.from_array(Y, chunks=(3, 3))).compute()


def test_nonfinite_rows_to_score(invertible):
    """NaN in rows to score is a NonFiniteInputError naming the row."""
    X = _data(6, seed=1)
    X[5, 0] = np.nan
    with pytest.raises(NonFiniteInputError, match="row 5"):
        invertible.reconstruction_error(da.from_array(X, chunks=(2, 4))).compute()


def test_inverse_before_fit():
    """inverse_transform and reconstruction_error before fit raise NotFittedError."""
    with pytest.raises(NotFittedError):
        KernelPCA(fit_inverse_transform=True).inverse_transform(np.zeros((2, 3)))
    with pytest.raises(NotFittedError):
        KernelPCA().reconstruction_error(np.zeros((2, 3)))


def test_inverse_without_preimage_map_names_the_parameter(plain):
    """A model fitted without the map says to fit with fit_inverse_transform=True."""
    with pytest.raises(NotInvertibleError, match="fit_inverse_transform=True"):
        plain.inverse_transform(np.zeros((2, 3)))


def test_refit_without_the_map_drops_it():
    """Refitting with fit_inverse_transform=False leaves no stale pre-image map behind."""
    model = KernelPCA(n_components=2, n_landmarks=30, random_state=0,
                      fit_inverse_transform=True).fit(_data())
    model.set_params(fit_inverse_transform=False).fit(_data())
    with pytest.raises(NotInvertibleError):
        model.inverse_transform(np.zeros((2, 2)))


@pytest.mark.parametrize("alpha", [-1.0, np.nan, np.inf, "big", True])
def test_bad_alpha(alpha):
    """alpha must be a finite number >= 0 or "auto": otherwise a clear error before any
    pass."""
    with pytest.raises(InvalidParameterError, match="alpha must be"):
        KernelPCA(fit_inverse_transform=True, alpha=alpha).fit(_data())


def test_callable_kernel_has_a_diagonal():
    """A callable kernel gets k(x, x) from square blocks: its errors equal the named kernel's."""
    def linear(A, B):
        return A @ B.T

    X = _data()
    named = KernelPCA(n_components=2, kernel="linear", n_landmarks=50, landmarks="uniform",
                      random_state=0).fit(X)
    custom = KernelPCA(n_components=2, kernel=linear, n_landmarks=50, landmarks="uniform",
                       random_state=0).fit(X)
    np.testing.assert_allclose(custom.reconstruction_error(X), named.reconstruction_error(X),
                               rtol=1e-10)


def test_preimage_map_survives_save_and_load(tmp_path, invertible):
    """A saved model keeps the pre-image map: bitwise equal pre-images and errors."""
    loaded = kpca_dask.load(invertible.save(tmp_path / "model.zarr"))
    X = _data(30, seed=1)
    Y = invertible.transform(X)
    np.testing.assert_array_equal(loaded.inverse_transform(Y), invertible.inverse_transform(Y))
    np.testing.assert_array_equal(loaded.reconstruction_error(X),
                                  invertible.reconstruction_error(X))
    group = zarr.open_group(str(tmp_path / "model.zarr"), mode="r")
    assert {"preimage_centres", "preimage_coefficients",
            "preimage_intercept"} <= set(group.array_keys())
    assert group.attrs["params"]["fit_inverse_transform"] is True
    assert group.attrs["fitted"]["inverse_alpha_"] == 0.1


def test_map_saved_without_an_intercept_loads_and_gives_what_it_gave(tmp_path, invertible):
    """A model file written before the map had an intercept (no preimage_intercept, no
    inverse_alpha_) still loads, and its pre-images are those of its coefficients alone."""
    from _model_files import rewritten_attributes

    path = invertible.save(tmp_path / "model.zarr")
    del zarr.open_group(path, mode="r+")["preimage_intercept"]

    def as_before(attrs):
        for name in ("inverse_alpha_", "inverse_alpha_score_"):
            attrs["fitted"].pop(name)
        attrs["checksums"]["arrays"].pop("preimage_intercept")

    rewritten_attributes(path, as_before)
    old = kpca_dask.load(path)
    assert not hasattr(old, "preimage_intercept_") and not hasattr(old, "inverse_alpha_")
    Y = invertible.transform(_data(10, seed=1))
    np.testing.assert_allclose(old.inverse_transform(Y),
                               invertible.inverse_transform(Y) - invertible.preimage_intercept_,
                               rtol=1e-12, atol=1e-12)


def test_version_1_model_still_loads(tmp_path, plain):
    """A model file of format version 1 loads and transforms; asked to invert it says how."""
    path = plain.save(tmp_path / "model.zarr")
    group = zarr.open_group(path, mode="r+")
    del group["novelty_weights"]  # version 1 had neither these nor the pre-image arrays
    attrs = group.attrs.asdict()
    attrs["format_version"] = 1
    for name in ("fit_inverse_transform", "alpha"):
        attrs["params"].pop(name)
    attrs["fitted"].pop("novelty_mean_norm2_")
    attrs.pop("checksums")  # files of that version had no digests
    group.attrs.put(attrs)
    old = kpca_dask.load(path)
    X = _data(10, seed=1)
    np.testing.assert_array_equal(old.transform(X), plain.transform(X))
    with pytest.raises(NotInvertibleError, match="fit_inverse_transform=True"):
        old.inverse_transform(np.zeros((2, 3)))
    with pytest.raises(NotInvertibleError, match="fit it again"):
        old.reconstruction_error(X)
