"""kernel="precomputed" in ExactKernelPCA, as in scikit-learn's KernelPCA."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from sklearn.metrics.pairwise import rbf_kernel

from kpca_dask import ExactKernelPCA
from kpca_dask.errors import InvalidInputError


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(40, 3)), rng.normal(size=(7, 3))


def test_precomputed_equals_the_named_kernel(data):
    """fit(K) / transform(K_new) give what kernel="rbf" gives on the points."""
    X, X_new = data
    named = ExactKernelPCA(4, kernel="rbf", gamma=0.5).fit(X)
    pre = ExactKernelPCA(4, kernel="precomputed").fit(rbf_kernel(X, gamma=0.5))
    np.testing.assert_allclose(pre.eigenvalues_, named.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(pre.transform(rbf_kernel(X_new, X, gamma=0.5)),
                               named.transform(X_new), atol=1e-10)


def test_precomputed_equals_scikit_learn(data):
    """The same numbers as sklearn's KernelPCA(kernel="precomputed"), up to sign."""
    X, X_new = data
    K, K_new = rbf_kernel(X, gamma=0.5), rbf_kernel(X_new, X, gamma=0.5)
    ours = ExactKernelPCA(4, kernel="precomputed")
    theirs = SklearnKernelPCA(4, kernel="precomputed")
    np.testing.assert_allclose(np.abs(ours.fit_transform(K)), np.abs(theirs.fit_transform(K)),
                               atol=1e-10)
    np.testing.assert_allclose(np.abs(ours.transform(K_new)), np.abs(theirs.transform(K_new)),
                               atol=1e-10)


def test_precomputed_fit_needs_a_square_matrix(data):
    """Passing the data instead of the kernel matrix says what to pass."""
    with pytest.raises(InvalidInputError, match="square kernel matrix.*got shape \\(40, 3\\)"):
        ExactKernelPCA(2, kernel="precomputed").fit(data[0])


def test_precomputed_transform_needs_one_column_per_training_point(data):
    """transform refuses kernel rows that are not against the training points."""
    X, _ = data
    model = ExactKernelPCA(2, kernel="precomputed").fit(rbf_kernel(X))
    with pytest.raises(InvalidInputError, match="against the 40 training points"):
        model.transform(rbf_kernel(X[:5], X[:10]))
