"""Behaviours code written for scikit-learn's KernelPCA relies on, checked against it.

Each test runs scikit-learn's KernelPCA on the same data and asserts that
kpca-dask behaves the same way where user code would otherwise break.

The second part ports scikit-learn's own tests
(sklearn/decomposition/tests/test_kernel_pca.py) to kpca-dask's KernelPCA, with
every row a landmark where scikit-learn's numbers are compared (exact kernel
PCA: the default ``n_landmarks=1000`` is above their sizes). Where a port
lives elsewhere:

- test_remove_zero_eig, test_leave_zero_eig: tests/model/test_zero_eigenvalues.py
  (``test_near_duplicate_rows_as_in_scikit_learn``,
  ``test_leave_zero_eig_fit_transform_equals_fit_then_transform``); the
  ``n_components=None`` case is here;
- test_kernel_pca_precomputed, test_gridsearch_pipeline_precomputed:
  tests/model/test_precomputed.py; test_kernel_pca_precomputed_non_symmetric is
  here, with scikit-learn's exact comparison of eigenvectors_ (and its eigenvalues
  in tests/model/test_precomputed.py);
- test_kernel_pca_raise_not_fitted_error: the first test below.

What does not apply: the ``eigen_solver`` parameter (its "arpack" and
"randomized" variants, and test_kernel_pca_solvers_equivalence, which compares
them): kpca-dask chooses a dense or a Krylov solve of the m x m problem itself
(docs/design.md §11), and tests/engine/test_eigensolver.py holds the Krylov one
to the dense one. The randomized solver's error for ``n_components=2`` in
test_precomputed_kernel_not_psd comes from its selection by modulus, which
kpca-dask does not have: there ``n_components=2`` fits, as with the others.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn
from sklearn.datasets import load_iris, make_blobs, make_circles
from sklearn.decomposition import PCA
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Perceptron
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import _check_psd_eigenvalues

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.engine.solve.components import check_spectrum
from kpca_dask.errors import (
    InvalidParameterError,
    NegativeEigenvalueWarning,
    NotInvertibleError,
    NotPositiveSemidefiniteError,
    SlowKernelWarning,
    ZeroEigenvalueWarning,
)


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


# -- scikit-learn's test_kernel_pca.py, ported (module docstring) --------------------------


def _histogram(x, y, **kwargs):
    """scikit-learn's histogram kernel as a callable of two rows."""
    assert kwargs == {}  # no kernel_params that were not asked for
    return np.minimum(x, y).sum()


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", _histogram])
def test_kernel_pca(kernel):
    """test_kernel_pca: fit_transform equals fit then transform, no kernel gives an empty
    embedding (gamma defaults to 1 / n_features), new points and pre-images have the right
    shapes; and the embedding is scikit-learn's."""
    rng = np.random.RandomState(0)
    X_fit, X_pred = rng.random_sample((5, 4)), rng.random_sample((2, 4))
    inv = not callable(kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SlowKernelWarning)
        kpca = KernelPCA(4, kernel=kernel, fit_inverse_transform=inv)
        X_fit_transformed = kpca.fit_transform(X_fit)
        X_fit_transformed2 = kpca.fit(X_fit).transform(X_fit)
    np.testing.assert_array_almost_equal(np.abs(X_fit_transformed), np.abs(X_fit_transformed2))
    assert X_fit_transformed.size != 0
    X_pred_transformed = kpca.transform(X_pred)
    assert X_pred_transformed.shape[1] == X_fit_transformed.shape[1]
    reference = SklearnKernelPCA(4, kernel=kernel).fit(X_fit).transform(X_pred)
    np.testing.assert_allclose(np.abs(X_pred_transformed), np.abs(reference), atol=1e-8)
    if inv:
        assert kpca.inverse_transform(X_pred_transformed).shape == X_pred.shape


def test_kernel_pca_invalid_parameters():
    """test_kernel_pca_invalid_parameters: fit_inverse_transform with a precomputed kernel is
    a ValueError with scikit-learn's sentence."""
    estimator = KernelPCA(n_components=10, fit_inverse_transform=True, kernel="precomputed")
    with pytest.raises(ValueError, match="Cannot fit_inverse_transform with a precomputed kernel"):
        estimator.fit(np.random.randn(10, 10))


def test_kernel_pca_consistent_transform():
    """test_kernel_pca_consistent_transform: changing the training array after the fit
    changes no transform (the model keeps its own copy of what it needs)."""
    state = np.random.RandomState(0)
    X = state.rand(10, 10)
    kpca = KernelPCA(random_state=state).fit(X)
    transformed1 = kpca.transform(X)
    X_copy = X.copy()
    X[:, 0] = 666
    np.testing.assert_array_almost_equal(transformed1, kpca.transform(X_copy))


def test_kernel_pca_deterministic_output():
    """test_kernel_pca_deterministic_output: twenty fits with one advancing random state give
    the same embedding."""
    rng = np.random.RandomState(0)
    X = rng.rand(10, 10)
    first_rows = np.array([KernelPCA(n_components=2, random_state=rng).fit_transform(X)[0]
                           for _ in range(20)])
    np.testing.assert_allclose(first_rows, np.tile(first_rows[0], (20, 1)))


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
def test_kernel_pca_sparse(kernel):
    """test_kernel_pca_sparse: CSR input fits and transforms as in test_kernel_pca, and
    inverse_transform without the map is a NotFittedError."""
    rng = np.random.RandomState(0)
    X_fit = sp.csr_matrix(rng.random_sample((5, 4)))
    X_pred = sp.csr_matrix(rng.random_sample((2, 4)))
    kpca = KernelPCA(4, kernel=kernel, fit_inverse_transform=False, random_state=0)
    X_fit_transformed = kpca.fit_transform(X_fit)
    X_fit_transformed2 = kpca.fit(X_fit).transform(X_fit)
    np.testing.assert_array_almost_equal(np.abs(X_fit_transformed), np.abs(X_fit_transformed2))
    X_pred_transformed = kpca.transform(X_pred)
    reference = SklearnKernelPCA(4, kernel=kernel).fit(X_fit).transform(X_pred)
    np.testing.assert_allclose(np.abs(X_pred_transformed), np.abs(reference), atol=1e-8)
    with pytest.raises(NotFittedError):
        kpca.inverse_transform(X_pred_transformed)


def test_sparse_rows_get_the_dense_rows_pre_images():
    """Where scikit-learn refuses fit_inverse_transform for sparse rows (not implemented),
    kpca-dask learns the map from them: the pre-images of the dense rows' fit."""
    X = sp.random(60, 5, density=0.5, format="csr", random_state=0)
    params = dict(n_components=3, n_landmarks=15, landmarks="uniform", gamma=0.5,
                  fit_inverse_transform=True, random_state=0)
    sparse = KernelPCA(**params).fit(X)
    dense = KernelPCA(**params).fit(X.toarray())
    np.testing.assert_allclose(sparse.inverse_transform(sparse.transform(X[:4])),
                               dense.inverse_transform(dense.transform(X[:4].toarray())),
                               atol=1e-12)


@pytest.mark.parametrize("n_features", [4, 10])
def test_kernel_pca_linear_kernel(n_features):
    """test_kernel_pca_linear_kernel: the linear kernel's embedding of new points is PCA's,
    up to sign."""
    rng = np.random.RandomState(0)
    X_fit, X_pred = rng.random_sample((5, n_features)), rng.random_sample((2, n_features))
    np.testing.assert_array_almost_equal(
        np.abs(KernelPCA(4, kernel="linear").fit(X_fit).transform(X_pred)),
        np.abs(PCA(4, svd_solver="full").fit(X_fit).transform(X_pred)))


@pytest.mark.parametrize("c", [1, 2, 4])
def test_kernel_pca_n_components(c):
    """test_kernel_pca_n_components: new points get exactly n_components columns."""
    rng = np.random.RandomState(0)
    X_fit, X_pred = rng.random_sample((5, 4)), rng.random_sample((2, 4))
    assert KernelPCA(n_components=c).fit(X_fit).transform(X_pred).shape == (2, c)


def test_remove_zero_eig_with_n_components_none():
    """test_remove_zero_eig's default case: n_components=None keeps positive eigenvalues only,
    here none (3 rows equal to rounding), so the embedding is (3, 0); with a warning naming
    why, where scikit-learn is silent."""
    X = np.array([[1 - 1e-30, 1], [1, 1], [1, 1 - 1e-20]])
    assert SklearnKernelPCA().fit_transform(X).shape == (3, 0)
    with pytest.warns(ZeroEigenvalueWarning, match="no positive eigenvalue"):
        assert KernelPCA().fit_transform(X).shape == (3, 0)


@pytest.mark.parametrize("solver", ["auto", "dense", "arpack", "randomized"])
def test_kernel_pca_precomputed_non_symmetric(solver):
    """test_kernel_pca_precomputed_non_symmetric, as scikit-learn asserts it: a non-symmetric
    matrix and its centred form give the same eigenvectors_ and eigenvalues_, bit for bit.
    kpca-dask has no eigen_solver (module docstring): each of scikit-learn's four cases is the
    same fit, and its eigenvectors_ are those of scikit-learn's dense solver, exactly."""
    with pytest.warns(UserWarning, match="not symmetric"):
        kpca = KernelPCA(kernel="precomputed", n_components=1, random_state=0).fit(
            [[1, 2], [3, 40]])
    kpca_c = KernelPCA(kernel="precomputed", n_components=1, random_state=0).fit(
        [[9, -9], [-9, 9]])
    np.testing.assert_array_equal(kpca.eigenvectors_, kpca_c.eigenvectors_)
    np.testing.assert_array_equal(kpca.eigenvalues_, kpca_c.eigenvalues_)
    reference = SklearnKernelPCA(kernel="precomputed", eigen_solver="dense", n_components=1,
                                 random_state=0).fit([[1, 2], [3, 40]])
    np.testing.assert_array_equal(kpca.eigenvectors_, reference.eigenvectors_)


@pytest.mark.parametrize("n_components", [1, 4, 29])
def test_precomputed_eigenvectors_are_scikit_learns_bit_for_bit(n_components):
    """A precomputed kernel matrix with every row a landmark: eigenvectors_ are scikit-learn's
    (dense solver) exactly, signs included, and the model's embedding of the training rows
    has their signs (eigenvectors_ times lambda^{1/2})."""
    X = np.random.default_rng(0).normal(size=(30, 3))
    K = rbf_kernel(X, gamma=0.5)
    reference = SklearnKernelPCA(n_components, kernel="precomputed", eigen_solver="dense").fit(K)
    model = KernelPCA(n_components, kernel="precomputed", random_state=0).fit(K)
    np.testing.assert_array_equal(model.eigenvectors_, reference.eigenvectors_)
    np.testing.assert_allclose(model.eigenvectors_ * np.sqrt(model.eigenvalues_),
                               model.transform(K), atol=1e-10)


def test_gridsearch_pipeline():
    """test_gridsearch_pipeline: a grid search over gamma in a pipeline separates the circles
    perfectly."""
    X, y = make_circles(n_samples=400, factor=0.3, noise=0.05, random_state=0)
    pipeline = Pipeline([("kernel_pca", KernelPCA(kernel="rbf", n_components=2)),
                         ("Perceptron", Perceptron(max_iter=5))])
    grid_search = GridSearchCV(pipeline, cv=3,
                               param_grid={"kernel_pca__gamma": 2.0 ** np.arange(-2, 2)})
    grid_search.fit(X, y)
    assert grid_search.best_score_ == 1


def test_nested_circles():
    """test_nested_circles: circles a perceptron cannot separate become separable in the
    first two rbf components."""
    X, y = make_circles(n_samples=400, factor=0.3, noise=0.05, random_state=0)
    assert Perceptron(max_iter=5).fit(X, y).score(X, y) < 0.8
    X_kpca = KernelPCA(kernel="rbf", n_components=2, fit_inverse_transform=True,
                       gamma=2.0).fit_transform(X)
    assert Perceptron(max_iter=5).fit(X_kpca, y).score(X_kpca, y) == 1.0


def test_kernel_conditioning():
    """test_kernel_conditioning: a tiny positive eigenvalue (1e-12 of the largest) is set to 0,
    so the eigenvalues are what scikit-learn's eigenvalue check returns."""
    X = [[5, 1], [5 + 1e-8, 1e-8], [5 + 1e-8, 0]]
    with pytest.warns(ZeroEigenvalueWarning):
        kpca = KernelPCA(kernel="linear", n_components=2, fit_inverse_transform=True).fit(X)
    assert kpca.eigenvalues_.min() == 0
    assert np.all(kpca.eigenvalues_ == _check_psd_eigenvalues(kpca.eigenvalues_))


#: scikit-learn's kernel matrix that is not PSD (from an isomap run, times 100), centred:
#: eigenvalues 52.72, 7.65, 7.65, 5.02, 0, -0, -6.13, -15.11.
NOT_PSD = np.array([
    [4.48, -1.0, 8.07, 2.33, 2.33, 2.33, -5.76, -12.78],
    [-1.0, -6.48, 4.5, -1.24, -1.24, -1.24, -0.81, 7.49],
    [8.07, 4.5, 15.48, 2.09, 2.09, 2.09, -11.1, -23.23],
    [2.33, -1.24, 2.09, 4.0, -3.65, -3.65, 1.02, -0.9],
    [2.33, -1.24, 2.09, -3.65, 4.0, -3.65, 1.02, -0.9],
    [2.33, -1.24, 2.09, -3.65, -3.65, 4.0, 1.02, -0.9],
    [-5.76, -0.81, -11.1, 1.02, 1.02, 1.02, 4.86, 9.75],
    [-12.78, 7.49, -23.23, -0.9, -0.9, -0.9, 9.75, 21.46],
])

ESTIMATORS = {"nystrom": KernelPCA, "exact": ExactKernelPCA}


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_precomputed_kernel_not_psd(make):
    """test_precomputed_kernel_not_psd: n_components reaching a significantly negative
    eigenvalue is a ValueError with scikit-learn's message, which also says how to fix it;
    n_components=2 selects positive eigenvalues only and fits them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # K_mm's negative part, zero components
        with pytest.raises(ValueError,
                           match="There are significant negative eigenvalues") as caught:
            make(kernel="precomputed", n_components=7).fit(NOT_PSD)
        model = make(kernel="precomputed", n_components=2).fit(NOT_PSD)
    assert isinstance(caught.value, NotPositiveSemidefiniteError)
    assert "n_components <= 6" in str(caught.value)
    np.testing.assert_allclose(model.eigenvalues_, [52.7226661, 7.65], rtol=1e-8)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_an_indefinite_kernel_of_points_is_refused_with_every_row_a_landmark(make):
    """The sigmoid kernel's centred matrix on these rows has a significantly negative
    eigenvalue: with n_components=None (all of them) both estimators refuse it, as
    scikit-learn does, not only a precomputed matrix."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    params = dict(kernel="sigmoid", gamma=2.0, coef0=-1.0)
    with pytest.raises(ValueError, match="significant negative eigenvalues"):
        SklearnKernelPCA(**params).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(NotPositiveSemidefiniteError, match="significant negative"):
            make(None, **params).fit(X)


def test_fewer_landmarks_keep_the_positive_part_of_an_indefinite_kernel():
    """With fewer landmarks than rows the n x n matrix is never formed: the negative part of
    K_mm is dropped with a warning (docs/design.md §11), not refused."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.warns(UserWarning, match="not positive semi-definite on the landmarks"):
        model = KernelPCA(None, kernel="sigmoid", gamma=2.0, coef0=-1.0, n_landmarks=20,
                          random_state=0).fit(X)
    assert np.all(model.eigenvalues_ > 0)


def test_small_negative_eigenvalues_are_zeroed_with_a_warning():
    """A negative eigenvalue beyond rounding but below scikit-learn's threshold (1e-5 of the
    largest) is set to 0 with a NegativeEigenvalueWarning, a subclass of scikit-learn's
    PositiveSpectrumWarning."""
    basis = np.linalg.qr(np.column_stack([np.ones(5), np.eye(5)[:, :4]]))[0][:, 1:]  # _|_ 1
    K = basis @ np.diag([3.0, 2.0, 1.0, -1e-7]) @ basis.T  # centred, -1e-7 / 3 > -1e-5
    with pytest.warns(sklearn.exceptions.PositiveSpectrumWarning,
                      match="negative eigenvalues") as record:
        model = ExactKernelPCA(5, kernel="precomputed").fit(K)
    assert any(issubclass(w.category, NegativeEigenvalueWarning) for w in record)
    np.testing.assert_allclose(model.eigenvalues_, [3.0, 2.0, 1.0, 0.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("spectrum", [[5, -1], [5, -5e-5], [5, -4e-5], [1e-6, -1e-11],
                                      [1e-6, -2e-10], [-1, -5], [5, 4e-12], [0.0, -1.0],
                                      # 5e-5 and 5e-6 of the largest: either side of 1e-5,
                                      # both on the same side of 1e-4 or 1e-6.
                                      [5, -2.5e-4], [5, -2.5e-5], [1, -5e-5], [1, -5e-6],
                                      # the absolute threshold, with a ratio far past 1e-5
                                      [1e-6, -9e-11], [1e-6, -1.1e-10]])
def test_the_rule_is_scikit_learns(spectrum):
    """check_spectrum refuses exactly the spectra scikit-learn's _check_psd_eigenvalues
    refuses (below both 1e-5 of the largest and 1e-10, or all negative)."""
    lam = np.asarray(spectrum, np.float64)
    try:
        with np.errstate(divide="ignore"):  # its ratio to a largest eigenvalue of 0
            _check_psd_eigenvalues(lam)
    except ValueError as expected:
        with pytest.raises(NotPositiveSemidefiniteError) as caught:
            check_spectrum(lam, None)
        assert str(caught.value).startswith(str(expected).split(" (")[0])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NegativeEigenvalueWarning)
            check_spectrum(lam, None)


def _centred_kernel(spectrum) -> np.ndarray:
    """A centred 6 x 6 kernel matrix (K 1 = 0) with the eigenvalues ``spectrum`` (five)."""
    rng = np.random.default_rng(3)
    basis = np.linalg.qr(np.column_stack([np.ones(6), rng.normal(size=(6, 5))]))[0][:, 1:]
    return basis @ np.diag(spectrum) @ basis.T


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
@pytest.mark.parametrize(("ratio", "refused"), [(5e-5, True), (2e-5, True), (5e-6, False),
                                                 (5e-7, False)])
def test_the_negative_eigenvalue_threshold_is_one_in_a_hundred_thousand(make, ratio, refused):
    """A centred kernel matrix with a negative eigenvalue of ``ratio`` times the largest,
    every component asked for: refused from 1e-5 of it on (scikit-learn's threshold),
    set to 0 with a NegativeEigenvalueWarning below it, as scikit-learn does with the
    same matrix."""
    K = _centred_kernel([2.0, 1.0, 0.5, 0.25, -ratio * 2.0])
    if refused:
        with pytest.raises(ValueError, match="significant negative eigenvalues"):
            SklearnKernelPCA(6, kernel="precomputed", eigen_solver="dense").fit(K)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # K_mm's negative part
            with pytest.raises(NotPositiveSemidefiniteError,
                               match="significant negative eigenvalues"):
                make(kernel="precomputed", n_components=6).fit(K)
        return
    reference = SklearnKernelPCA(6, kernel="precomputed", eigen_solver="dense").fit(K)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        model = make(kernel="precomputed", n_components=6).fit(K)
    assert any(issubclass(w.category, NegativeEigenvalueWarning) for w in record)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, atol=1e-12)
    assert model.eigenvalues_[-1] == 0.0


def test_eigenvectors_with_every_row_a_landmark_are_scikit_learns(X):
    """eigenvectors_ with every row a landmark: scikit-learn's unit eigenvectors in training
    row order, up to sign, and the embedding of the training rows over sqrt(eigenvalues_)."""
    reference = SklearnKernelPCA(4, kernel="rbf", gamma=0.3).fit(X)
    model = KernelPCA(4, gamma=0.3, landmarks="kmeans", random_state=0).fit(X)
    np.testing.assert_allclose(np.abs(model.eigenvectors_), np.abs(reference.eigenvectors_),
                               atol=1e-10)
    np.testing.assert_allclose(model.eigenvectors_ * np.sqrt(model.eigenvalues_),
                               model.transform(X), atol=1e-12)


def test_eigenvectors_of_zero_components_are_unit_and_orthogonal(X):
    """Components with eigenvalue 0 (a rank-3 linear kernel, 5 asked) get unit eigenvectors
    orthogonal to the others, as scikit-learn's eigenvectors_ are."""
    with pytest.warns(ZeroEigenvalueWarning):
        model = KernelPCA(5, kernel="linear").fit(X)
    A = model.eigenvectors_
    np.testing.assert_allclose(A.T @ A, np.eye(5), atol=1e-12)
    K = X @ X.T
    J = np.eye(len(X)) - 1 / len(X)
    np.testing.assert_allclose(J @ K @ J @ A[:, 3:], 0.0, atol=1e-10)  # in the null space


def test_no_eigenvectors_with_fewer_landmarks_than_rows(X):
    """With fewer landmarks than rows the model holds no n x n matrix: eigenvectors_ is
    absent, and the error says how to get it."""
    model = KernelPCA(2, n_landmarks=10, random_state=0, solver="nystrom").fit(X)
    assert not hasattr(model, "eigenvectors_")
    with pytest.raises(AttributeError, match="n_landmarks >= n_samples"):
        _ = model.eigenvectors_


def test_kernel_pca_inverse_transform_reconstruction():
    """test_kernel_pca_inverse_transform_reconstruction: the pre-images of the training rows
    are within 10 % of them."""
    X, *_ = make_blobs(n_samples=100, n_features=4, random_state=0)
    kpca = KernelPCA(n_components=20, kernel="rbf", fit_inverse_transform=True, alpha=1e-3)
    X_reconst = kpca.inverse_transform(kpca.fit_transform(X))
    assert np.linalg.norm(X - X_reconst) / np.linalg.norm(X) < 1e-1


def test_32_64_decomposition_shape():
    """test_32_64_decomposition_shape: float32 and float64 rows give as many components
    (positive eigenvalues)."""
    X, _ = make_blobs(n_samples=30, centers=[[0, 0, 0], [1, 1, 1]], random_state=0,
                      cluster_std=0.1)
    X = StandardScaler().fit_transform(X)
    X -= X.min()
    kpca = KernelPCA()
    assert kpca.fit_transform(X).shape == kpca.fit_transform(X.astype(np.float32)).shape


def test_kernel_pca_feature_names_out():
    """test_kernel_pca_feature_names_out: the output columns are kernelpca0, kernelpca1."""
    X, *_ = make_blobs(n_samples=100, n_features=4, random_state=0)
    names = KernelPCA(n_components=2).fit(X).get_feature_names_out()
    np.testing.assert_array_equal([f"kernelpca{i}" for i in range(2)], names)


def test_kernel_pca_inverse_correct_gamma():
    """test_kernel_pca_inverse_correct_gamma: gamma=None is 1 / n_features, for the kernel and
    the pre-image map alike."""
    rng = np.random.RandomState(0)
    X = rng.random_sample((5, 4))
    kwargs = {"n_components": 2, "random_state": rng, "fit_inverse_transform": True,
              "kernel": "rbf"}
    kpca1 = KernelPCA(gamma=None, **kwargs).fit(X)
    kpca2 = KernelPCA(gamma=1 / X.shape[1], **kwargs).fit(X)
    assert kpca1.gamma_ == kpca2.gamma_ == 1 / X.shape[1]
    np.testing.assert_allclose(kpca1.inverse_transform(kpca1.transform(X)),
                               kpca2.inverse_transform(kpca1.transform(X)))


def test_kernel_pca_pandas_output():
    """test_kernel_pca_pandas_output: with scikit-learn's pandas output, fit_transform gives a
    DataFrame."""
    X, _ = load_iris(as_frame=True, return_X_y=True)
    with sklearn.config_context(transform_output="pandas"):
        Y = KernelPCA(n_components=2).fit_transform(X)
    assert list(Y.columns) == ["kernelpca0", "kernelpca1"]
    np.testing.assert_array_equal(Y.index, X.index)
