"""ExtendedKernelEOF: xeofs' ExtendedEOF with a linear kernel, any chunking, a lazy embedding."""

from __future__ import annotations

import warnings
from collections import Counter

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from _counting import CountingRows

from kpca_dask import (
    ExactKernelPCA,
    ExtendedKernelEOF,
    InsufficientMemoryError,
    InvalidInputError,
    InvalidParameterError,
    KernelPCA,
)
from kpca_dask.io.preprocessing.delay_embedding import lagged_field, lagged_rows

N, TAU, EMBEDDING = 80, 2, 4
KEPT = N - (EMBEDDING - 1) * TAU


def _field(seed: int = 0, n: int = N) -> xr.DataArray:
    """A wave travelling east over a 3 x 5 grid, with noise: a space-time pattern."""
    rng = np.random.default_rng(seed)
    t, lat, lon = np.arange(n), np.array([0.0, 10.0, 20.0]), np.arange(5.0) * 30
    wave = np.sin(0.4 * t[:, None, None] - np.deg2rad(lon) * 2 + lat[:, None] / 10)
    return xr.DataArray(wave + 0.5 * rng.normal(size=(n, 3, 5)), dims=("time", "lat", "lon"),
                        coords={"time": t, "lat": lat, "lon": lon}, name="field")


def _exact_linear(**params) -> ExtendedKernelEOF:
    """A linear kernel with every embedded sample a landmark: exact extended EOF."""
    return ExtendedKernelEOF(3, tau=TAU, embedding=EMBEDDING, kernel="linear", n_landmarks=N,
                             landmarks="uniform", **params)


@pytest.mark.parametrize("solver", ["nystrom", "gram"])
@pytest.mark.parametrize("n_pca_modes", [None, 6])
def test_linear_kernel_equals_xeofs_extended_eof(n_pca_modes, solver):
    """Variances, their ratios, the space-time components (up to each mode's sign) and the
    scores are xeofs' ExtendedEOF's, to 1e-8, with and without the linear EOF reduction, by
    landmarks and by the Gram way."""
    xeofs = pytest.importorskip("xeofs")
    X = _field()
    with warnings.catch_warnings():  # xeofs' own FutureWarnings from xarray
        warnings.simplefilter("ignore")
        # solver="full": xeofs' "auto" takes a randomized SVD above 500 rows or columns
        reference = xeofs.single.ExtendedEOF(n_modes=3, tau=TAU, embedding=EMBEDDING,
                                             n_pca_modes=n_pca_modes, solver="full")
        reference.fit(X, dim="time")
        expected = reference.components()
        expected_scores = reference.scores()
    eeof = _exact_linear(n_pca_modes=n_pca_modes, solver=solver).fit(X)
    assert eeof.solver_ == solver
    np.testing.assert_allclose(eeof.explained_variance_, reference.explained_variance(),
                               rtol=1e-8)
    np.testing.assert_allclose(eeof.explained_variance_ratio_,
                               reference.explained_variance_ratio(), rtol=1e-8)
    components = eeof.components()
    assert components.name == "components"
    assert components.dims == ("mode", "embedding", "lat", "lon")
    assert components["mode"].values.tolist() == [1, 2, 3]
    assert components["embedding"].values.tolist() == expected["embedding"].values.tolist()
    expected = expected.transpose(*components.dims).values
    signs = np.sign(np.einsum("kelo,kelo->k", components.values, expected))
    np.testing.assert_allclose(components.values * signs[:, None, None, None], expected,
                               atol=1e-8)
    # components_: the same maps over the features fitted, an array as Hilbert's
    assert isinstance(eeof.components_, np.ndarray)
    np.testing.assert_array_equal(eeof.components_, components.values.reshape(3, EMBEDDING, -1))
    # normalized=False: times the singular values (xeofs' normalized=False)
    np.testing.assert_allclose(
        eeof.components(normalized=False).values,
        components.values * np.sqrt(eeof.eigenvalues_)[:, None, None, None], rtol=1e-12)
    scores = eeof.transform(X)
    assert scores.dims == ("time", "mode") and scores.name == "scores"
    np.testing.assert_array_equal(scores["time"], X["time"][:KEPT])
    # xeofs pads the dropped last (embedding - 1) tau samples with NaN
    assert np.isnan(expected_scores.isel(time=slice(KEPT, None))).all()
    np.testing.assert_allclose(scores.values * signs,
                               expected_scores.isel(time=slice(0, KEPT)).values.T, atol=1e-8)


def test_array_input_is_the_stacked_field():
    """A numpy array (n, p) is the field stacked in C order: components of shape
    (k, embedding, p), scores of shape (n - (embedding - 1) tau, k); weights are one per
    column, applied at every lag."""
    X = _field()
    rows = X.values.reshape(N, -1)
    field, flat = _exact_linear().fit(X), _exact_linear().fit(rows)
    assert flat.components_.shape == (3, EMBEDDING, 15)
    assert field.components_.shape == (3, EMBEDDING, 15)
    signs = np.sign(np.einsum("kef,kef->k", flat.components_, field.components_))
    np.testing.assert_allclose(flat.components_ * signs[:, None, None], field.components_,
                               atol=1e-10)
    np.testing.assert_array_equal(flat.components(), flat.components_)  # arrays: no layout
    scores = flat.transform(rows)
    assert isinstance(scores, np.ndarray) and scores.shape == (KEPT, 3)
    np.testing.assert_allclose(scores * signs, field.transform(X).values, atol=1e-10)
    weights = np.linspace(0.5, 1.5, 15)
    weighted = _exact_linear(weights=weights).fit(rows)
    np.testing.assert_allclose(weighted.eigenvalues_,
                               _exact_linear().fit(rows * weights).eigenvalues_, rtol=1e-10)


@pytest.mark.parametrize("n_pca_modes", [None, 5])
def test_rbf_kernel_is_independent_of_the_chunking(n_pca_modes):
    """An rbf fit on dask input chunked along samples and features equals the fit on numpy
    input: variances, components and scores."""
    rows = _field().values.reshape(N, -1)
    params = dict(tau=3, embedding=3, n_pca_modes=n_pca_modes, kernel="rbf", gamma=0.02,
                  n_landmarks=30, landmarks="uniform", random_state=0)
    in_memory = ExtendedKernelEOF(3, **params).fit(rows)
    chunked = da.from_array(rows, chunks=(17, 6))
    lazy = ExtendedKernelEOF(3, **params).fit(chunked)
    np.testing.assert_allclose(lazy.eigenvalues_, in_memory.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(lazy.components_, in_memory.components_, atol=1e-10)
    scores = lazy.transform(chunked)
    assert isinstance(scores, da.Array)
    np.testing.assert_allclose(scores.compute(), in_memory.transform(rows), atol=1e-10)


def test_a_fit_reads_each_stored_chunk_as_often_whatever_the_embedding():
    """The embedding is lazy: fitting L lagged copies reads each stored chunk whole, once per
    pass of the fit, as often as a fit without embedding does, never the L copies apart and
    never more than one chunk at a time."""
    source = CountingRows(np.random.default_rng(0).normal(size=(300, 20)))
    X = da.from_array(source, chunks=(50, 10), asarray=True)

    params = dict(kernel="rbf", gamma=0.01, n_landmarks=40, landmarks="uniform", random_state=0)

    def reads(fit) -> Counter:
        source.clear()
        fit()
        assert all(k.stop - k.start <= 50 and c.stop - c.start <= 10 for k, c in source.keys)
        return Counter((k.start // 50, c.start // 10) for k, c in source.keys)

    # the same passes without an embedding: a kernel PCA's fit, then its EOF maps
    plain = reads(lambda: KernelPCA(2, **params).fit(X).patterns(X, kind="eof").compute())
    embedded = reads(lambda: ExtendedKernelEOF(2, tau=3, embedding=8, **params).fit(X))
    assert set(embedded) == set(plain) and len(plain) == X.npartitions
    # Read in the passes, as the plain fit's (an embedding made at once would read each
    # chunk once, then never); a landmark row near a block edge may add one read.
    assert all(plain[chunk] <= embedded[chunk] <= plain[chunk] + 1 for chunk in plain)


def test_lagged_rows_and_field_are_xeofs_shifted_copies():
    """Embedded row t is [x_t, x_{t+tau}, ...], as xeofs' X.shift(sample=-k tau), the last
    (L-1) tau samples dropped; a field's copies carry the embedding coordinate k tau and the
    first samples' coordinates; the blocks keep the input's."""
    X = _field(n=30).chunk({"time": 7, "lon": 2})
    field = lagged_field(X, "time", 3, 4)
    assert field.dims == ("time", "embedding", "lat", "lon")
    assert field["embedding"].values.tolist() == [0, 3, 6, 9]
    expected = xr.concat([X.shift(time=-k) for k in (0, 3, 6, 9)], dim="embedding")
    expected = expected.isel(time=slice(0, 21)).transpose(*field.dims)
    np.testing.assert_array_equal(field.values, expected.values)
    np.testing.assert_array_equal(field["time"], X["time"][:21])
    assert max(field.chunks[0]) == 7 and field.chunks[3] == (2, 2, 1)
    rows = lagged_rows(X.data.reshape(30, -1), 3, 4)
    np.testing.assert_array_equal(rows.compute(), expected.values.reshape(21, -1))


def test_transform_of_a_new_series_projects_its_lagged_rows():
    """transform embeds a new series as the training one and projects its rows: for a linear
    kernel, (x_emb - training mean) . component."""
    X, new = _field(0), _field(1, n=30)
    eeof = _exact_linear().fit(X)
    embedded = lagged_field(new, "time", TAU, EMBEDDING).values.reshape(30 - 6, -1)
    mean = lagged_field(X, "time", TAU, EMBEDDING).values.reshape(KEPT, -1).mean(axis=0)
    expected = (embedded - mean) @ eeof.components_.reshape(3, -1).T
    scores = eeof.transform(new)
    np.testing.assert_array_equal(scores["time"], new["time"][:24])
    np.testing.assert_allclose(scores.values, expected, atol=1e-10)


@pytest.mark.parametrize("params, match", [
    (dict(tau=0), r"tau must be an int >= 1 \(the delay .*; got 0\."),
    (dict(embedding=1.5), r"embedding must be an int >= 1 .*; got 1\.5\."),
    (dict(tau=20, embedding=5), r"\(embedding - 1\) \* tau <= n_samples - 2"),
    (dict(n_pca_modes=16), r"min\(n_samples, n_features\) = 15"),
    (dict(n_pca_modes=0), "n_pca_modes must be None .* or an int >= 1"),
    (dict(gamma="wide"), "gamma='wide' is not a rule"),
    (dict(solver="dense"), "solver must be one of"),
])
def test_parameters_out_of_range_are_refused(params, match):
    """tau, embedding and n_pca_modes out of range are refused before any pass, saying why."""
    with pytest.raises(InvalidParameterError, match=match):
        ExtendedKernelEOF(2, **{"kernel": "linear", **params}).fit(_field())


def test_several_fields_and_a_taken_dimension_name_are_refused():
    """One field only, and not one with a dimension named like the lagged copies'."""
    X = _field()
    with pytest.raises(InvalidInputError, match="takes one field"):
        ExtendedKernelEOF(2).fit([X, X])
    with pytest.raises(InvalidInputError, match="already has a dimension named 'embedding'"):
        ExtendedKernelEOF(2, kernel="linear").fit(X.rename(lat="embedding"))


@pytest.mark.parametrize("n_pca_modes", [None, 4])
def test_a_masked_weighted_field_keeps_its_mask_and_weights_at_every_lag(n_pca_modes):
    """A field with a land mask and latitude weights, its sample dimension last: the weights
    apply at every lag (the fit of the weighted field is the same), the components are NaN
    on the mask at every lag, and the features counted are those off the mask."""
    from kpca_dask.io.preprocessing.fields import coslat_weights

    X = _field().transpose("lat", "lon", "time")
    X = X.where(~((X.lat == 20) & (X.lon == 30)))
    weights = coslat_weights(X.lat)
    params = dict(n_pca_modes=n_pca_modes)
    weighted = _exact_linear(weights=weights, **params).fit(X)
    np.testing.assert_allclose(weighted.eigenvalues_,
                               _exact_linear(**params).fit(X * weights).eigenvalues_, rtol=1e-10)
    assert weighted.n_features_in_ == 14 and weighted.sample_dim_ == "time"
    mask = weighted.components().isnull()
    assert mask.sel(lat=20, lon=30).all() and int(mask.sum()) == 3 * EMBEDDING
    # components_ leaves the masked position out, as the features fitted
    assert weighted.components_.shape == (3, EMBEDDING, 14)
    assert np.isfinite(weighted.components_).all()


def test_n_pca_modes_are_held_to_the_features_off_the_mask():
    """A masked position is not a feature: n_pca_modes up to the features fitted only."""
    masked = _field().where(lambda field: ~((field.lat == 0) & (field.lon == 0)))
    n_features = 3 * 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the zero eigenvalue of the refused fit
        with pytest.raises(InvalidParameterError, match=f"= {n_features - 1} "):
            ExtendedKernelEOF(2, kernel="linear", n_pca_modes=n_features).fit(masked)


def _wide_field(n: int = 40) -> xr.DataArray:
    """More grid points than time steps, as analysts' fields have: a travelling wave."""
    rng = np.random.default_rng(4)
    t, lon = np.arange(n)[:, None, None], np.linspace(0, 350, 24)[None, None, :]
    values = np.sin(0.4 * t - np.deg2rad(lon) * 2) + 0.3 * rng.normal(size=(n, 3, 24))
    return xr.DataArray(values, dims=("time", "lat", "lon"),
                        coords={"time": np.arange(n), "lat": [0.0, 10.0, 20.0],
                                "lon": lon.ravel()})


@pytest.mark.parametrize("n_pca_modes", [None, 5])
@pytest.mark.parametrize(("kernel", "gamma"), [("linear", None), ("rbf", 0.01)])
def test_gram_way_equals_landmarks_at_every_sample(n_pca_modes, kernel, gamma):
    """The Gram way is the landmark way with every sample a landmark: variances, components
    and scores (up to each mode's sign) to 1e-8; it fits each stage that reads the field
    with an ExactKernelPCA."""
    X = _wide_field()
    params = dict(tau=2, embedding=3, kernel=kernel, gamma=gamma, n_pca_modes=n_pca_modes)
    gram = ExtendedKernelEOF(3, solver="gram", **params).fit(X)
    landmarks = ExtendedKernelEOF(3, solver="nystrom", n_landmarks=X.sizes["time"],
                                  landmarks="uniform", **params).fit(X)
    reading = gram.pca_ if n_pca_modes else gram.kpca_
    assert isinstance(reading, ExactKernelPCA)
    assert gram.trace_error_ == 0.0 or n_pca_modes  # else the kernel stage's on the scores
    assert gram.total_variance_kind_ == landmarks.total_variance_kind_ == "exact"
    assert gram.gamma_ == landmarks.gamma_ == gamma
    np.testing.assert_allclose(gram.explained_variance_, landmarks.explained_variance_,
                               rtol=1e-8)
    np.testing.assert_allclose(gram.explained_variance_ratio_,
                               landmarks.explained_variance_ratio_, rtol=1e-8)
    got, expected = gram.components().values, landmarks.components().values
    signs = np.sign((got * expected).reshape(3, -1).sum(axis=1))
    np.testing.assert_allclose(got * signs[:, None, None, None], expected, atol=1e-8)
    np.testing.assert_allclose(gram.transform(X).values * signs, landmarks.transform(X).values,
                               atol=1e-8)
    new = _wide_field(30) + 0.1
    np.testing.assert_allclose(gram.transform(new).values * signs,
                               landmarks.transform(new).values, atol=1e-8)


@pytest.mark.parametrize("n_pca_modes", [None, 5])
def test_auto_takes_the_gram_way_for_a_wide_field_that_fits(n_pca_modes):
    """solver="auto": the Gram way for a lazy field of more grid points than samples, landmarks
    for a narrow one and for one whose n x n matrices do not fit; solver="gram" refuses
    those with their size."""
    wide = _wide_field().chunk({"time": 10})
    params = dict(tau=2, embedding=3, n_pca_modes=n_pca_modes, n_landmarks=10,
                  landmarks="uniform")
    assert ExtendedKernelEOF(2, **params).fit(wide).solver_ == "gram"
    narrow = _field().chunk({"time": 20})  # 80 samples of 15 positions
    assert ExtendedKernelEOF(2, **params).fit(narrow).solver_ == "nystrom"
    # 2.5 n^2 float64 words of 38 or 40 rows do not fit; 2.2 m^2 of 10 landmarks do
    with dask.config.set({"kpca-dask.memory-limit": 25_000}):
        assert ExtendedKernelEOF(2, **params).fit(wide).solver_ == "nystrom"
        with pytest.raises(InsufficientMemoryError, match="kernel matrix"):
            ExtendedKernelEOF(2, solver="gram", **params).fit(wide)


@pytest.mark.parametrize("n_pca_modes", [None, 6])
def test_rotation_is_the_kernel_stages_on_the_embedded_samples(n_pca_modes):
    """kpca_dask.rotate of an extended EOF rotates its kernel stage on the embedded samples:
    the same variances and scores, the maps laid out (mode, embedding, lat, lon) and, with
    n_pca_modes, mapped back through the linear EOFs as the unrotated maps are."""
    import kpca_dask

    X = _field()
    eeof = _exact_linear(n_pca_modes=n_pca_modes).fit(X)
    rotated = kpca_dask.rotate(eeof, X, method="varimax", n_components=2)
    stage = kpca_dask.rotate(eeof.kpca_, eeof.embedded(X), method="varimax", n_components=2)
    np.testing.assert_allclose(rotated.explained_variance_, stage.explained_variance_,
                               rtol=1e-12)
    np.testing.assert_allclose(rotated.transform(X).values, stage.transform(
        eeof.embedded(X)).values, rtol=1e-10)
    maps = rotated.components()
    np.testing.assert_array_equal(rotated.components_, maps.values.reshape(2, EMBEDDING, -1))
    assert maps.dims == ("mode", "embedding", "lat", "lon") and maps.sizes["mode"] == 2
    # Unit maps over the embedded features: without n_pca_modes, the stage's own.
    if n_pca_modes is None:
        np.testing.assert_allclose(maps.values, stage.components().values, atol=1e-12)
    else:
        linear = eeof.pca_.patterns(X, kind="eof").rename(mode="pca_mode")
        back = xr.dot(stage.components(), linear, dim="pca_mode")
        np.testing.assert_allclose(maps.values, back.transpose(*maps.dims).values, atol=1e-10)
    with pytest.raises(InvalidParameterError, match="rotated on the data it was fitted on"):
        kpca_dask.rotate(eeof, method="varimax")


def test_a_mask_that_differs_between_lags_is_refused():
    """A position NaN over the start of the record only is masked in the first lagged copy
    and kept in a later one: refused by name, as the maps would have no common grid; one NaN
    at every sample is the mask of every lag."""
    values = np.random.default_rng(0).normal(size=(10, 3))
    values[:4, 1] = np.nan
    field = xr.DataArray(values, dims=("time", "x"))
    with pytest.raises(InvalidInputError, match=r"\(the first: x index 1\) are NaN at every"):
        ExtendedKernelEOF(2, tau=6, embedding=2, n_landmarks=10).fit(field)
    values[:, 1] = np.nan
    eeof = ExtendedKernelEOF(2, tau=6, embedding=2, n_landmarks=10).fit(field.copy(data=values))
    assert eeof.n_features_in_ == 2 and eeof.components_.shape == (2, 2, 2)
    assert eeof.components(normalized=False).name == "components"
