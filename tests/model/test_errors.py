"""Every user error gives one clear message, and a failed fit changes nothing."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from kpca_dask import (
    InvalidInputError,
    InvalidParameterError,
    KernelPCA,
    NonFiniteInputError,
)


@pytest.fixture
def X(rng):
    return rng.normal(size=(60, 3))


def test_nan_in_numpy_input_reports_count_and_row(X):
    """NaN/inf in numpy input: how many, and the first row."""
    X[7, 1] = np.nan
    X[9, 0] = np.inf
    with pytest.raises(NonFiniteInputError,
                       match=r"2 NaN or infinite value\(s\), the first in row 7"):
        KernelPCA(2).fit(X)


def test_nan_in_dask_input_found_by_the_pass(X):
    """In dask input the pass itself finds them (no extra read of the data)."""
    X[41, 2] = np.nan
    X[50, 0] = -np.inf
    landmarks = np.zeros((1, 3)) + np.eye(3)[:1]
    with pytest.raises(NonFiniteInputError,
                       match=r"2 NaN or infinite value\(s\), the first in row 41"):
        KernelPCA(1, landmarks=landmarks, kernel="linear").fit(da.from_array(X, chunks=20))


def test_nan_in_a_landmark_row(X):
    """A bad row among those sampled for landmarks is named, whatever the strategy."""
    X[:, 0] = np.nan
    with pytest.raises(NonFiniteInputError,
                       match="NaN or infinite values in row 0, found while choosing landmarks"):
        KernelPCA(2, n_landmarks=5, random_state=0).fit(da.from_array(X, chunks=20))


def test_nan_at_transform_time_of_lazy_input(X):
    """Lazy transform raises when the bad block is computed, naming the row."""
    kpca = KernelPCA(2, n_landmarks=20, random_state=0).fit(X)
    bad = X.copy()
    bad[33, 1] = np.nan
    Y = kpca.transform(da.from_array(bad, chunks=20))
    with pytest.raises(NonFiniteInputError, match="first in row 33"):
        Y.compute()


@pytest.mark.parametrize("shape, match", [((10,), "must be a 2-D array.*reshape"),
                                          ((2, 3, 4), r"3-d array.*DataArray.*reshape\(len")])
def test_wrong_ndim(shape, match):
    """1-D input: say it must be 2-D and how to reshape; 3-D: rows or a labelled field,
    without the hint for one feature."""
    with pytest.raises(InvalidInputError, match=match) as caught:
        KernelPCA(2).fit(np.ones(shape))
    assert len(shape) == 1 or "reshape(-1, 1)" not in str(caught.value)


@pytest.mark.parametrize("shape, match", [((0, 3), "0 sample"), ((1, 3), "1 sample"),
                                          ((5, 0), "0 feature")])
def test_too_few_rows_or_features(shape, match):
    """Zero rows, a single row and zero features are refused."""
    with pytest.raises(InvalidInputError, match=match):
        KernelPCA(2).fit(np.ones(shape))


def test_non_numeric_dtype():
    """Strings are not numbers: the message names the dtype."""
    with pytest.raises(InvalidInputError, match="not numeric"):
        KernelPCA(2).fit(np.array([["a", "b"], ["c", "d"]]))


def test_complex_dtype(X):
    """Complex data are refused with a hint."""
    with pytest.raises(InvalidInputError, match="Complex data not supported"):
        KernelPCA(2).fit(X + 1j)


def test_sparse_input_with_nonfinite_values(X):
    """A NaN stored in a sparse matrix is found and its row named."""
    from scipy import sparse

    X = X.copy()
    X[7, 1] = np.nan
    with pytest.raises(NonFiniteInputError, match="first in row 7"):
        KernelPCA(2).fit(sparse.csr_matrix(X))


def test_too_many_components(X):
    """More components than positive eigenvalues: a warning says how many are zero."""
    from kpca_dask.errors import ZeroEigenvalueWarning

    with pytest.warns(ZeroEigenvalueWarning, match="n_components=5, but only 3.*last 2"):
        KernelPCA(5, kernel="linear").fit(X)


def test_precomputed_kernel_needs_the_square_kernel_matrix(X):
    """kernel="precomputed" given the points instead of their kernel matrix says what to pass."""
    with pytest.raises(InvalidInputError, match="n x n kernel matrix.*got shape"):
        KernelPCA(2, kernel="precomputed", landmarks="uniform").fit(X)


def test_unknown_kernel_lists_valid_names(X):
    """An unknown kernel lists the valid ones."""
    with pytest.raises(InvalidParameterError, match="Unknown kernel 'gauss'.*gaussian.*laplacian"):
        KernelPCA(2, kernel="gauss").fit(X)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"gamma": -0.5}, "gamma must be a positive"),
        ({"kernel": "polynomial", "degree": 0.5}, "degree must be a whole number >= 1"),
        ({"kernel": "polynomial", "degree": 2.5}, "degree must be a whole number >= 1"),
        ({"n_components": 0}, "n_components must be"),
        ({"n_components": 1.5}, "n_components must be"),
        ({"n_landmarks": 0}, "n_landmarks must be"),
        ({"dtype": "float16"}, "dtype must be"),
        ({"rcond": 2.0}, "rcond must be"),
        ({"landmarks": "everywhere"}, "Unknown landmarks strategy 'everywhere'.*uniform"),
        ({"landmarks": np.ones((4, 2))}, r"shape \(n_landmarks, 3\)"),
    ],
)
def test_invalid_parameters(X, params, match):
    """Out-of-range parameters raise InvalidParameterError at fit time."""
    with pytest.raises(InvalidParameterError, match=match):
        KernelPCA(**{"n_components": 2, **params}).fit(X)


def test_transform_with_other_number_of_features(X):
    """transform checks the feature count against fit."""
    kpca = KernelPCA(2, n_landmarks=10, random_state=0).fit(X)
    with pytest.raises(InvalidInputError, match="X has 4 features, but KernelPCA is expecting 3"):
        kpca.transform(np.ones((5, 4)))


def test_transform_before_fit(X):
    """transform before fit raises scikit-learn's NotFittedError."""
    with pytest.raises(NotFittedError, match="not fitted yet"):
        KernelPCA(2).transform(X)


def test_failed_refit_keeps_the_fitted_model(X):
    """A fit that fails leaves the previous fitted state untouched."""
    kpca = KernelPCA(2, n_landmarks=10, random_state=0).fit(X)
    before = kpca.eigenvalues_.copy(), kpca.landmarks_.copy()
    bad = X.copy()
    bad[3, 0] = np.nan
    with pytest.raises(NonFiniteInputError):
        kpca.fit(da.from_array(bad, chunks=20))
    np.testing.assert_array_equal(kpca.eigenvalues_, before[0])
    np.testing.assert_array_equal(kpca.landmarks_, before[1])


def test_params_are_not_modified(X):
    """fit never writes into the caller's kernel_params."""
    params = {"nu": 2.5}
    KernelPCA(2, kernel="matern", kernel_params=params, n_landmarks=10, random_state=0).fit(X)
    assert params == {"nu": 2.5}
