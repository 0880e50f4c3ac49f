"""Behaviours code written for scikit-learn's KernelPCA relies on, checked against it.

Each test runs scikit-learn's KernelPCA on the same data and asserts that
kpca-dask behaves the same way where user code would otherwise break.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from sklearn.exceptions import NotFittedError

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import InvalidParameterError, NotInvertibleError, SlowKernelWarning


@pytest.fixture
def X() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(40, 3))


def test_inverse_without_the_map_is_a_not_fitted_error_as_in_scikit_learn(X):
    """inverse_transform of a model fitted without fit_inverse_transform raises an error
    that an ``except NotFittedError`` written for scikit-learn catches."""
    with pytest.raises(NotFittedError, match="fit_inverse_transform"):
        SklearnKernelPCA(2).fit(X).inverse_transform(np.zeros((1, 2)))
    model = KernelPCA(2, n_landmarks=10, random_state=0).fit(X)
    with pytest.raises(NotFittedError, match="fit_inverse_transform=True") as caught:
        model.inverse_transform(np.zeros((1, 2)))
    assert isinstance(caught.value, NotInvertibleError)
    assert isinstance(caught.value, ValueError)  # still what it was before


def _gaussian_of_two_rows(x, y, gamma=0.5):
    """A kernel as scikit-learn's KernelPCA calls it: two 1-D rows, one float."""
    return float(np.exp(-gamma * np.sum((x - y) ** 2)))


def _gaussian_of_two_blocks(A, B, gamma=0.5):
    """The same kernel in block form."""
    squared = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=-1)
    return np.exp(-gamma * squared)


def test_row_pair_callable_kernel_matches_scikit_learn(X):
    """A scikit-learn-style callable (two 1-D rows -> float) fits, with every row a landmark,
    to scikit-learn's embedding of the same data, with a warning naming the cost and the
    block form."""
    reference = SklearnKernelPCA(3, kernel=_gaussian_of_two_rows).fit(X)
    with pytest.warns(SlowKernelWarning, match=r"once per pair.*n x m.*block form"):
        model = KernelPCA(3, kernel=_gaussian_of_two_rows, n_landmarks=len(X),
                          landmarks="uniform", random_state=0).fit(X)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(np.abs(model.transform(X[:7])),
                               np.abs(reference.transform(X[:7])), atol=1e-8)


def test_row_pair_callable_kernel_takes_kernel_params(X):
    """kernel_params reach a row-pair callable as keyword arguments, as in scikit-learn."""
    reference = SklearnKernelPCA(2, kernel=_gaussian_of_two_rows,
                                 kernel_params={"gamma": 2.0}).fit(X)
    with pytest.warns(SlowKernelWarning):
        model = ExactKernelPCA(2, kernel=_gaussian_of_two_rows,
                               kernel_params={"gamma": 2.0}).fit(X)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10)


def test_block_callable_kernel_is_called_on_blocks(X):
    """A block-form callable is used as it is: no warning, the same model as the row-pair
    form of the same kernel."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowKernelWarning)
        blocks = KernelPCA(3, kernel=_gaussian_of_two_blocks, n_landmarks=15,
                           random_state=0).fit(X)
    assert blocks.kernel_ is _gaussian_of_two_blocks
    with pytest.warns(SlowKernelWarning):
        rows = KernelPCA(3, kernel=_gaussian_of_two_rows, n_landmarks=15,
                         random_state=0).fit(X)
    np.testing.assert_allclose(rows.eigenvalues_, blocks.eigenvalues_, rtol=1e-10)


def test_callable_of_neither_form_keeps_its_error(X):
    """A callable that returns neither a block nor a number is refused as before, naming the
    shape it returned."""
    with pytest.raises(InvalidParameterError, match="kernel callable returned shape"):
        KernelPCA(2, kernel=lambda A, B: np.ones(3), n_landmarks=10).fit(X)
