"""Kernel MCA and CCA with a linear kernel and every sample a landmark are xeofs' linear MCA
and CCA (docs/design.md §20): singular values, fractions, scores and maps to 1e-8."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import kpca_dask
from kpca_dask import KernelCCA, KernelMCA

xe = pytest.importorskip("xeofs")
pytest.importorskip("statsmodels")  # xeofs' cross-set models import it

N = 120


def _fields(nan_box: bool = True):
    """Two fields sharing 120 time steps: a (time, lat, lon) field with a NaN land box and
    latitudes for √cos(lat) weights, and a (time, station) field; three shared signals."""
    rng = np.random.default_rng(0)
    signals = rng.normal(size=(N, 3))
    lat, lon = np.linspace(-60, 60, 4), np.linspace(0, 300, 3)
    x = (signals @ rng.normal(size=(3, 12)) + 0.5 * rng.normal(size=(N, 12))).reshape(N, 4, 3)
    if nan_box:
        x[:, 0, 0] = np.nan
    y = signals @ rng.normal(size=(3, 10)) + 0.5 * rng.normal(size=(N, 10))
    time = np.arange(N)
    X = xr.DataArray(x, dims=("time", "lat", "lon"),
                     coords={"time": time, "lat": lat, "lon": lon}, name="sst")
    Y = xr.DataArray(y, dims=("time", "station"),
                     coords={"time": time, "station": np.arange(10)}, name="slp")
    return X, Y


def _aligned(ours, theirs):
    """``theirs`` (mode first) with each mode's sign made that of ``ours``."""
    theirs = theirs.transpose(*ours.dims)
    axis = ours.dims.index("mode")
    flat_ours = np.moveaxis(np.nan_to_num(ours.values), axis, 0).reshape(ours.sizes["mode"], -1)
    flat_theirs = np.moveaxis(np.nan_to_num(theirs.values), axis, 0).reshape(
        ours.sizes["mode"], -1)
    signs = np.sign(np.sum(flat_ours * flat_theirs, axis=1))
    return theirs * xr.DataArray(signs, dims="mode", coords={"mode": theirs["mode"]})


@pytest.fixture(scope="module")
def mca_pair():
    X, Y = _fields()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = xe.cross.MCA(n_modes=3, use_pca=False, use_coslat=[True, False],
                              solver="full").fit(X, Y, "time")
    ours = KernelMCA(3, kernel="linear", n_landmarks=N, weights=("coslat", None),
                     sample_dim="time").fit(X, Y)
    return X, Y, ours, theirs


def test_mca_singular_values_and_fractions_are_xeofs(mca_pair):
    _, _, ours, theirs = mca_pair
    np.testing.assert_allclose(ours.singular_values_, theirs.data["singular_values"].values,
                               rtol=1e-8)
    with warnings.catch_warnings():  # xeofs' own use of xarray's renamed argument
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        fractions = theirs.squared_covariance_fraction().values
    np.testing.assert_allclose(ours.squared_covariance_fraction_, fractions, rtol=1e-8)
    spectrum = ours.spectrum()
    assert spectrum.index.tolist() == [1, 2, 3]


def test_mca_scores_and_maps_are_xeofs(mca_pair):
    X, Y, ours, theirs = mca_pair
    a, b = ours.transform(X, Y)
    assert a.dims == ("time", "mode") and a["mode"].values.tolist() == [1, 2, 3]
    for mine, their in zip((a, b), theirs.scores()):
        np.testing.assert_allclose(mine.values, _aligned(mine, their).values, atol=1e-8)
    homogeneous, heterogeneous = (ours.homogeneous_patterns(X, Y, pvalues=True),
                                  ours.heterogeneous_patterns(X, Y, pvalues=True))
    for ours_maps, their_maps in (
            (ours.components(X, Y), theirs.components()),
            (homogeneous[0], theirs.homogeneous_patterns()[0]),
            (heterogeneous[0], theirs.heterogeneous_patterns()[0])):
        for mine, their in zip(ours_maps, their_maps):
            assert set(mine.dims) == set(their.dims)
            assert np.isnan(mine.values).sum() == np.isnan(their.values).sum()
            np.testing.assert_allclose(mine.values, _aligned(mine, their).values, atol=1e-8)
    for mine, their in ((homogeneous[1], theirs.homogeneous_patterns()[1]),
                        (heterogeneous[1], theirs.heterogeneous_patterns()[1])):
        for p_mine, p_their in zip(mine, their):  # p-values have no sign to align
            np.testing.assert_allclose(p_mine.values, p_their.transpose(*p_mine.dims).values,
                                       rtol=1e-8, atol=1e-14)


@pytest.mark.parametrize("n_pca_modes", [(10, 9), (11, None)])
def test_cca_is_xeofs_on_the_same_pcs(n_pca_modes):
    """xeofs whitens with 1/n and correlates with 1/(n - 1): its correlations are ours times
    n/(n - 1), its scores ours times sqrt(n/(n - 1)). Its pre-truncating PCA is exact when it
    keeps more than 0.8 of a field's rank (its randomized SVD otherwise)."""
    X, Y = _fields(nan_box=False)
    pcs = [p if p is not None else "all" for p in n_pca_modes]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = xe.cross.CCA(n_modes=3, use_pca=True, n_pca_modes=pcs,
                              solver="full").fit(X, Y, "time")
    # ~20 PCs of 120 samples: independent fields would correlate near 0.55, and it says so.
    with pytest.warns(kpca_dask.CanonicalOverfitWarning, match="PCs of 120 samples"):
        ours = KernelCCA(3, kernel="linear", n_landmarks=N, n_pca_modes=n_pca_modes,
                         sample_dim="time").fit(X, Y)
    factor = N / (N - 1)
    np.testing.assert_allclose(ours.canonical_correlations_ * factor,
                               theirs.data["singular_values"].values, rtol=1e-8)
    assert ours.n_pca_modes_ == (n_pca_modes[0], n_pca_modes[1] or 10)
    for mine, their in zip(ours.transform(X, Y), theirs.scores()):
        np.testing.assert_allclose(mine.values * np.sqrt(factor), _aligned(mine, their).values,
                                   atol=1e-8)
    a, b = ours.transform(X, Y)
    np.testing.assert_allclose(a.std("time", ddof=1), 1.0, rtol=1e-10)
    np.testing.assert_allclose([np.corrcoef(a[:, k], b[:, k])[0, 1] for k in range(3)],
                               ours.canonical_correlations_, rtol=1e-10)


def test_lazy_and_chunked_input_give_the_same_modes():
    """Dask fields chunked differently (Y cut into X's blocks by the pass) give the modes of
    the in-memory fit, and lazy scores."""
    X, Y = _fields(nan_box=False)
    Xs, Ys = X.stack(feature=("lat", "lon")).values, Y.values
    eager = KernelMCA(3, kernel="linear", n_landmarks=N).fit(Xs, Ys)
    lazy = KernelMCA(3, kernel="linear", n_landmarks=N).fit(
        da.from_array(Xs, chunks=(25, -1)), da.from_array(Ys, chunks=(40, -1)))
    np.testing.assert_allclose(lazy.singular_values_, eager.singular_values_, rtol=1e-12)
    scores = lazy.transform(Y=da.from_array(Ys, chunks=(50, -1)))
    assert isinstance(scores, da.Array)
    np.testing.assert_allclose(scores.compute(), eager.transform(Y=Ys), atol=1e-10)


@pytest.mark.parametrize("method, power", [("varimax", 1), ("promax", 4)])
def test_rotated_mca_is_xeofs_mca_rotator(mca_pair, method, power):
    """Explained covariances, components and scores of the rotated pairs, ordered and signed
    as xeofs' MCARotator gives them."""
    X, Y, ours, theirs = mca_pair
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rotator = xe.cross.MCARotator(n_modes=3, power=power).fit(theirs)
    before = ours.singular_values_
    rotated = kpca_dask.rotate(ours, (X, Y), method=method, power=power)
    np.testing.assert_allclose(rotated.singular_values_,
                               np.sqrt(rotator.data["squared_covariance"].values), rtol=1e-8)
    for mine, their in zip(rotated.components(), rotator.components()):
        assert mine.dims == their.dims
        np.testing.assert_allclose(mine.values, their.values, atol=1e-8)
    for mine, their in zip(rotated.transform(X, Y), rotator.scores()):
        np.testing.assert_allclose(mine.values, their.transpose(*mine.dims).values, atol=1e-8)
    np.testing.assert_array_equal(ours.singular_values_, before)  # the fit is unchanged


def test_a_rotated_mca_is_saved_and_comes_back_without_the_data(mca_pair, tmp_path):
    """The rotated pairs' save keeps the rotation and the rotated components (NaN on the land
    box); rotate(load(path)) gives them, the scores and the covariances back; the model
    rotated is not changed; a rotation that does not fit the model is refused."""
    from _model_files import rewritten_attributes

    X, Y, ours, _ = mca_pair
    rotated = kpca_dask.rotate(ours, (X, Y), method="promax", power=3, n_components=2)
    assert ours.model_.rotation is None and rotated.estimator.model_.rotation is rotated.rotation
    path = rotated.save(tmp_path / "rotated.zarr")
    again = kpca_dask.rotate(kpca_dask.load(path))
    assert (again.method, again.power) == ("promax", 3)
    np.testing.assert_allclose(again.singular_values_, rotated.singular_values_, rtol=1e-12)
    for mine, before in zip(again.components(), rotated.components()):
        xr.testing.assert_allclose(mine, before)
    for mine, before in zip(again.transform(X, Y), rotated.transform(X, Y)):
        xr.testing.assert_allclose(mine, before)
    rewritten_attributes(path, lambda attrs: attrs["fitted"]["rotation"].update(
        method="quartimax"))
    with pytest.raises(kpca_dask.ModelFormatError, match="rotation method 'quartimax'"):
        kpca_dask.load(path)


def test_only_mca_pairs_are_rotated():
    X, Y = _fields(nan_box=False)
    cca = KernelCCA(2, kernel="linear", n_landmarks=N, n_pca_modes=4).fit(X, Y)
    with pytest.raises(kpca_dask.InvalidParameterError, match="KernelCCA"):
        kpca_dask.rotate(cca, (X, Y))
    mca = KernelMCA(2, kernel="linear", n_landmarks=N).fit(X, Y)
    with pytest.raises(kpca_dask.InvalidInputError, match="pair"):
        kpca_dask.rotate(mca, X)


def test_rotation_of_plain_arrays_gives_arrays():
    X, Y = _fields(nan_box=False)
    Xs, Ys = X.values.reshape(N, -1), Y.values
    rotated = kpca_dask.rotate(KernelMCA(3, kernel="linear", n_landmarks=N).fit(Xs, Ys),
                               (Xs, Ys), n_components=2)
    u, v = rotated.components()
    assert isinstance(u, np.ndarray) and u.shape == (2, 12) and v.shape == (2, 10)
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0)
    a, b = rotated.transform(Xs, Ys)
    np.testing.assert_allclose(np.cov(a[:, 0], b[:, 0])[0, 1], rotated.singular_values_[0],
                               rtol=1e-10)
