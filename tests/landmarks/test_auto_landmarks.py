"""n_landmarks="auto": growth path, stopping rule, cap and reproducibility."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from kpca_dask import KernelPCA
from kpca_dask.datasets import make_dataset
from kpca_dask.errors import InvalidParameterError

# Uniform landmarks need a few doublings on these data, so the path has several steps.
AUTO = dict(n_components=3, gamma=0.5, n_landmarks="auto", landmarks="uniform", random_state=0)


@pytest.fixture(scope="module")
def blobs_2d() -> np.ndarray:
    X, _ = make_dataset("blobs", 3000, n_features=2, chunk_rows=3000, seed=0)
    return X.compute()


@pytest.fixture(scope="module")
def uniform_auto(blobs_2d) -> KernelPCA:
    return KernelPCA(**AUTO).fit(blobs_2d)


def test_stops_at_the_first_m_below_tol(uniform_auto):
    """m doubles from 128; every estimate but the last is >= tol, the last is below it."""
    ms, errors = zip(*uniform_auto.landmark_path_)
    assert ms == tuple(128 * 2**k for k in range(len(ms))) and len(ms) >= 2
    assert all(e >= 1e-2 for e in errors[:-1]) and errors[-1] < 1e-2
    assert uniform_auto.n_landmarks_ == ms[-1]


def test_estimate_agrees_with_the_full_pass(uniform_auto):
    """The held-out estimate of the final m is within 25 % of the pass's trace_error_."""
    estimate = uniform_auto.landmark_path_[-1][1]
    assert estimate == pytest.approx(uniform_auto.trace_error_, rel=0.25)


def test_tighter_tol_takes_more_landmarks(blobs_2d, uniform_auto):
    """Lowering tol lengthens the path and lowers the final trace error."""
    tight = KernelPCA(**{**AUTO, "tol": 2e-3}).fit(blobs_2d)
    assert tight.n_landmarks_ > uniform_auto.n_landmarks_
    assert tight.trace_error_ < uniform_auto.trace_error_


@pytest.mark.parametrize("strategy", ["uniform", "kmeans", "rpcholesky"])
def test_final_model_equals_a_fixed_m_fit(blobs_2d, strategy):
    """The model at the final m is the one n_landmarks=m gives with the same seed."""
    auto = KernelPCA(**{**AUTO, "landmarks": strategy}).fit(blobs_2d)
    fixed = KernelPCA(**{**AUTO, "landmarks": strategy,
                         "n_landmarks": auto.n_landmarks_}).fit(blobs_2d)
    np.testing.assert_array_equal(auto.landmarks_, fixed.landmarks_)
    np.testing.assert_allclose(auto.eigenvalues_, fixed.eigenvalues_, rtol=1e-12)
    assert fixed.landmark_path_ is None


def test_path_does_not_depend_on_chunking(blobs_2d, uniform_auto):
    """Landmarks and held-out rows are drawn by global index: same path for any chunking."""
    chunked = KernelPCA(**AUTO).fit(da.from_array(blobs_2d, chunks=(433, -1)))
    assert chunked.landmark_path_ == uniform_auto.landmark_path_


def test_cap_warns_and_stops(blobs_2d):
    """Reaching max_landmarks above tol stops there with a ConvergenceWarning."""
    with pytest.warns(ConvergenceWarning, match="max_landmarks"):
        kpca = KernelPCA(**{**AUTO, "tol": 1e-6, "max_landmarks": 200}).fit(blobs_2d)
    assert [m for m, _ in kpca.landmark_path_] == [128, 200]


def test_fewer_rows_than_the_start_uses_every_row():
    """With n below the first m, every row is a landmark and the error is ~0."""
    X = np.random.default_rng(0).normal(size=(60, 2))
    kpca = KernelPCA(**AUTO).fit(X)
    assert kpca.n_landmarks_ == 60 and kpca.landmark_path_[0][0] == 60
    assert abs(kpca.trace_error_) < 1e-6  # what rcond drops of K_mm


def test_explicit_points_cannot_grow(blobs_2d):
    """Explicit landmark points with n_landmarks='auto' raise and say what to do."""
    with pytest.raises(InvalidParameterError, match="not explicit landmark points"):
        KernelPCA(**{**AUTO, "landmarks": blobs_2d[:5]}).fit(blobs_2d)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_landmarks": "many"}, "n_landmarks must be an int >= 1 or 'auto'"),
        ({"tol": 0.0}, "tol must be a number in"),
        ({"tol": 1.5}, "tol must be a number in"),
        ({"max_landmarks": 0}, "max_landmarks must be None or an int"),
    ],
)
def test_bad_auto_parameters_raise(blobs_2d, params, message):
    """Out-of-range auto parameters raise InvalidParameterError before any work."""
    with pytest.raises(InvalidParameterError, match=message):
        KernelPCA(**{**AUTO, **params}).fit(blobs_2d)
