"""kernel="precomputed": ExactKernelPCA and KernelPCA, as in scikit-learn's KernelPCA."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import KernelPCA as SklearnKernelPCA
from sklearn.metrics.pairwise import rbf_kernel

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import (
    InvalidInputError,
    InvalidParameterError,
    NonSymmetricKernelWarning,
    NotInvertibleError,
)


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


# -- KernelPCA: Nyström from a precomputed kernel matrix ------------------------------------

def _kernels(n=200, n_new=9, gamma=0.3):
    rng = np.random.default_rng(4)
    X, X_new = rng.normal(size=(n, 3)), rng.normal(size=(n_new, 3))
    return X, X_new, rbf_kernel(X, gamma=gamma), rbf_kernel(X_new, X, gamma=gamma)


def test_every_sample_a_landmark_equals_scikit_learn_precomputed():
    """KernelPCA(kernel="precomputed") with every sample a landmark is exact kernel PCA: the
    eigenvalues and embeddings of scikit-learn's KernelPCA(kernel="precomputed") to 1e-8."""
    _, _, K, K_new = _kernels()
    ours = KernelPCA(4, kernel="precomputed", landmarks="uniform", n_landmarks=10**6).fit(K)
    theirs = SklearnKernelPCA(4, kernel="precomputed", eigen_solver="dense").fit(K)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-8)
    for a, b in ((ours.transform(K_new), theirs.transform(K_new)),
                 (ours.fit_transform(K), theirs.fit_transform(K))):
        signs = np.sign((a * b).sum(axis=0))
        np.testing.assert_allclose(a * signs, b, atol=1e-8)
    assert ours.n_features_in_ == K.shape[0] and ours.landmark_indices_.size == K.shape[0]


def test_nystrom_from_the_kernel_equals_nystrom_from_the_points():
    """With m < n uniform landmarks and the same seed, the precomputed fit takes the same
    landmark rows as the fit of the points and the same model, to rounding."""
    X, X_new, K, K_new = _kernels()
    params = dict(n_components=3, n_landmarks=40, landmarks="uniform", random_state=7)
    from_kernel = KernelPCA(kernel="precomputed", **params).fit(K)
    from_points = KernelPCA(kernel="rbf", gamma=0.3, **params).fit(X)
    np.testing.assert_array_equal(from_kernel.landmark_indices_, from_points.landmark_indices_)
    np.testing.assert_allclose(from_kernel.eigenvalues_, from_points.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(from_kernel.trace_error_, from_points.trace_error_, rtol=1e-10)
    np.testing.assert_allclose(from_kernel.transform(K_new), from_points.transform(X_new),
                               atol=1e-10)


def test_landmarks_given_as_column_indices():
    """landmarks= a 1-D array of ints names the landmark columns; the model equals the fit of
    the points with those rows as landmarks."""
    X, X_new, K, K_new = _kernels()
    columns = np.array([150, 3, 77, 42, 9, 120, 64, 31])
    from_kernel = KernelPCA(3, kernel="precomputed", landmarks=columns).fit(K)
    from_points = KernelPCA(3, gamma=0.3, landmarks=X[np.sort(columns)]).fit(X)
    np.testing.assert_array_equal(from_kernel.landmark_indices_, np.sort(columns))
    np.testing.assert_allclose(from_kernel.eigenvalues_, from_points.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(from_kernel.transform(K_new), from_points.transform(X_new),
                               atol=1e-10)


def test_a_stored_kernel_is_read_only_in_its_landmark_columns_and_diagonal(tmp_path):
    """A Zarr kernel matrix whose every other chunk is damaged fits and transforms: only the
    chunks of the landmark columns and of the diagonal are read. The model is saved, loaded,
    and transforms a stored (n_new x n) kernel the same way."""
    import zarr

    _, _, K, K_new = _kernels(n=400)
    columns = np.array([3, 17, 42, 80])  # all in the first column chunk
    path = tmp_path / "K.zarr"
    zarr.create_array(str(path), data=K, chunks=(100, 100))
    new_path = tmp_path / "K_new.zarr"
    zarr.create_array(str(new_path), data=K_new, chunks=(9, 100))
    for chunk in (path / "c").glob("*/*"):
        i, j = int(chunk.parent.name), int(chunk.name)
        if j != 0 and i != j:
            chunk.write_bytes(b"not a chunk")  # any read of it fails
    for chunk in (new_path / "c").glob("*/*"):
        if int(chunk.name) != 0:
            chunk.write_bytes(b"not a chunk")
    stored = KernelPCA(2, kernel="precomputed", landmarks=columns).fit(str(path))
    in_memory = KernelPCA(2, kernel="precomputed", landmarks=columns).fit(K)
    np.testing.assert_allclose(stored.eigenvalues_, in_memory.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(stored.transform(str(new_path)).compute(),
                               in_memory.transform(K_new), atol=1e-12)
    import kpca_dask

    loaded = kpca_dask.load(stored.save(tmp_path / "model.zarr"))
    np.testing.assert_array_equal(loaded.transform(K_new), stored.transform(K_new))


@pytest.mark.parametrize("params, match", [
    ({"landmarks": "rpcholesky"}, "landmarks=.rpcholesky."),
    ({"landmarks": np.array([0, 0, 1])}, "distinct ints"),
    ({"landmarks": np.array([0, 500])}, r"in \[0, 200\)"),
    ({"n_landmarks": "auto"}, "n_landmarks"),
    ({"fit_inverse_transform": True}, "fit_inverse_transform"),
])
def test_what_a_precomputed_kernel_cannot_do_is_refused_at_fit(params, match):
    _, _, K, _ = _kernels()
    model = KernelPCA(2, kernel="precomputed", **{"landmarks": "uniform", **params})
    with pytest.raises(InvalidParameterError, match=match):
        model.fit(K)
    assert not hasattr(model, "model_")


def test_scores_and_growth_of_a_precomputed_model_are_refused():
    """k(x, x) of new rows is not in their kernel rows: scores and partial_fit say so."""
    _, _, K, K_new = _kernels()
    model = KernelPCA(2, kernel="precomputed", landmarks="uniform", n_landmarks=30,
                      random_state=0).fit(K)
    with pytest.raises(NotInvertibleError, match="k\\(x, x\\)"):
        model.score_samples(K_new)
    with pytest.raises(InvalidInputError, match="partial_fit.*precomputed"):
        model.partial_fit(K_new)
    with pytest.raises(InvalidInputError, match="200"):
        model.transform(K_new[:, :50])


# -- scikit-learn's own precomputed-kernel tests (sklearn/decomposition/tests/
#    test_kernel_pca.py), with kpca-dask's KernelPCA. eigen_solver is not a parameter here
#    (the solve is one Cholesky and a Krylov or dense solver, docs/design.md §11).
#    test_precomputed_kernel_not_psd is in tests/model/test_sklearn_behaviours.py.

@pytest.mark.parametrize("seed", [0, 1, 42])
def test_scikit_learn_kernel_pca_precomputed(seed):
    """test_kernel_pca_precomputed: the linear kernel of points and its precomputed matrix
    give the same embeddings, and fit_transform equals fit then transform."""
    rng = np.random.RandomState(seed)
    X_fit, X_pred = rng.random_sample((5, 4)), rng.random_sample((2, 4))
    X_kpca = KernelPCA(4, kernel="linear", random_state=0).fit(X_fit).transform(X_pred)
    X_kpca2 = KernelPCA(4, kernel="precomputed", random_state=0).fit(
        X_fit @ X_fit.T).transform(X_pred @ X_fit.T)
    X_kpca_train = KernelPCA(4, kernel="precomputed", random_state=0).fit_transform(
        X_fit @ X_fit.T)
    X_kpca_train2 = KernelPCA(4, kernel="precomputed", random_state=0).fit(
        X_fit @ X_fit.T).transform(X_fit @ X_fit.T)
    np.testing.assert_array_almost_equal(np.abs(X_kpca), np.abs(X_kpca2))
    np.testing.assert_array_almost_equal(np.abs(X_kpca_train), np.abs(X_kpca_train2))


def test_scikit_learn_gridsearch_pipeline_precomputed():
    """test_gridsearch_pipeline_precomputed: a grid search splits the kernel matrix's rows and
    columns (the pairwise tag) and separates the circles."""
    from sklearn.datasets import make_circles
    from sklearn.linear_model import Perceptron
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline

    X, y = make_circles(n_samples=400, factor=0.3, noise=0.05, random_state=0)
    pipeline = Pipeline([("kernel_pca", KernelPCA(kernel="precomputed", n_components=2)),
                         ("Perceptron", Perceptron(max_iter=5))])
    grid_search = GridSearchCV(pipeline, cv=3,
                               param_grid={"Perceptron__max_iter": np.arange(1, 5)})
    grid_search.fit(rbf_kernel(X, gamma=2.0), y)
    assert grid_search.best_score_ == 1


def test_scikit_learn_kernel_pca_precomputed_non_symmetric():
    """test_kernel_pca_precomputed_non_symmetric: a non-symmetric kernel matrix is accepted
    (taken as its symmetric part, with a warning) and gives the eigenvalues of its centred
    form; a symmetric one gives no warning."""
    with pytest.warns(NonSymmetricKernelWarning, match="not symmetric"):
        kpca = KernelPCA(kernel="precomputed", n_components=1, random_state=0).fit(
            np.array([[1.0, 2.0], [3.0, 40.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonSymmetricKernelWarning)
        kpca_c = KernelPCA(kernel="precomputed", n_components=1, random_state=0).fit(
            np.array([[9.0, -9.0], [-9.0, 9.0]]))
    np.testing.assert_allclose(kpca.eigenvalues_, kpca_c.eigenvalues_, rtol=1e-12)


def test_a_non_symmetric_stored_kernel_is_symmetrised_with_nystrom_landmarks():
    """With m < n, the columns used are those of (K + K^T) / 2."""
    _, _, K, K_new = _kernels()
    skewed = K + np.triu(np.full_like(K, 0.01), 1)  # not symmetric anywhere above the diagonal
    params = dict(n_components=3, kernel="precomputed", landmarks=np.arange(0, 200, 5))
    with pytest.warns(NonSymmetricKernelWarning):
        model = KernelPCA(**params).fit(da.from_array(skewed, chunks=50))
    reference = KernelPCA(**params).fit((skewed + skewed.T) / 2)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-12)


def test_exact_from_a_stored_kernel_matrix_holds_it_once(tmp_path):
    """ExactKernelPCA(kernel="precomputed") reads a Zarr or dask kernel matrix into one
    float64 n x n buffer and decomposes it there: the fit's peak is that buffer and the
    eigenvectors (2 n^2 words, where symmetrising and centring copies made 5), and the
    result is scikit-learn's."""
    import tracemalloc

    import zarr

    _, _, K, K_new = _kernels(n=600)
    path = tmp_path / "K.zarr"
    zarr.create_array(str(path), data=K, chunks=(150, 150))
    ExactKernelPCA(2, kernel="precomputed").fit(str(path))  # imports and caches first
    theirs = SklearnKernelPCA(4, kernel="precomputed", eigen_solver="dense").fit(K)
    for source in (str(path), da.from_array(K, chunks=150), K):
        tracemalloc.start()
        model = ExactKernelPCA(4, kernel="precomputed").fit(source)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 2.3 * K.nbytes, (type(source).__name__, peak / K.nbytes)
        np.testing.assert_allclose(model.eigenvalues_, theirs.eigenvalues_, rtol=1e-10)
        np.testing.assert_allclose(np.abs(model.transform(K_new)),
                                   np.abs(theirs.transform(K_new)), atol=1e-10)


@pytest.mark.parametrize("lazy", [False, True])
def test_exact_refuses_a_kernel_matrix_with_nan(lazy):
    _, _, K, _ = _kernels(n=50)
    K[3, 7] = np.nan
    with pytest.raises(InvalidInputError, match="NaN"):
        ExactKernelPCA(2, kernel="precomputed").fit(da.from_array(K, chunks=20) if lazy else K)


def test_exact_takes_a_non_symmetric_matrix_as_its_symmetric_part():
    """The in-place symmetrisation (by blocks) gives the eigenvalues of (K + K^T) / 2."""
    skewed = np.array([[1.0, 2.0], [3.0, 40.0]])
    symmetric = np.array([[9.0, -9.0], [-9.0, 9.0]])  # the centred symmetric part
    np.testing.assert_allclose(ExactKernelPCA(1, kernel="precomputed").fit(skewed).eigenvalues_,
                               ExactKernelPCA(1, kernel="precomputed").fit(symmetric).eigenvalues_,
                               rtol=1e-12)
    _, _, K, _ = _kernels(n=2100)  # more than one 1024 block each way
    skewed = K + np.triu(np.full_like(K, 0.01), 1)
    np.testing.assert_allclose(
        ExactKernelPCA(3, kernel="precomputed").fit(skewed).eigenvalues_,
        SklearnKernelPCA(3, kernel="precomputed", eigen_solver="dense").fit(
            (skewed + skewed.T) / 2).eigenvalues_, rtol=1e-10)
