"""With every point a landmark, Nyström kernel PCA is exact kernel PCA."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.decomposition import KernelPCA as SklearnKernelPCA

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.model.parameters import resolve_kernel_params

KERNELS = {
    "rbf": {"gamma": 0.3},
    "laplacian": {"gamma": 0.2},
    "polynomial": {"gamma": 0.1, "degree": 3, "coef0": 1.0},
    "linear": {},
    "cosine": {},
    "matern": {"gamma": 0.5},
}
N_COMPONENTS = 5


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(240, 5)), rng.normal(size=(30, 5))


def _sklearn_reference(kernel, params, X, X_new):
    """scikit-learn's dense exact KernelPCA on the precomputed kernel."""
    resolved = resolve_kernel_params(kernel, X.shape[1], **params)
    sk = SklearnKernelPCA(N_COMPONENTS, kernel="precomputed", eigen_solver="dense")
    train = sk.fit_transform(pairwise_kernel(X, X, kernel, **resolved))
    new = sk.transform(pairwise_kernel(X_new, X, kernel, **resolved))
    return sk.eigenvalues_, train, new


def _assert_equal_up_to_sign(got, expected, tolerance=1e-6):
    signs = np.sign(np.sum(got * expected, axis=0))
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected * signs, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_all_landmarks_reproduce_sklearn(data, kernel):
    """n_landmarks >= n: eigenvalues to 1e-6 relative, embeddings equal up to sign."""
    X, X_new = data
    expected_eigenvalues, expected_train, expected_new = _sklearn_reference(
        kernel, KERNELS[kernel], X, X_new)
    kpca = KernelPCA(N_COMPONENTS, kernel=kernel, n_landmarks=len(X), **KERNELS[kernel])
    train = kpca.fit_transform(X)
    np.testing.assert_allclose(kpca.eigenvalues_, expected_eigenvalues, rtol=1e-6)
    _assert_equal_up_to_sign(train, expected_train)
    _assert_equal_up_to_sign(kpca.transform(X_new), expected_new)
    assert abs(kpca.trace_error_) < 1e-8


@pytest.mark.parametrize("kernel", ["rbf", "polynomial", "cosine"])
def test_sklearn_string_kernels_agree_directly(data, kernel):
    """Against sklearn's own string kernels (not precomputed) too."""
    X, X_new = data
    params = {k: v for k, v in KERNELS[kernel].items()}
    sk_kernel = "poly" if kernel == "polynomial" else kernel
    sk = SklearnKernelPCA(N_COMPONENTS, kernel=sk_kernel, eigen_solver="dense", **params).fit(X)
    kpca = KernelPCA(N_COMPONENTS, kernel=kernel, n_landmarks=10_000, **params).fit(X)
    np.testing.assert_allclose(kpca.eigenvalues_, sk.eigenvalues_, rtol=1e-6)
    _assert_equal_up_to_sign(kpca.transform(X_new), sk.transform(X_new))


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_exact_reference_matches_sklearn(data, kernel):
    """ExactKernelPCA (the notes' JKJ route) equals scikit-learn's KernelPCA."""
    X, X_new = data
    expected_eigenvalues, expected_train, expected_new = _sklearn_reference(
        kernel, KERNELS[kernel], X, X_new)
    exact = ExactKernelPCA(N_COMPONENTS, kernel=kernel, **KERNELS[kernel])
    np.testing.assert_allclose(exact.fit(X).eigenvalues_, expected_eigenvalues, rtol=1e-10)
    _assert_equal_up_to_sign(exact.fit_transform(X), expected_train, 1e-10)
    _assert_equal_up_to_sign(exact.transform(X_new), expected_new, 1e-9)


def test_linear_kernel_is_pca(data):
    """The linear kernel reproduces PCA: eigenvalues = (n - 1) * explained_variance_."""
    X, X_new = data
    pca = PCA(n_components=4).fit(X)
    kpca = KernelPCA(4, kernel="linear", n_landmarks=len(X)).fit(X)
    np.testing.assert_allclose(kpca.eigenvalues_, (len(X) - 1) * pca.explained_variance_,
                               rtol=1e-10)
    _assert_equal_up_to_sign(kpca.transform(X_new), pca.transform(X_new), 1e-10)


def test_linear_kernel_with_few_landmarks_is_still_pca(data):
    """For the linear kernel, p + 1 generic landmarks already span the feature space."""
    X, _ = data
    pca = PCA(n_components=3).fit(X)
    kpca = KernelPCA(3, kernel="linear", n_landmarks=20, random_state=0).fit(X)
    np.testing.assert_allclose(kpca.eigenvalues_, (len(X) - 1) * pca.explained_variance_,
                               rtol=1e-9)


def test_float_n_components_is_q_eta(data):
    """n_components = eta keeps the smallest q whose cumulative ratio reaches eta."""
    X, _ = data
    full = KernelPCA(None, n_landmarks=len(X)).fit(X)
    cumulative = np.cumsum(full.explained_variance_ratio_)
    kpca = KernelPCA(0.8, n_landmarks=len(X)).fit(X)
    q = kpca.n_components_
    assert cumulative[q - 1] >= 0.8 > cumulative[q - 2]
    np.testing.assert_allclose(kpca.eigenvalues_, full.eigenvalues_[:q], rtol=1e-12)


def test_none_keeps_every_positive_eigenvalue(data):
    """n_components=None keeps every component with a positive eigenvalue."""
    X, _ = data
    kpca = KernelPCA(None, kernel="linear", n_landmarks=len(X)).fit(X)
    assert kpca.n_components_ == X.shape[1]
    np.testing.assert_allclose(kpca.explained_variance_ratio_.sum(), 1.0, rtol=1e-12)


@pytest.mark.parametrize("n_components", [0, -1, 2.5, 1.0, "3", True])
def test_exact_refuses_invalid_n_components(n_components):
    """ExactKernelPCA validates n_components as KernelPCA does."""
    from kpca_dask.errors import InvalidParameterError

    X = np.random.default_rng(0).normal(size=(30, 3))
    with pytest.raises(InvalidParameterError, match="n_components must be None, an int >= 1"):
        ExactKernelPCA(n_components=n_components).fit(X)


def test_exact_failed_refit_keeps_the_fitted_model():
    """A refit that fails (no positive eigenvalue) leaves every fitted attribute as it was."""
    from kpca_dask.errors import TooFewComponentsError

    X = np.random.default_rng(0).normal(size=(30, 3))
    exact = ExactKernelPCA(n_components=2, gamma=0.5).fit(X)
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in vars(exact).items()
              if k.endswith("_") or k.startswith("_")}
    exact.set_params(kernel="linear", n_components=0.9)
    with pytest.raises(TooFewComponentsError):
        exact.fit(np.ones((30, 3)))  # constant data: no variance to explain a fraction of
    for name, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(exact, name), value, err_msg=name)
        else:
            assert getattr(exact, name) == value, name


def test_exact_float32_input_is_fitted_in_float64():
    """float32 input gives the same model as its float64 values: the Gram matrix is float64."""
    X32 = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
    from32 = ExactKernelPCA(n_components=3, gamma=0.5).fit(X32)
    from64 = ExactKernelPCA(n_components=3, gamma=0.5).fit(X32.astype(np.float64))
    assert from32.eigenvalues_.dtype == np.float64 and from32.X_fit_.dtype == np.float64
    np.testing.assert_array_equal(from32.eigenvalues_, from64.eigenvalues_)
    np.testing.assert_array_equal(from32.transform(X32[:5]), from64.transform(X32[:5]))


def test_exact_signs_are_deterministic():
    """Each eigenvector's largest-magnitude entry is positive."""
    X = np.random.default_rng(1).normal(size=(40, 3))
    A = ExactKernelPCA(n_components=4, gamma=0.5).fit(X).eigenvectors_
    assert (A[np.argmax(np.abs(A), axis=0), np.arange(4)] > 0).all()


def test_exact_transform_refuses_other_number_of_features():
    """transform with other columns than fit raises InvalidInputError naming both counts."""
    from kpca_dask.errors import InvalidInputError

    X = np.random.default_rng(0).normal(size=(30, 3))
    exact = ExactKernelPCA(n_components=2).fit(X)
    with pytest.raises(InvalidInputError, match="X has 4 features, but ExactKernelPCA is "
                                                "expecting 3"):
        exact.transform(np.ones((2, 4)))
