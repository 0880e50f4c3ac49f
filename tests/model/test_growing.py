"""Fits that grow (docs/design.md §7): partial_fit, re-solving for another n_components,
merging shards, statistics in model files and checkpoints, version-1 files."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.checkpoints.statistics_files import read_statistics
from kpca_dask.errors import (
    InvalidInputError,
    InvalidParameterError,
    ModelMismatchError,
    NoStatisticsError,
    ZeroEigenvalueWarning,
)

N, P, M = 600, 3, 40


def _data(n=N, seed=0):
    return np.random.default_rng(seed).normal(size=(n, P))


_SAME = object()


def _refit(model, X, n_components=_SAME, **changes):
    """A fresh fit of X with the landmarks and gamma of ``model``."""
    params = {"n_components": model.n_components if n_components is _SAME else n_components,
              "kernel": model.kernel_, "gamma": model.gamma_, "landmarks": model.landmarks_,
              "dtype": model.dtype, **changes}
    return KernelPCA(**params).fit(X)


def _assert_same_model(model, reference, rtol):
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=rtol)
    np.testing.assert_allclose(model.explained_variance_ratio_,
                               reference.explained_variance_ratio_, rtol=rtol)
    scale = np.abs(reference.projection_).max()
    np.testing.assert_allclose(model.projection_, reference.projection_, rtol=0,
                               atol=rtol * scale)
    assert model.n_components_ == reference.n_components_
    assert model.n_samples_fit_ == reference.n_samples_fit_
    assert model.trace_error_ == pytest.approx(reference.trace_error_, rel=rtol, abs=1e-14)


@pytest.fixture(scope="module")
def fitted():
    return KernelPCA(n_components=3, gamma=0.5, n_landmarks=M, random_state=0).fit(_data())


def _version_one_file(model, path):
    """Save ``model``, then turn the file into one written before statistics were kept."""
    model.save(path)
    group = zarr.open_group(str(path), mode="r+")
    for name in list(group.array_keys()):
        if name.startswith("statistics_"):
            del group[name]
    attrs = group.attrs.asdict()
    del attrs["statistics"]
    attrs.pop("checksums")  # files of that version had no digests
    group.attrs.put({**attrs, "format_version": 1})
    return path


# -- the statistics are kept --------------------------------------------------


def test_fit_keeps_float64_statistics(fitted):
    """A fitted model keeps n, s, G, t and r in float64, n equal to the rows seen."""
    stats = fitted.statistics_
    assert stats.n_samples == N == fitted.n_samples_fit_
    assert stats.gram.shape == (M, M) and stats.gram.dtype == np.float64
    assert stats.column_sums.dtype == stats.reference.dtype == np.float64
    assert stats.diagonal_sum == pytest.approx(N)  # rbf: k(x, x) = 1


def test_checkpoint_total_is_the_model_statistics(tmp_path):
    """A checkpointed fit's finished total is stored, and read, as the model's statistics."""
    X = da.from_array(_data(), chunks=(100, P))
    model = KernelPCA(n_components=3, gamma=0.5, n_landmarks=M, random_state=0)
    model.fit(X, checkpoint=tmp_path / "fit.ckpt")
    group = zarr.open_group(str(tmp_path / "fit.ckpt"), mode="r")
    state = group[group.attrs["kpca_dask_checkpoint"]["state"]]
    total = read_statistics(state, state.attrs.asdict())
    saved = kpca_dask.load(model.save(tmp_path / "model.zarr")).statistics_
    for name in ("gram", "column_sums", "reference", "n_samples", "diagonal_sum"):
        np.testing.assert_array_equal(getattr(total, name), getattr(saved, name), err_msg=name)


# -- another n_components without a pass -------------------------------------


@pytest.mark.parametrize("n_components", [1, 7, 0.95, None])
def test_set_n_components_equals_a_fresh_fit(fitted, n_components):
    """Re-solving for n_components (int, eta or None) equals a fit with the same landmarks."""
    model = _refit(fitted, _data()).set_n_components(n_components)
    _assert_same_model(model, _refit(fitted, _data(), n_components=n_components), rtol=1e-12)
    assert model.n_components == n_components


def test_set_n_components_on_a_loaded_model(tmp_path, fitted):
    """A loaded model re-solves to the same model as the one it was saved from."""
    loaded = kpca_dask.load(fitted.save(tmp_path / "model.zarr")).set_n_components(0.9)
    _assert_same_model(loaded, _refit(fitted, _data(), n_components=0.9), rtol=1e-12)


def test_set_n_components_refused_leaves_the_model(fitted):
    """An invalid n_components is refused, and the model is unchanged."""
    model = _refit(fitted, _data())
    before = model.projection_.copy()
    with pytest.raises(InvalidParameterError, match="n_components"):
        model.set_n_components(2.5)
    np.testing.assert_array_equal(model.projection_, before)
    assert model.n_components == 3


@pytest.mark.parametrize("remove_zero_eig", [False, True])
def test_set_n_components_past_the_rank_follows_remove_zero_eig(remove_zero_eig):
    """More components than positive eigenvalues: the re-solve keeps zero components (with
    a warning) or drops them, exactly as a fit asking for as many does."""
    X = np.repeat(_data(n=20), 3, axis=0)  # 20 distinct rows: at most 19 positive eigenvalues
    model = KernelPCA(n_components=3, gamma=0.5, n_landmarks=M, landmarks="uniform",
                      remove_zero_eig=remove_zero_eig, random_state=0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZeroEigenvalueWarning)
        fresh = _refit(model, X, n_components=30, remove_zero_eig=remove_zero_eig)
    if remove_zero_eig:
        model.set_n_components(30)
    else:
        with pytest.warns(ZeroEigenvalueWarning):
            model.set_n_components(30)
    _assert_same_model(model, fresh, rtol=1e-12)
    assert model.n_components_ == (fresh.n_components_ if remove_zero_eig else 30)


# -- partial_fit -----------------------------------------------------------------


def _as_numpy(batch, tmp_path, i):
    return batch


def _as_dask(batch, tmp_path, i):
    return da.from_array(batch, chunks=(70, P))


def _as_xarray(batch, tmp_path, i):
    return xr.DataArray(batch, dims=("sample", "feature"))


def _as_zarr(batch, tmp_path, i):
    path = tmp_path / f"batch{i}.zarr"
    zarr.create_array(str(path), data=batch, chunks=(100, P))
    return str(path)


@pytest.mark.parametrize("kind", [_as_numpy, _as_dask, _as_xarray, _as_zarr])
def test_partial_fit_equals_fit_on_the_concatenation(tmp_path, kind):
    """After batches of any input kind the model equals a fit on them all (1e-10)."""
    X = _data(900)
    batches = np.array_split(X, [250, 260, 700])
    model = KernelPCA(n_components=4, gamma="median", n_landmarks=M, random_state=1)
    for i, batch in enumerate(batches):
        model.partial_fit(kind(batch, tmp_path, i))
    _assert_same_model(model, _refit(model, X), rtol=1e-10)
    assert model.n_samples_fit_ == 900


def test_first_partial_fit_is_a_fit(fitted):
    """The first call chooses landmarks and gamma from its batch, as fit does."""
    first = KernelPCA(n_components=3, gamma=0.5, n_landmarks=M, random_state=0)
    first.partial_fit(_data())
    np.testing.assert_array_equal(first.landmarks_, fitted.landmarks_)
    np.testing.assert_array_equal(first.eigenvalues_, fitted.eigenvalues_)


def test_partial_fit_usable_after_every_call(tmp_path, fitted):
    """After each batch the model transforms and saves (the file transforms bit for bit the
    same); the saved file takes the next batch, and the last is the fit of all 500 rows."""
    batches = [_data(200)] + [_data(100, seed=10 + i) for i in range(3)]
    model = _refit(fitted, batches[0])
    X_new = _data(50, seed=3)
    for i, batch in enumerate(batches[1:]):
        model.partial_fit(batch)
        Y = model.transform(X_new)
        model = kpca_dask.load(model.save(tmp_path / f"model{i}.zarr"))
        np.testing.assert_array_equal(model.transform(X_new), Y)
    assert model.n_samples_fit_ == 500
    _assert_same_model(model, _refit(fitted, np.vstack(batches)), rtol=1e-10)


def test_partial_fit_with_other_features_is_refused(fitted):
    """A batch with another number of features gives InvalidInputError; no change."""
    model = _refit(fitted, _data())
    with pytest.raises(InvalidInputError, match="X has 5 features, but KernelPCA is expecting 3"):
        model.partial_fit(np.ones((10, 5)))
    assert model.n_samples_fit_ == N


# -- merging shards ---------------------------------------------------------------


def test_merge_equals_fit_on_the_union(fitted):
    """Models fitted on disjoint shards with the same landmarks merge into the union's fit."""
    X = _data(1000, seed=5)
    shards = [_refit(fitted, part) for part in np.array_split(X, [300, 310, 800])]
    merged = kpca_dask.merge(shards)
    _assert_same_model(merged, _refit(fitted, X), rtol=1e-10)
    assert shards[0].n_samples_fit_ == 300  # the inputs are unchanged


@pytest.mark.parametrize("change, named", [
    ({"gamma": 0.25}, "kernel parameter gamma is 0.5 in one model but 0.25"),
    ({"kernel": "laplacian"}, "the kernel is 'rbf' in one model but 'laplacian'"),
    ({"dtype": "float32"}, "dtype is 'float64' in one model but 'float32'"),
    ({"rcond": 1e-6}, "rcond is 1e-10 in one model but 1e-06"),
])
def test_merge_refuses_other_parameters(fitted, change, named):
    """Models with another kernel, kernel parameter, dtype or rcond are refused, named."""
    other = _refit(fitted, _data(100, seed=7), **change)
    with pytest.raises(ModelMismatchError, match=f"model 1 cannot be merged with model 0: {named}"):
        kpca_dask.merge([_refit(fitted, _data()), other])


def test_merge_refuses_other_landmarks(fitted):
    """Models with other landmarks are refused, with how many landmarks differ."""
    other = KernelPCA(n_components=3, gamma=0.5, n_landmarks=M, random_state=9).fit(_data())
    with pytest.raises(ModelMismatchError, match=r"the landmarks differ \(\d+ of 40"):
        kpca_dask.merge([fitted, other])


# -- version-1 model files -------------------------------------------------------


def test_version_one_file_loads_and_transforms(tmp_path, fitted):
    """A format-version-1 file (no statistics) loads and transforms as before."""
    loaded = kpca_dask.load(_version_one_file(fitted, tmp_path / "v1.zarr"))
    assert loaded.statistics_ is None
    np.testing.assert_array_equal(loaded.transform(_data(20)), fitted.transform(_data(20)))


@pytest.mark.parametrize("action", [
    lambda model: model.set_n_components(2),
    lambda model: model.partial_fit(_data(10)),
    lambda model: kpca_dask.merge([model, model]),
])
def test_version_one_file_cannot_grow(tmp_path, fitted, action):
    """Re-solving, adding rows or merging a version-1 model says it keeps no statistics."""
    loaded = kpca_dask.load(_version_one_file(fitted, tmp_path / "v1.zarr"))
    with pytest.raises(NoStatisticsError, match="keeps no pass statistics .* version 1"):
        action(loaded)


def test_partial_fit_on_a_process_cluster_matches_threads(fitted, process_cluster):
    """Batches computed on a LocalCluster with 2 worker processes give the threads' model."""
    from distributed import Client

    batches = [da.from_array(_data(300, seed=20 + i), chunks=(100, P)) for i in range(2)]
    threaded = _refit(fitted, _data(200))
    for batch in batches:
        threaded.partial_fit(batch)
    distributed = _refit(fitted, _data(200))
    with Client(process_cluster):
        for batch in batches:
            distributed.partial_fit(batch)
    _assert_same_model(distributed, threaded, rtol=1e-10)


def test_growing_keeps_the_novelty_score_and_drops_the_preimage_map():
    """After partial_fit the novelty score follows the new statistics (equal to a refit's),
    and a pre-image map, learnt from the old solution's pass, is dropped, not left stale."""
    from kpca_dask.errors import NotInvertibleError

    X = _data()
    model = KernelPCA(n_components=3, gamma=0.5, n_landmarks=M, random_state=0,
                      fit_inverse_transform=True).fit(X[:400])
    model.partial_fit(X[400:])
    fresh = _refit(model, X)
    np.testing.assert_allclose(model.reconstruction_error(X[:50]),
                               fresh.reconstruction_error(X[:50]), rtol=1e-8, atol=1e-12)
    with pytest.raises(NotInvertibleError, match="re-solved, updated or merged"):
        model.inverse_transform(model.transform(X[:5]))
