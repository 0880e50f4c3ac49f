"""Landmark strategies: determinism, chunking, what each returns, and accuracy."""

from __future__ import annotations

import functools

import dask.array as da
import numpy as np
import pytest

from kpca_dask import KernelPCA
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.datasets import make_dataset
from kpca_dask.engine.sampling import as_generator, sample_rows
from kpca_dask.errors import InvalidParameterError, NonFiniteInputError
from kpca_dask.landmarks import Landmarks, kmeans, rpcholesky, select_landmarks
from kpca_dask.landmarks.kmeans_clustering import kmeans_plusplus, lloyd
from kpca_dask.landmarks.pivoted_cholesky import rpcholesky as rpcholesky_factor

STRATEGIES = ["uniform", "kmeans", "rpcholesky"]
RBF = {"gamma": 0.5}


@pytest.fixture(scope="module")
def circles() -> np.ndarray:
    X, _ = make_dataset("circles", 1500, chunk_rows=1500, seed=3)
    return X.compute()


def _select(X, strategy, seed, m=40):
    return select_landmarks(X, m, strategy, rng=as_generator(seed), kernel="rbf", params=RBF)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_same_seed_same_landmarks(circles, strategy):
    """A fixed seed gives bitwise identical landmarks on every call."""
    X = da.from_array(circles, chunks=(500, -1))
    first, second = _select(X, strategy, 5), _select(X, strategy, 5)
    np.testing.assert_array_equal(first.points, second.points)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_other_seed_other_landmarks(circles, strategy):
    """A different seed gives different landmarks."""
    X = da.from_array(circles, chunks=(500, -1))
    assert not np.array_equal(_select(X, strategy, 5).points, _select(X, strategy, 6).points)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("chunks", [(1500,), (137,), ((1, 999, 300, 200),)])
def test_chunking_does_not_change_the_landmarks(circles, strategy, chunks):
    """One block, many blocks and irregular blocks give bitwise the same landmarks."""
    reference = _select(da.from_array(circles, chunks=(1500, -1)), strategy, 2)
    chunked = _select(da.from_array(circles, chunks=(chunks[0], -1)), strategy, 2)
    np.testing.assert_array_equal(chunked.points, reference.points)


@pytest.mark.parametrize("strategy", ["uniform", "rpcholesky"])
def test_row_strategies_return_data_rows(circles, strategy):
    """uniform and rpcholesky landmarks are distinct rows of X at their global indices."""
    chosen = _select(da.from_array(circles, chunks=(400, -1)), strategy, 0)
    assert np.unique(chosen.indices).size == chosen.indices.size == 40
    np.testing.assert_array_equal(chosen.points, circles[chosen.indices])
    assert chosen.n_passes == 0


def test_kmeans_landmarks_are_centroids(circles):
    """With Lloyd run to convergence each landmark is the mean of the sampled rows nearest it."""
    X = da.from_array(circles, chunks=(400, -1))
    strategy = functools.partial(kmeans, sample_factor=10, n_iter=300)
    chosen = select_landmarks(X, 12, strategy, rng=as_generator(4), kernel="rbf", params=RBF)
    assert chosen.indices is None
    sample, _ = sample_rows(X, 10 * 12, as_generator(4))  # the strategy's first draw
    nearest = np.argmin(pairwise_kernel(sample, chosen.points, "linear") * -2
                        + (chosen.points**2).sum(axis=1), axis=1)
    means = np.array([sample[nearest == j].mean(axis=0) for j in range(12)])
    np.testing.assert_allclose(chosen.points, means, rtol=1e-12, atol=1e-12)


def test_kmeans_landmarks_are_not_data_rows(circles):
    """kmeans returns centroids, which (for continuous data) are no row of X."""
    chosen = _select(da.from_array(circles, chunks=(400, -1)), "kmeans", 0)
    distance_to_nearest_row = np.sqrt(np.min(
        ((chosen.points[:, None, :] - circles[None, :, :]) ** 2).sum(axis=2), axis=1))
    assert np.all(distance_to_nearest_row > 1e-8)


def test_kmeans_with_more_landmarks_than_sample_returns_rows():
    """When m reaches the sample size the sampled rows themselves are the landmarks."""
    X = da.from_array(np.random.default_rng(0).normal(size=(30, 2)), chunks=(7, -1))
    chosen = select_landmarks(X, 30, "kmeans", rng=as_generator(0), kernel="rbf", params=RBF)
    np.testing.assert_array_equal(chosen.indices, np.arange(30))


@pytest.mark.parametrize("seed", range(4))
def test_kmeans_plusplus_seeds_every_separated_cluster(seed):
    """k-means++ puts one seed in each of k far-apart tight clusters."""
    rng = np.random.default_rng(seed)
    centres = 100.0 * np.arange(6)[:, None] * np.ones((1, 3))
    sample = np.repeat(centres, 50, axis=0) + rng.normal(scale=0.1, size=(300, 3))
    seeds = kmeans_plusplus(sample, 6, rng=rng, block_size=4)
    assert sorted(seeds // 50) == list(range(6))


def test_lloyd_reseeds_an_empty_cluster_deterministically():
    """A centroid that wins no row moves to the row farthest from its centroid."""
    sample = np.array([[0.0], [1.0], [2.0], [10.0]])
    centroids = lloyd(sample, np.array([[1.0], [100.0]]), n_iter=1)
    np.testing.assert_array_equal(centroids, [[3.25], [10.0]])


@pytest.fixture(scope="module")
def blobs_2d() -> np.ndarray:
    X, _ = make_dataset("blobs", 2000, n_features=2, chunk_rows=500, seed=0)
    return X.compute()


@pytest.mark.parametrize("seed", range(5))
def test_rpcholesky_beats_uniform_trace_error(blobs_2d, seed):
    """At equal m, RPCholesky's fitted trace error is below uniform's on structured data."""
    errors = {strategy: KernelPCA(n_components=5, gamma=0.5, n_landmarks=100, landmarks=strategy,
                                  random_state=seed).fit(blobs_2d).trace_error_
              for strategy in ("uniform", "rpcholesky")}
    assert errors["rpcholesky"] < 0.8 * errors["uniform"]


def test_rpcholesky_factor_interpolates_the_pivots():
    """F F^T equals the kernel on the pivots, and trace_error is the residual trace."""
    pool = np.random.default_rng(1).normal(size=(300, 3))
    result = rpcholesky_factor(pool, 30, rng=np.random.default_rng(1), params=RBF, block_size=7)
    F, P = result.factor, result.pivots
    K = pairwise_kernel(pool, pool, "rbf", **RBF)
    np.testing.assert_allclose(F[P] @ F[P].T, K[np.ix_(P, P)], atol=1e-12)
    np.testing.assert_allclose(result.trace_error, (300 - (F**2).sum()) / 300, rtol=1e-10)


def test_rpcholesky_stops_when_the_rank_runs_out():
    """A kernel of rank 3 yields 3 pivots, and the estimator reports n_landmarks_ = 3."""
    X = np.random.default_rng(2).normal(size=(400, 3))
    chosen = select_landmarks(da.from_array(X, chunks=(100, -1)), 10, "rpcholesky",
                              rng=as_generator(0), kernel="linear", params={})
    assert chosen.points.shape == (3, 3)
    kpca = KernelPCA(n_components=2, kernel="linear", n_landmarks=10, landmarks="rpcholesky",
                     random_state=0).fit(X)
    assert kpca.n_landmarks_ == 3
    assert kpca.trace_error_ < 1e-10


def test_explicit_landmarks_are_used_as_given(circles):
    """An array of points becomes landmarks_ unchanged, with no row indices."""
    points = np.array([[0.0, 0.0], [1.0, 0.5], [-1.5, 2.0], [2.0, -2.0]])
    kpca = KernelPCA(n_components=2, gamma=0.5, landmarks=points).fit(circles)
    np.testing.assert_array_equal(kpca.landmarks_, points)
    assert kpca.landmark_indices_ is None and kpca.n_landmarks_ == 4


def test_a_strategy_function_is_accepted(circles):
    """A callable strategy (a tuned partial) is called like a registered one: with the
    data, m, the seeded generator and the fitted kernel and its parameters, so that the
    untuned partial gives the registered strategy's model, and the tuned one the
    landmarks its own settings choose."""
    def fit(landmarks):
        return KernelPCA(n_components=2, gamma=0.5, n_landmarks=25, landmarks=landmarks,
                         random_state=0).fit(circles)

    registered, untuned = fit("rpcholesky"), fit(functools.partial(rpcholesky))
    np.testing.assert_array_equal(untuned.landmark_indices_, registered.landmark_indices_)
    np.testing.assert_array_equal(untuned.landmarks_, registered.landmarks_)
    np.testing.assert_allclose(untuned.eigenvalues_, registered.eigenvalues_, rtol=1e-12)
    tuned = fit(functools.partial(rpcholesky, pool_factor=5, block_size=3))
    assert tuned.n_landmarks_ == 25
    np.testing.assert_array_equal(tuned.landmarks_, circles[tuned.landmark_indices_])
    # A pool of 5 m rows instead of 20 m: the settings reached the function.
    assert not np.array_equal(tuned.landmark_indices_, registered.landmark_indices_)


def test_default_strategy_is_kmeans(circles):
    """The default landmarks are k-means centroids (the accuracy study's choice)."""
    kpca = KernelPCA(n_components=2, gamma=0.5, n_landmarks=20, random_state=0).fit(circles)
    assert kpca.landmarks == "kmeans" and kpca.landmark_indices_ is None


def test_unknown_strategy_lists_the_registered_ones(circles):
    """An unknown name raises and names every registered strategy."""
    with pytest.raises(InvalidParameterError, match="kmeans, rpcholesky, uniform"):
        KernelPCA(landmarks="greedy").fit(circles)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("bad_value", [np.nan, np.inf])
def test_nonfinite_sampled_row_is_named_by_its_global_index(strategy, bad_value):
    """NaN/inf in a sampled row of dask input: NonFiniteInputError with the global row."""
    X = np.random.default_rng(0).normal(size=(60, 3))
    X[37, 1] = bad_value
    with pytest.raises(NonFiniteInputError, match="row 37, found while choosing landmarks"):
        # 60 landmarks: every row is sampled, whatever the strategy.
        _select(da.from_array(X, chunks=20), strategy, seed=0, m=60)


def test_nonfinite_row_is_refused_before_kmeans():
    """With the default kmeans landmarks, NaN is a NonFiniteInputError, not an overflow."""
    X = np.random.default_rng(0).normal(size=(300, 3))
    X[250:, 0] = np.nan
    with pytest.raises(NonFiniteInputError, match=r"NaN or infinite values in row 2[5-9]\d, "):
        kmeans(da.from_array(X, chunks=100), 10, rng=as_generator(0))


@pytest.mark.parametrize("points", [[["a", "b"], ["c", "d"]], {"x": 1}, [[1.0, 2.0], [3.0]]])
def test_non_numeric_explicit_landmarks_are_refused(circles, points):
    """Explicit landmarks that are not an array of numbers raise InvalidParameterError."""
    with pytest.raises(InvalidParameterError, match="not an array of numbers"):
        _select(da.from_array(circles), points, seed=0)


def _returns_an_array(X, n_landmarks, *, rng, kernel, params):
    return np.zeros((n_landmarks, X.shape[1]))


def test_strategy_returning_no_landmarks_object_is_refused(circles):
    """A strategy function must return Landmarks; otherwise the error names the function."""
    with pytest.raises(InvalidParameterError,
                       match="_returns_an_array returned ndarray.*must return.*Landmarks"):
        _select(da.from_array(circles), _returns_an_array, seed=0)


def test_strategy_returning_landmarks_is_used(circles):
    """A strategy function returning Landmarks gives exactly those landmarks."""
    points = np.ones((3, 2))

    def fixed(X, n_landmarks, *, rng, kernel, params):
        return Landmarks(points=points, indices=None, n_passes=0)

    assert _select(da.from_array(circles), fixed, seed=0).points is points


def test_cluster_means_match_per_cluster_means_dense_and_sparse(rng):
    """One indicator product gives each cluster's mean and count; an empty one is NaN."""
    from scipy import sparse

    from kpca_dask.landmarks.kmeans_clustering import _cluster_means

    sample = rng.normal(size=(200, 3))
    labels = rng.integers(0, 4, size=200)
    labels[labels == 2] = 1  # cluster 2 empty
    for given in (sample, sparse.csr_matrix(sample)):
        means, counts = _cluster_means(given, labels, 5)
        np.testing.assert_array_equal(counts, np.bincount(labels, minlength=5))
        for k in (0, 1, 3):
            np.testing.assert_allclose(means[k], sample[labels == k].mean(axis=0), rtol=1e-12)
        assert np.isnan(means[[2, 4]]).all()


def test_lloyd_on_a_prepared_sample_equals_lloyd_on_the_array(rng):
    """kmeans_centroids centres the sample once for seeding and Lloyd: same centroids."""
    from kpca_dask.landmarks.kmeans_clustering import _Points

    sample = rng.normal(size=(300, 4)) + 100.0
    start = sample[:7]
    np.testing.assert_array_equal(lloyd(_Points(sample), start, 5), lloyd(sample, start, 5))
