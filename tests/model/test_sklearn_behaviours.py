"""Behaviours code written for scikit-learn's KernelPCA relies on, checked against it.

Each test runs scikit-learn's KernelPCA on the same data and asserts that
kpca-dask behaves the same way where user code would otherwise break.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from sklearn.exceptions import NotFittedError

from kpca_dask import KernelPCA
from kpca_dask.errors import NotInvertibleError


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
