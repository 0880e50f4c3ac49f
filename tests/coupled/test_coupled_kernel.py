"""Kernel MCA and CCA beyond the linear kernel: a nonlinear link found, files, refusals."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr

import kpca_dask
from kpca_dask import KernelCCA, KernelMCA
from kpca_dask.errors import (
    InvalidInputError,
    InvalidParameterError,
    ModelFormatError,
    NonFiniteInputError,
    OutputExistsError,
)

N = 1500


def _linked(n: int = N, seed: int = 1):
    """X carries a latent t, Y carries t^2 - 1: uncorrelated with X (E[t^3] = 0) but a
    function of it, so linear MCA has no covariance to find and a kernel of X has."""
    rng = np.random.default_rng(seed)
    t = rng.normal(size=n)
    X = np.outer(t, rng.normal(size=20)) + 0.3 * rng.normal(size=(n, 20))
    Y = np.outer(t**2 - 1, rng.normal(size=15)) + 0.3 * rng.normal(size=(n, 15))
    return X, Y, t


def _pair_correlation(model, X, Y, k: int = 0) -> float:
    a, b = model.transform(X, Y)
    return abs(float(np.corrcoef(a[:, k], b[:, k])[0, 1]))


def test_kernel_mca_finds_the_link_linear_mca_misses():
    """Criterion: the leading pair of scores correlates at >= 0.9 with rbf kernels and at
    <= 0.1 with linear ones; the kernel X score follows t^2 (|r| >= 0.6)."""
    X, Y, t = _linked()
    linear = KernelMCA(1, kernel="linear", n_landmarks=N).fit(X, Y)
    kernel = KernelMCA(1, n_landmarks=300, random_state=0).fit(X, Y)
    assert _pair_correlation(linear, X, Y) <= 0.1
    assert _pair_correlation(kernel, X, Y) >= 0.9
    a, _ = kernel.transform(X, Y)
    assert abs(np.corrcoef(a[:, 0], t**2)[0, 1]) >= 0.6


def test_kernel_cca_finds_the_link_with_its_own_kernel_per_field():
    X, Y, t = _linked()
    cca = KernelCCA(1, kernel=("poly", "linear"), degree=2, n_landmarks=(300, N),
                    n_pca_modes=(10, 5), random_state=0).fit(X, Y)
    assert cca.canonical_correlations_[0] >= 0.9
    assert cca.n_pca_modes_ == (10, 5)
    linear = KernelCCA(1, kernel="linear", n_landmarks=N, n_pca_modes=(10, 5)).fit(X, Y)
    assert linear.canonical_correlations_[0] <= 0.15
    ridge = KernelCCA(1, kernel=("poly", "linear"), degree=2, n_landmarks=(300, N),
                      n_pca_modes=(10, 5), epsilon=0.5, random_state=0).fit(X, Y)
    assert ridge.canonical_correlations_[0] < cca.canonical_correlations_[0]


def test_the_modes_do_not_depend_on_the_chunks():
    """Blocks of whole chunks of both fields (100 and 150 rows: blocks of 300), or Y cut
    into X's blocks where the chunkings rarely meet (70 and 130), with a warning."""
    from dask.array.core import PerformanceWarning

    X, Y, _ = _linked(600)

    def fit(rows, other):
        return KernelMCA(2, n_landmarks=100, landmarks="uniform", random_state=3).fit(
            da.from_array(X, chunks=(rows, -1)), da.from_array(Y, chunks=(other, -1)))

    with pytest.warns(PerformanceWarning, match="rarely end together"):
        rarely = fit(70, 130)
    for fitted in (fit(100, 150), rarely):
        np.testing.assert_allclose(fitted.singular_values_, fit(600, 600).singular_values_,
                                   rtol=1e-10)


def test_float32_blocks_agree_with_float64():
    X, Y, _ = _linked(600)
    fits = [KernelMCA(2, n_landmarks=100, random_state=0, dtype=dtype).fit(X, Y)
            for dtype in ("float64", "float32")]
    np.testing.assert_allclose(fits[1].singular_values_, fits[0].singular_values_, rtol=1e-4)


@pytest.mark.parametrize("estimator", [KernelMCA(2, n_landmarks=80, random_state=0),
                                       KernelMCA(2, kernel=("rbf", "linear"),
                                                 n_landmarks=(80, 60), random_state=0),
                                       KernelCCA(2, n_landmarks=80, n_pca_modes=6,
                                                 random_state=0)])
def test_save_and_load_give_the_same_scores(tmp_path, estimator):
    X, Y, _ = _linked(400)
    fitted = estimator.fit(X, Y)
    path = fitted.save(tmp_path / "model.zarr")
    loaded = kpca_dask.load(path)
    assert type(loaded) is type(fitted) and loaded.get_params() == fitted.get_params()
    for mine, theirs in zip(fitted.transform(X, Y), loaded.transform(X, Y)):
        np.testing.assert_array_equal(mine, theirs)
    with pytest.raises(OutputExistsError):
        fitted.save(path)


def test_an_edited_file_is_refused(tmp_path):
    X, Y, _ = _linked(300)
    path = KernelMCA(2, n_landmarks=50, random_state=0).fit(X, Y).save(tmp_path / "m.zarr")
    group = zarr.open_group(path, mode="r+")
    group["singular_values"][0] = 7.0
    with pytest.raises(ModelFormatError, match="singular_values"):
        kpca_dask.load(path)


def test_labelled_fields_give_labelled_scores_and_maps():
    X, Y, _ = _linked(300)
    time = np.arange(300)
    Xd = xr.DataArray(X.reshape(300, 4, 5), dims=("time", "lat", "lon"), coords={"time": time})
    Yd = xr.DataArray(Y, dims=("time", "station"), coords={"time": time})
    mca = KernelMCA(2, n_landmarks=60, random_state=0).fit(Xd, Yd)
    a, b = mca.transform(Xd, Yd)
    assert a.dims == b.dims == ("time", "mode") and a["mode"].values.tolist() == [1, 2]
    maps_x, maps_y = mca.heterogeneous_patterns(Xd, Yd)
    assert maps_x.dims == ("mode", "lat", "lon") and maps_y.dims == ("mode", "station")
    assert float(abs(maps_x).max()) <= 1.0
    lazy = mca.transform(Y=Yd.chunk({"time": 100}))
    assert lazy.chunks is not None
    np.testing.assert_allclose(lazy.values, b.values, atol=1e-12)
    (_, lazy_y), (_, p_y) = mca.heterogeneous_patterns(Xd.chunk({"time": 100}),
                                                       Yd.chunk({"time": 100}), pvalues=True)
    assert p_y.chunks is not None and p_y.dims == lazy_y.dims
    assert float(p_y.min()) >= 0.0 and float(p_y.max()) <= 1.0
    with pytest.raises(InvalidParameterError, match="pvalues=True tests correlations"):
        mca.homogeneous_patterns(Xd, Yd, kind="covariance", pvalues=True)


def test_refusals_say_what_is_wrong():
    X, Y, _ = _linked(200)
    with pytest.raises(InvalidInputError, match="X has 200 samples and Y has 150"):
        KernelMCA(n_landmarks=20).fit(X, Y[:150])
    Xd = xr.DataArray(X, dims=("time", "x"), coords={"time": np.arange(200)})
    Yd = xr.DataArray(Y, dims=("time", "y"), coords={"time": np.arange(200) + 1})
    with pytest.raises(InvalidInputError, match="coordinates differ"):
        KernelMCA(n_landmarks=20).fit(Xd, Yd)
    with pytest.raises(InvalidParameterError, match="n_modes"):
        KernelMCA(0).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="pair"):
        KernelMCA(kernel=("rbf", "rbf", "rbf")).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="n_pca_modes"):
        KernelCCA(n_pca_modes=1.5).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        KernelCCA(epsilon=-1.0).fit(X, Y)
    with pytest.raises(InvalidParameterError, match="precomputed"):
        KernelMCA(kernel="precomputed").fit(X, Y)
    bad = Y.copy()
    bad[17, 3] = np.nan
    with pytest.raises(NonFiniteInputError, match="Y contains 1 NaN.*row 17"):
        KernelMCA(n_landmarks=20, landmarks="uniform", random_state=0).fit(X, bad)
    model = KernelMCA(2, n_landmarks=20, random_state=0).fit(X, Y)
    fitted = model.model_
    with pytest.raises(InvalidInputError, match="150"):  # a refit that fails changes nothing
        model.fit(X, Y[:150])
    assert model.model_ is fitted
    with pytest.raises(InvalidInputError, match="transform needs"):
        model.transform()


def test_the_fit_reads_each_block_of_each_field_once():
    """With the landmarks and gamma given, the fit's one pass is its only read: each row block
    of X and of Y once (Y stored in other blocks is cut into X's as it is read)."""
    from _counting import CountingRows

    X, Y, _ = _linked(600)
    rows_x, rows_y = CountingRows(X), CountingRows(Y)
    mca = KernelMCA(2, gamma=0.05, landmarks=(X[::10], Y[::10]), n_landmarks=60)
    mca.fit(da.from_array(rows_x, chunks=(100, -1)), da.from_array(rows_y, chunks=(150, -1)))
    assert set(rows_x.row_ranges().values()) == {1} and len(rows_x.row_ranges()) == 6
    assert set(rows_y.row_ranges().values()) == {1} and len(rows_y.row_ranges()) == 4


def test_float32_cca_reports_the_correlations_its_scores_have():
    """Every PC kept (n_pca_modes=None) of independent fields in float32: PCs at float32's
    rounding level are not whitened, so the canonical correlation is that of the scores."""
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(3000, 5)), rng.normal(size=(3000, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kpca_dask.CanonicalOverfitWarning)
        cca = KernelCCA(1, n_landmarks=200, n_pca_modes=None, dtype="float32",
                        random_state=0).fit(X, Y)
    a, b = cca.transform(X, Y)
    assert abs(np.corrcoef(a[:, 0], b[:, 0])[0, 1] - cca.canonical_correlations_[0]) < 0.01
    assert abs(a[:, 0].std(ddof=1) - 1.0) < 0.01


def test_p_values_are_of_the_samples_given():
    from scipy import stats

    X, Y, _ = _linked(400)
    mca = KernelMCA(2, n_landmarks=40, random_state=0).fit(X, Y)
    (maps_x, _), (p_x, _) = mca.homogeneous_patterns(X[:30], Y[:30], pvalues=True)
    a, _ = mca.transform(X[:30], Y[:30])
    expected = stats.pearsonr(X[:30, 0], a[:, 0])
    np.testing.assert_allclose([maps_x[0, 0], p_x[0, 0]],
                               [expected.statistic, expected.pvalue], rtol=1e-8)


def test_a_constant_field_is_refused_in_words():
    X, _, _ = _linked(300)
    for estimator in (KernelCCA(2, kernel="linear", n_landmarks=50, n_pca_modes=None),
                      KernelMCA(2, kernel="linear", n_landmarks=50)):
        with pytest.raises(InvalidInputError, match="constant field"):
            estimator.fit(X, np.ones((300, 3)))


def test_a_loaded_model_refits_as_it_was_fitted(tmp_path):
    """Landmark points and array weights, which a file's JSON cannot hold, come back from its
    arrays: a refit of the loaded estimator is the fit's."""
    X, Y, _ = _linked(400)
    fitted = KernelMCA(2, landmarks=(X[:20], "kmeans"), n_landmarks=30,
                       weights=(np.linspace(1, 2, 20), None), random_state=0).fit(X, Y)
    loaded = kpca_dask.load(fitted.save(tmp_path / "m.zarr"))
    assert loaded.landmarks[1] == "kmeans"
    np.testing.assert_allclose(loaded.fit(X, Y).singular_values_, fitted.singular_values_,
                               rtol=1e-12)


def _linked_again(n: int, seed: int):
    """New samples of :func:`_linked`'s fields (the same patterns, a new signal and noise)."""
    rng = np.random.default_rng(1)
    rng.normal(size=N)
    p = rng.normal(size=20)
    rng.normal(size=(N, 20))
    q = rng.normal(size=15)
    new = np.random.default_rng(seed)
    t = new.normal(size=n)
    return (np.outer(t, p) + 0.3 * new.normal(size=(n, 20)),
            np.outer(t**2 - 1, q) + 0.3 * new.normal(size=(n, 15)))


def test_a_ridge_chosen_on_held_out_folds_generalises():
    """epsilon="auto": 0.999 of each rbf field's variance keeps ~250 PCs of 1500 samples,
    which overfit without a ridge; the held-out choice takes one, and the leading pair
    correlates better on new samples of the same fields (0.99 against 0.87)."""
    X, Y, _ = _linked()
    new_x, new_y = _linked_again(1500, 11)
    correlations = {}
    for epsilon in (0.0, "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", kpca_dask.CanonicalOverfitWarning)
            cca = KernelCCA(1, n_landmarks=300, random_state=0, epsilon=epsilon).fit(X, Y)
        a, b = cca.transform(new_x, new_y)
        correlations[epsilon] = abs(np.corrcoef(a[:, 0], b[:, 0])[0, 1])
    assert cca.epsilon_ > 0 and cca.held_out_correlations_.idxmax() == cca.epsilon_
    assert correlations["auto"] > correlations[0.0] + 0.05


def test_the_folds_add_up_to_the_fit_s_sums():
    from kpca_dask.blocks.replicate_counts import FoldCounts
    from kpca_dask.engine.passes.coupled import (
        compute_coupled_pass,
        compute_coupled_replicates,
        field_kernel,
    )
    from kpca_dask.engine.solve.held_out import summed
    from kpca_dask.engine.solve.landmark_factor import reference_row

    X, Y, _ = _linked(500)
    data = [da.from_array(A, chunks=(120, -1)) for A in (X, Y)]
    sides = [field_kernel(d, A[::10], "rbf", {"gamma": 0.05},
                          reference_row(A[::10], "rbf", {"gamma": 0.05}), np.float64)
             for d, A in zip(data, (X, Y))]
    whole = compute_coupled_pass(*data, *sides)
    sums = compute_coupled_replicates(*data, *sides, FoldCounts(5, 500))
    folds = summed([sums.replicate(f) for f in range(5)])
    assert folds.n_samples == 500 and [sums.replicate(f).n_samples for f in range(5)] == [100] * 5
    for got, want in ((folds.cross, whole.cross), (folds.x.gram, whole.x.gram),
                      (folds.y.column_sums, whole.y.column_sums)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
