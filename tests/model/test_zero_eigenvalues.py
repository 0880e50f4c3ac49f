"""Zero eigenvalues as scikit-learn's KernelPCA treats them (remove_zero_eig).

Mirrors sklearn/decomposition/tests/test_kernel_pca.py (test_remove_zero_eig,
test_leave_zero_eig, test_kernel_pca_n_components) with every row a landmark,
where kpca-dask is exact kernel PCA.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SklearnKernelPCA

import kpca_dask
from kpca_dask import ExactKernelPCA, KernelPCA, ZeroEigenvalueWarning
from kpca_dask.engine.solve.components import n_components_for


def _nystrom(n_components, n_rows, **params):
    """KernelPCA with every row a landmark: exact kernel PCA."""
    return KernelPCA(n_components, n_landmarks=n_rows, landmarks="uniform", random_state=0,
                     **params)


ESTIMATORS = {"nystrom": _nystrom, "exact": lambda q, n, **p: ExactKernelPCA(q, **p)}


@pytest.fixture
def flat():
    """30 rows of 2 features: a linear kernel has 2 positive eigenvalues."""
    return np.random.default_rng(0).normal(size=(30, 2))


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_extra_components_are_zero_columns(make, flat):
    """n_components=4 with a rank-2 kernel: 4 components, the last two with eigenvalue 0
    and zero embedding columns, the first two scikit-learn's."""
    with pytest.warns(ZeroEigenvalueWarning, match="only 2 eigenvalue.*last 2 component"):
        Y = make(4, 30, kernel="linear").fit_transform(flat)
    reference = SklearnKernelPCA(4, kernel="linear").fit_transform(flat)
    assert Y.shape == reference.shape == (30, 4)
    np.testing.assert_array_equal(Y[:, 2:], 0.0)
    np.testing.assert_allclose(np.abs(Y), np.abs(reference), atol=1e-10)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_zero_eigenvalues_are_exactly_zero(make, flat):
    """The kept zero components report eigenvalue 0 and explained-variance ratio 0."""
    with pytest.warns(ZeroEigenvalueWarning):
        model = make(4, 30, kernel="linear").fit(flat)
    np.testing.assert_array_equal(model.eigenvalues_[2:], 0.0)
    np.testing.assert_array_equal(model.explained_variance_ratio_[2:], 0.0)
    assert model.n_components_ == 4


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_remove_zero_eig_drops_them(make, flat):
    """remove_zero_eig=True keeps only the positive eigenvalues, without a warning: the two
    components, eigenvalues and embedding, of scikit-learn's fit with remove_zero_eig=True."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroEigenvalueWarning)
        model = make(4, 30, kernel="linear", remove_zero_eig=True).fit(flat)
    reference = SklearnKernelPCA(4, kernel="linear", remove_zero_eig=True).fit(flat)
    assert model.n_components_ == reference.eigenvalues_.size == 2
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(np.abs(model.transform(flat)), np.abs(reference.transform(flat)),
                               atol=1e-10)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_leave_zero_eig_fit_transform_equals_fit_then_transform(make):
    """scikit-learn's test_leave_zero_eig: with a zero eigenvalue kept, fit_transform equals
    fit().transform(), and no division by zero happens on the way."""
    X = np.array([[1.0, 1.0], [0.0, 0.0]])
    with warnings.catch_warnings(), np.errstate(all="warn"):
        warnings.simplefilter("ignore", ZeroEigenvalueWarning)
        warnings.simplefilter("error", RuntimeWarning)
        model = make(2, 2, kernel="linear")
        A = model.fit(X).transform(X)
        B = model.fit_transform(X)
    np.testing.assert_allclose(A, B, atol=1e-12)
    np.testing.assert_array_equal(A[:, 1], 0.0)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_near_duplicate_rows_as_in_scikit_learn(make):
    """scikit-learn's test_remove_zero_eig: three rows equal to rounding give (3, 0) for
    remove_zero_eig=True and (3, 2) zero columns for n_components=2."""
    X = np.array([[1 - 1e-30, 1], [1, 1], [1, 1 - 1e-20]])
    with pytest.warns(ZeroEigenvalueWarning):
        Y = make(2, 3, kernel="linear").fit_transform(X)
    assert Y.shape == (3, 2)
    np.testing.assert_array_equal(Y, 0.0)
    with pytest.warns(ZeroEigenvalueWarning, match="no positive eigenvalue"):
        Y = make(2, 3, kernel="linear", remove_zero_eig=True).fit_transform(X)
    reference = SklearnKernelPCA(2, kernel="linear", remove_zero_eig=True).fit_transform(X)
    assert Y.shape == reference.shape == (3, 0)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_duplicated_rows(make):
    """5 distinct rows, each 4 times: an rbf kernel has 4 positive centred eigenvalues, so
    n_components=6 gives 2 zero columns and otherwise scikit-learn's numbers."""
    X = np.repeat(np.random.default_rng(1).normal(size=(5, 3)), 4, axis=0)
    with pytest.warns(ZeroEigenvalueWarning, match="only 4 eigenvalue"):
        model = make(6, 20, kernel="rbf", gamma=0.5)
        Y = model.fit_transform(X)
    reference = SklearnKernelPCA(6, kernel="rbf", gamma=0.5)
    np.testing.assert_allclose(np.abs(Y), np.abs(reference.fit_transform(X)), atol=1e-8)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, atol=1e-8)


def test_n_components_capped_at_n_samples():
    """As in scikit-learn, an int n_components above n_samples gives n_samples components."""
    X = np.random.default_rng(0).normal(size=(5, 2))
    with pytest.warns(ZeroEigenvalueWarning):
        Y = _nystrom(10, 5, kernel="linear").fit_transform(X)
    assert Y.shape == SklearnKernelPCA(10, kernel="linear").fit_transform(X).shape == (5, 5)


def test_none_and_ratio_keep_positive_eigenvalues_only(flat):
    """n_components=None and a float eta never add zero components."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZeroEigenvalueWarning)
        assert _nystrom(None, 30, kernel="linear").fit(flat).n_components_ == 2
        assert _nystrom(0.9999, 30, kernel="linear").fit(flat).n_components_ == 2


def test_fewer_landmarks_than_components_give_zero_columns():
    """With m landmarks the Nyström features have at most m dimensions: more components
    than that are zero ones, with the warning that names too few landmarks."""
    X = np.random.default_rng(0).normal(size=(200, 3))
    with pytest.warns(ZeroEigenvalueWarning, match="too few landmarks"):
        model = KernelPCA(8, n_landmarks=5, landmarks="uniform", random_state=0).fit(X)
    assert model.n_components_ == 8
    np.testing.assert_array_equal(model.transform(X)[:, 5:], 0.0)


def test_saved_model_keeps_zero_components(tmp_path, flat):
    """A saved model with zero components loads with them and remove_zero_eig intact."""
    with pytest.warns(ZeroEigenvalueWarning):
        model = _nystrom(4, 30, kernel="linear").fit(flat)
    loaded = kpca_dask.load(model.save(tmp_path / "model.zarr"))
    np.testing.assert_array_equal(loaded.transform(flat), model.transform(flat))
    assert loaded.remove_zero_eig is False and loaded.n_components_ == 4


def test_the_rule_lives_in_n_components_for():
    """The shared rule: zero components past the positive ones, dropped on request."""
    lam = np.array([3.0, 1.0, 0.0, 0.0])
    with pytest.warns(ZeroEigenvalueWarning):
        assert n_components_for(4, lam, 2, 4.0) == 4
    assert n_components_for(4, lam, 2, 4.0, remove_zero_eig=True) == 2
    assert n_components_for(None, lam, 2, 4.0) == 2


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_constant_data_with_an_int_gives_zero_columns(make):
    """Constant data and an int n_components: all components are zero ones, as in
    scikit-learn (None or remove_zero_eig=True give none, see below)."""
    X = np.full((20, 3), 2.5)
    with pytest.warns(ZeroEigenvalueWarning, match="only 0 eigenvalue"):
        Y = make(2, 20, kernel="rbf", gamma=0.5).fit_transform(X)
    np.testing.assert_array_equal(Y, np.zeros((20, 2)))


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
@pytest.mark.parametrize("n_components, remove_zero_eig", [(None, False), (2, True)])
def test_constant_data_give_an_empty_embedding_as_in_scikit_learn(make, n_components,
                                                                  remove_zero_eig):
    """No positive eigenvalue with n_components=None or remove_zero_eig=True: 0 components
    and an (n, 0) embedding from fit_transform and transform, as scikit-learn returns, with
    a ZeroEigenvalueWarning naming the cause (scikit-learn is silent)."""
    X = np.full((20, 3), 2.5)
    with pytest.warns(ZeroEigenvalueWarning, match="no positive eigenvalue.*constant data"):
        model = make(n_components, 20, kernel="rbf", gamma=0.5,
                     remove_zero_eig=remove_zero_eig)
        Y = model.fit_transform(X)
    reference = SklearnKernelPCA(n_components, kernel="rbf", gamma=0.5,
                                 remove_zero_eig=remove_zero_eig).fit(X)
    assert model.n_components_ == 0 and model.eigenvalues_.shape == (0,)
    assert Y.shape == reference.transform(X).shape == (20, 0)
    assert np.asarray(model.transform(X[:5])).shape == (5, 0)


def test_constant_data_with_a_fraction_raise():
    """A fraction n_components asks for a share of a variance that is 0: TooFewComponentsError
    (scikit-learn has no fractional n_components)."""
    with pytest.raises(kpca_dask.TooFewComponentsError, match="fraction of the variance"):
        _nystrom(0.9, 20).fit(np.full((20, 3), 2.5))
