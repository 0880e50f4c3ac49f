"""gamma="median" and gamma="scale": values, sampling, conventions and errors."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from scipy.spatial.distance import pdist

from kpca_dask import KernelPCA
from kpca_dask.datasets import make_dataset
from kpca_dask.engine.bandwidth import MEDIAN_SAMPLE_ROWS, resolve_gamma
from kpca_dask.engine.sampling import as_generator, independent_generators, sample_rows
from kpca_dask.errors import InvalidParameterError, NonFiniteInputError


@pytest.fixture(scope="module")
def shells() -> np.ndarray:
    X, _ = make_dataset("two-shells", 2500, chunk_rows=2500, seed=1)
    return X.compute()


def _bandwidth_generator(seed):
    """The generator the estimator draws the bandwidth sample from."""
    return independent_generators(as_generator(seed), 2)[0]


@pytest.mark.parametrize("seed", [0, 7])
def test_median_matches_direct_computation_on_the_same_sample(shells, seed):
    """gamma_ = 2 / median squared distance over all pairs of the same sampled rows."""
    X = da.from_array(shells, chunks=(600, -1))
    sample, _ = sample_rows(X, MEDIAN_SAMPLE_ROWS, _bandwidth_generator(seed))
    assert sample.shape[0] == MEDIAN_SAMPLE_ROWS < shells.shape[0]
    expected = 2.0 / np.median(pdist(sample, "sqeuclidean"))
    fitted = KernelPCA(n_components=2, gamma="median", n_landmarks=50,
                       random_state=seed).fit(X)
    np.testing.assert_allclose(fitted.gamma_, expected, rtol=1e-12)
    assert fitted.kernel_params_["gamma"] == fitted.gamma_


def test_median_convention_gives_exp_minus_two_at_the_median_distance():
    """exp(-gamma h) = e^{-2} for h the median squared distance (c^2 = h / 2)."""
    X = da.from_array(np.array([[0.0], [1.0], [3.0]]), chunks=(2, -1))
    gamma = resolve_gamma("median", X, "rbf", rng=as_generator(0))
    assert np.exp(-gamma * 4.0) == pytest.approx(np.exp(-2.0))


def test_median_for_laplacian_uses_l1_distances():
    """The laplacian kernel's median heuristic uses the L1 distance in its exponent."""
    rows = np.array([[0.0, 0.0], [1.0, 1.0], [3.0, 0.0]])  # L1 distances 2, 3, 3
    gamma = resolve_gamma("median", da.from_array(rows), "laplacian", rng=as_generator(0))
    assert gamma == pytest.approx(2.0 / 3.0)


def test_median_does_not_depend_on_chunking(shells):
    """The sample is drawn by global row index: same gamma_ for any chunking."""
    values = {resolve_gamma("median", da.from_array(shells, chunks=(c, -1)), "rbf",
                            rng=as_generator(3)) for c in (2500, 311, 64)}
    assert len(values) == 1


def test_scale_equals_sklearn_rule_when_the_sample_is_all_of_x(shells):
    """On fewer rows than the sample size, 'scale' is exactly 1 / (p X.var())."""
    fitted = KernelPCA(n_components=2, gamma="scale", n_landmarks=50, random_state=0).fit(shells)
    assert fitted.gamma_ == pytest.approx(1.0 / (shells.shape[1] * shells.var()), rel=1e-12)


def test_estimated_gamma_leaves_the_landmarks_unchanged(shells):
    """gamma='median' draws from its own stream: refitting with gamma=gamma_ is the same model."""
    by_rule = KernelPCA(n_components=3, gamma="median", n_landmarks=60,
                        random_state=4).fit(shells)
    by_value = KernelPCA(n_components=3, gamma=by_rule.gamma_, n_landmarks=60,
                         random_state=4).fit(shells)
    np.testing.assert_array_equal(by_rule.landmarks_, by_value.landmarks_)
    np.testing.assert_allclose(by_rule.eigenvalues_, by_value.eigenvalues_, rtol=1e-12)


def test_kernel_without_gamma_ignores_the_rule(shells):
    """The linear kernel takes no gamma, so gamma='median' resolves to None."""
    fitted = KernelPCA(n_components=2, kernel="linear", gamma="median", n_landmarks=10,
                       random_state=0).fit(shells)
    assert fitted.gamma_ is None


@pytest.mark.parametrize(
    ("kernel", "gamma", "message"),
    [
        ("polynomial", "median", "does not use"),
        ("rbf", "mean", "not a rule"),
    ],
)
def test_bad_rule_raises(shells, kernel, gamma, message):
    """A rule that does not apply, or an unknown rule, raises InvalidParameterError."""
    with pytest.raises(InvalidParameterError, match=message):
        KernelPCA(kernel=kernel, gamma=gamma, n_landmarks=10).fit(shells)


def test_median_of_duplicate_rows_raises():
    """Mostly identical rows give a median distance of 0: a clear error, not gamma=inf."""
    X = np.zeros((50, 2))
    X[0] = 1.0
    with pytest.raises(InvalidParameterError, match="median pairwise distance of 0"):
        KernelPCA(gamma="median", n_landmarks=10).fit(X)


def test_nonfinite_sample_raises_with_the_row():
    """A NaN among the sampled rows is reported with its global row number."""
    X = np.ones((20, 2))
    X[13, 1] = np.nan
    with pytest.raises(NonFiniteInputError, match="row 13"):
        resolve_gamma("median", da.from_array(X, chunks=(6, -1)), "rbf", rng=as_generator(0))
