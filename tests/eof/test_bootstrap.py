"""The bootstrap of every mode in one read (kpca_dask.bootstrap, docs/design.md §18): xeofs'
EOFBootstrapper for the same resampled rows, counts that do not depend on the chunking or the
workers, one read of the data for B = 100, and the memory of the B replicates' sums."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from _counting import CountingRows
from sklearn.exceptions import NotFittedError

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.blocks.replicate_counts import DrawnCounts, replicate_counts
from kpca_dask.engine.passes.nystrom import compute_pass
from kpca_dask.engine.passes.replicates import replicate_pass
from kpca_dask.engine.solve.nystrom import solve_small_problem
from kpca_dask.errors import InsufficientMemoryError, InvalidInputError, InvalidParameterError

xe = pytest.importorskip("xeofs")

N, P, Q = 60, 6, 3


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.normal(size=(N, P)) * [5.0, 3.0, 2.0, 1.0, 0.7, 0.5] + 10.0


@pytest.fixture(scope="module")
def linear_fit(data):
    """Every sample a landmark: the Nyström fit is xeofs' EOF."""
    return KernelPCA(Q, kernel="linear", n_landmarks=N, landmarks="uniform").fit(data)


def _xeofs_bootstrap(data, B: int, seed: int):
    """The field, xeofs' EOFBootstrapper fitted on it, its fit and the rows it resamples."""
    field = xr.DataArray(data, dims=("time", "x"), coords={"time": np.arange(N)})
    model = xe.single.EOF(n_modes=Q, standardize=False, use_coslat=False).fit(field, dim="time")
    expected = xe.validation.EOFBootstrapper(n_bootstraps=B, seed=seed)
    expected.fit(model)
    rng = np.random.default_rng(seed)  # xeofs' own draws, in its order
    indices = np.stack([rng.choice(N, N, replace=True) for _ in range(B)])
    return field, expected, model, indices


def _assert_xeofs_replicates(boot, expected, model) -> None:
    """Variances, ratios and the congruence of each replicate's EOF with the fit's, to 1e-8."""
    np.testing.assert_allclose(boot["explained_variance"].values,
                               expected.explained_variance().transpose("n", "mode").values,
                               rtol=1e-8)
    ratios = expected.explained_variance() / expected.data["total_variance"]
    np.testing.assert_allclose(boot["explained_variance_ratio"].values,
                               ratios.transpose("n", "mode").values, rtol=1e-8)
    components = expected.components().transpose("n", "mode", ...).values
    fitted = model.components().transpose("mode", ...).values
    congruence = np.abs(np.einsum("bkf,kf->bk", components, fitted))
    np.testing.assert_allclose(boot["congruence"].values, congruence, rtol=0, atol=1e-8)


def test_equals_xeofs_eof_bootstrapper_for_the_same_rows(data, linear_fit):
    """Explained variances, their ratios, patterns and scores (modulo sign) are xeofs'
    EOFBootstrapper's for the rows it resamples, to 1e-8."""
    field, expected, model, indices = _xeofs_bootstrap(data, 8, 11)
    boot = kpca_dask.bootstrap(linear_fit, field, indices=indices)
    _assert_xeofs_replicates(boot, expected, model)
    Z = np.asarray(linear_fit.model_.landmarks)
    scores = (np.einsum("nm,bmk->bnk", data @ Z.T, boot["projection"].values)
              - boot["offset"].values[:, None, :])
    theirs = expected.scores().transpose("n", "time", "mode").values
    signs = np.sign(np.einsum("bnk,bnk->bk", scores, theirs))[:, None, :]
    np.testing.assert_allclose(scores * signs, theirs, rtol=0,
                               atol=1e-8 * np.abs(theirs).max())


def test_counts_are_exact_multinomial_whatever_the_chunking():
    """Each replicate's counts sum to n, and any cut into blocks gives the same counts."""
    n, leaf = 1000, 16
    counts = DrawnCounts(5, 200, n, leaf_rows=leaf)
    whole = counts.block(0, n)
    assert whole.shape == (200, n) and (whole.sum(axis=1) == n).all()
    rng = np.random.default_rng(0)
    for _ in range(3):
        cuts = np.unique(np.concatenate([[0, n], rng.integers(1, n, 7)]))
        pieces = [replicate_counts(5, 17, n, a, b, leaf) for a, b in zip(cuts[:-1], cuts[1:])]
        np.testing.assert_array_equal(np.concatenate(pieces), whole[17])
    # Multinomial(n; 1/n): each count Binomial(n, 1/n), mean 1, variance 1 - 1/n.
    assert abs(whole.var() - (1 - 1 / n)) < 0.02
    assert abs(np.mean(whole == 0) - (1 - 1 / n) ** n) < 0.01
    assert abs(np.mean(whole == 2) - 0.5 * (1 - 1 / n) ** (n - 2) * (n - 1) / n) < 0.01
    assert not (whole[0] == whole[1]).all()


def _rbf_fit(data):
    X = da.from_array(data, chunks=(20, P))
    return X, KernelPCA(Q, kernel="rbf", gamma=0.02, n_landmarks=25, random_state=0).fit(X)


def test_rbf_on_dask_is_the_same_for_any_chunking_and_each_replicate_a_pass(data):
    """An rbf fit on dask input: any chunking gives the same replicates, and a replicate
    given by its rows is the pass over those rows solved with the fit's landmarks."""
    X, kpca = _rbf_fit(data)
    one = kpca_dask.bootstrap(kpca, X, 30, seed=4)
    other = kpca_dask.bootstrap(kpca, X.rechunk(7), 30, seed=4)
    np.testing.assert_allclose(one["eigenvalues"].values, other["eigenvalues"].values,
                               rtol=1e-10)
    assert one["significant"].dtype == bool and one.sizes == {"n": 30, "mode": Q,
                                                              "landmark": 25}
    assert (one["explained_variance_lower"] <= one["explained_variance_upper"]).all()
    model = kpca.model_
    indices = np.random.default_rng(1).integers(0, N, (2, N))
    given = kpca_dask.bootstrap(kpca, X, indices=indices)
    for b in range(2):
        stats = compute_pass(da.from_array(data[indices[b]], chunks=15), model.landmarks,
                             model.kernel, model.kernel_params)
        direct = solve_small_problem(stats, model.landmarks, model.kernel, model.kernel_params,
                                     model.settings.rcond, Q).solution
        np.testing.assert_allclose(given["eigenvalues"].values[b], direct.eigenvalues,
                                   rtol=1e-9)


def test_a_hundred_replicates_read_the_data_once(data, linear_fit, tmp_path):
    """B = 100 replicates read each chunk of a Zarr store once, on the threaded scheduler;
    the sums held are B (m^2 + m + 1) words."""
    written = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=data.shape,
                              chunks=(12, P), dtype=data.dtype)
    written[...] = data
    store = CountingRows(zarr.open_array(str(tmp_path / "x.zarr"), mode="r"))
    X = da.from_array(store, chunks=(12, P), meta=np.empty((0, 0)), asarray=True)
    with dask.config.set(scheduler="threads"):
        boot = kpca_dask.bootstrap(linear_fit, X, 100, seed=0)
    assert sorted(tuple((k.start, k.stop) for k in key) for key in store.keys) == [
        ((a, a + 12), (0, P)) for a in range(0, N, 12)]
    m = len(linear_fit.model_.landmarks)
    counts = DrawnCounts(0, 100, N)
    sums = replicate_pass(X, np.asarray(linear_fit.model_.landmarks), "linear", {}, counts)
    held = sums.gram.nbytes + sums.column_sums.nbytes + sums.diagonal_sums.nbytes
    assert boot.attrs["memory_bytes"] == held == 8 * 100 * (m * m + m + 1)
    assert boot.sizes["n"] == 100 and store.total() == 2 * N // 12


def test_a_cluster_gives_the_threads_replicates(data, process_cluster):
    """On two worker processes the replicates are those of the threaded scheduler."""
    from distributed import Client

    X, kpca = _rbf_fit(data)
    local = kpca_dask.bootstrap(kpca, X, 12, seed=9)
    with Client(process_cluster):
        spread = kpca_dask.bootstrap(kpca, X.rechunk(10), 12, seed=9)
    np.testing.assert_allclose(spread["eigenvalues"].values, local["eigenvalues"].values,
                               rtol=1e-10)
    np.testing.assert_allclose(spread["congruence"].values, local["congruence"].values,
                               rtol=0, atol=1e-10)


def test_clear_errors(data, linear_fit):
    with pytest.raises(NotFittedError):
        kpca_dask.bootstrap(KernelPCA(2), data)
    for B in (0, -1, 2.5, True):
        with pytest.raises(InvalidParameterError, match="n_bootstraps must be an int >= 1"):
            kpca_dask.bootstrap(linear_fit, data, B)
    with pytest.raises(InvalidParameterError, match=r"shape \(B, n\) = \(B, 60\)"):
        kpca_dask.bootstrap(linear_fit, data, indices=np.zeros((3, 59), int))
    with pytest.raises(InvalidParameterError, match="from 0 to 59"):
        kpca_dask.bootstrap(linear_fit, data, indices=np.full((3, N), N))
    with pytest.raises(InvalidParameterError, match="must be integers"):
        kpca_dask.bootstrap(linear_fit, data, indices=np.zeros((3, N)))
    with pytest.raises(InvalidInputError, match="fitted on 6"):
        kpca_dask.bootstrap(linear_fit, data[:, :4], 5)
    with pytest.raises(InvalidParameterError, match="n_modes must be an int from 1 to 3"):
        kpca_dask.bootstrap(linear_fit, data, 5, n_modes=4)
    with pytest.raises(InvalidParameterError, match="confidence"):
        kpca_dask.bootstrap(linear_fit, data, 5, confidence=1.5)


def test_every_mode_of_a_full_rank_fit(data):
    """All p modes of a linear fit: the one more pair the rule asks for has eigenvalue 0 and
    is read as 0, with no warning."""
    kpca = KernelPCA(P, kernel="linear", n_landmarks=N).fit(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        boot = kpca_dask.bootstrap(kpca, data, 10, seed=0)
    assert boot.sizes["mode"] == P and (boot["explained_variance"] > 0).all()
    assert boot["significant"].values[0]


def test_replicates_whose_sums_do_not_fit_are_refused_before_a_read(data, linear_fit, tmp_path):
    """The refusal names B and m, and comes before any block of the data is read."""
    written = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=data.shape,
                              chunks=(12, P), dtype=data.dtype)
    written[...] = data
    store = CountingRows(zarr.open_array(str(tmp_path / "x.zarr"), mode="r"))
    X = da.from_array(store, chunks=(12, P), meta=np.empty((0, 0)), asarray=True)
    with dask.config.set({"kpca-dask.memory-limit": "4 MiB"}):  # B = 200 at m = 60: 5.9 MB
        with pytest.raises(InsufficientMemoryError, match="200 replicates of 60 landmarks"):
            kpca_dask.bootstrap(linear_fit, X, 200)
    assert store.total() == 0


# -- an exact model's bootstrap, from its kernel matrix ------------------------------


def test_an_exact_linear_model_equals_xeofs_eof_bootstrapper(data):
    """An ExactKernelPCA's replicates, solved from its kernel matrix, are xeofs'
    EOFBootstrapper's for the rows it resamples: variances, ratios and congruence."""
    field, expected, model, indices = _xeofs_bootstrap(data, 6, 5)
    boot = kpca_dask.bootstrap(kpca_dask.ExactKernelPCA(Q, kernel="linear").fit(field), field,
                               indices=indices)
    _assert_xeofs_replicates(boot, expected, model)
    assert "projection" not in boot  # no landmarks: the replicates' modes are not kept


@pytest.mark.parametrize("chunks", [None, 7, 25])
def test_an_exact_rbf_model_equals_every_landmark_for_the_same_counts(data, chunks):
    """With the rbf kernel, the exact bootstrap equals the Nyström bootstrap with every
    sample a landmark, for drawn counts, from numpy or dask rows in any chunks."""
    X = data if chunks is None else da.from_array(data, chunks=(chunks, P))
    exact = kpca_dask.ExactKernelPCA(Q, kernel="rbf", gamma=0.02).fit(X)
    landmarks = KernelPCA(Q, kernel="rbf", gamma=0.02, n_landmarks=N,
                          landmarks="uniform").fit(data)
    got = kpca_dask.bootstrap(exact, X, 12, seed=4)
    expected = kpca_dask.bootstrap(landmarks, data, 12, seed=4)
    for name in ("explained_variance", "explained_variance_ratio", "total_variance",
                 "congruence", "explained_variance_lower", "significant"):
        np.testing.assert_allclose(got[name].values, expected[name].values, rtol=1e-8,
                                   atol=1e-10, err_msg=name)


def test_an_exact_model_of_a_kernel_matrix_or_other_rows_is_refused(data):
    K = kpca_dask.ExactKernelPCA(Q, kernel="precomputed").fit(data @ data.T)
    with pytest.raises(InvalidParameterError, match="precomputed kernel matrix"):
        kpca_dask.bootstrap(K, data @ data.T, 5)
    exact = kpca_dask.ExactKernelPCA(Q, kernel="linear").fit(data)
    with pytest.raises(InvalidInputError, match="bootstrap the data the model was fitted on"):
        kpca_dask.bootstrap(exact, data[:50], 5)
    with pytest.raises(InvalidParameterError, match="n_modes must be an int from 1 to 3"):
        kpca_dask.bootstrap(exact, data, 5, n_modes=4)


def test_a_hilbert_gram_model_equals_the_resampled_analytic_signals_modes():
    """A Hilbert EOF fitted by the Gram way: each replicate's variances and the congruence
    of its complex modes with the fit's are those of the whole record's analytic signal
    with its rows resampled, solved directly (numpy), to 1e-10."""
    from _complex_modes import travelling_waves

    from kpca_dask.io.preprocessing.analytic_signal import analytic_signal

    n, p, q = 60, 80, 2
    X = travelling_waves(n, p, seed=0)
    model = kpca_dask.HilbertKernelEOF(q, padding="none", solver="gram").fit(X)
    rng = np.random.default_rng(1)
    indices = np.stack([rng.choice(n, n) for _ in range(4)])
    boot = kpca_dask.bootstrap(model, da.from_array(X, chunks=(20, p)), indices=indices)
    Z = analytic_signal(X - X.mean(axis=0), "none", 0.2)
    fitted = np.linalg.eigh((Z - Z.mean(0)).conj().T @ (Z - Z.mean(0)))[1][:, ::-1][:, :q]
    for b, rows in enumerate(indices):
        Zb = Z[rows] - Z[rows].mean(axis=0)
        values, vectors = np.linalg.eigh(Zb.conj().T @ Zb)
        values, vectors = values[::-1][:q], vectors[:, ::-1][:, :q]
        np.testing.assert_allclose(boot["explained_variance"].values[b], values / (n - 1),
                                   rtol=1e-10)
        np.testing.assert_allclose(boot["congruence"].values[b],
                                   np.abs(np.einsum("pk,pk->k", vectors.conj(), fitted)),
                                   atol=1e-10)
    # With every sample a landmark, the landmark way's replicate sums give the same.
    landmarks = kpca_dask.HilbertKernelEOF(q, padding="none", solver="nystrom",
                                           n_landmarks=n).fit(X)
    again = kpca_dask.bootstrap(landmarks, da.from_array(X, chunks=(7, p)), indices=indices)
    for name in ("explained_variance", "explained_variance_ratio", "congruence"):
        np.testing.assert_allclose(again[name].values, boot[name].values, rtol=1e-8,
                                   atol=1e-10, err_msg=name)


def test_a_hilbert_landmark_model_is_the_same_for_any_chunking():
    """Fewer landmarks than samples: drawn counts give the same replicates whatever the
    chunking, and counts of one give back the fit."""
    from _complex_modes import travelling_waves

    X = travelling_waves(80, 12, seed=2)
    model = kpca_dask.HilbertKernelEOF(2, kernel="rbf", solver="nystrom", n_landmarks=30,
                                       random_state=0).fit(X)
    whole = kpca_dask.bootstrap(model, X, 10, seed=3)
    for chunks in (9, 40):
        other = kpca_dask.bootstrap(model, da.from_array(X, chunks=(chunks, 12)), 10, seed=3)
        np.testing.assert_allclose(other["explained_variance"].values,
                                   whole["explained_variance"].values, rtol=1e-10)
        np.testing.assert_allclose(other["congruence"].values, whole["congruence"].values,
                                   atol=1e-10)
    same = kpca_dask.bootstrap(model, X, indices=np.arange(80)[None, :])
    np.testing.assert_allclose(same["explained_variance"].values[0],
                               model.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(same["congruence"].values, 1.0, atol=1e-10)


@pytest.mark.parametrize("n_pca_modes", [None, 3])
def test_an_extended_eof_is_its_kernel_stage_on_the_embedded_samples(data, n_pca_modes):
    """The extended EOF's bootstrap resamples its embedded samples: its kernel stage's
    bootstrap of estimator.embedded(X), for the same counts."""
    eeof = kpca_dask.ExtendedKernelEOF(2, tau=2, embedding=3, n_pca_modes=n_pca_modes,
                                       n_landmarks=N, landmarks="uniform").fit(data)
    got = kpca_dask.bootstrap(eeof, data, 8, seed=2)
    expected = kpca_dask.bootstrap(eeof.kpca_, eeof.embedded(data), 8, seed=2)
    assert got.attrs["n_samples"] == N - 4 == eeof.n_samples_fit_
    xr.testing.assert_allclose(got, expected)
