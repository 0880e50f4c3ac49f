"""ExactKernelPCA's matrix-free solver against its dense one, scikit-learn, and itself."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from scipy import sparse
from sklearn.decomposition import KernelPCA as SklearnKernelPCA

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import (
    InvalidInputError,
    InvalidParameterError,
    NotInvertibleError,
    ZeroEigenvalueWarning,
)

FREE = {"eigen_solver": "matrix-free"}


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(400, 6)) * [3.0, 2.0, 1.0, 1.0, 0.5, 0.5]


@pytest.fixture(scope="module")
def new(X):
    return np.random.default_rng(1).normal(size=(30, X.shape[1]))


def _same_columns(got, expected, atol):
    """Equal up to the sign of each column."""
    got = np.asarray(got)
    signs = np.sign(np.sum(got * expected, axis=0))
    np.testing.assert_allclose(got * signs, expected, rtol=0, atol=atol)


@pytest.mark.parametrize(("kernel", "params"), [
    ("rbf", {"gamma": 0.05}), ("laplacian", {"gamma": 0.05}),
    ("polynomial", {"gamma": 0.05, "degree": 2}), ("matern", {"gamma": 0.05})])
def test_matrix_free_equals_the_dense_solver(X, new, kernel, params):
    """Eigenvalues to 1e-9 (relative), eigenvectors, embeddings, transform and scores to 1e-9,
    signs included (both fix them the same way)."""
    dense = ExactKernelPCA(n_components=6, kernel=kernel, **params).fit(X)
    free = ExactKernelPCA(n_components=6, kernel=kernel, **params, **FREE).fit(X)
    assert (dense.eigen_solver_, free.eigen_solver_) == ("dense", "matrix-free")
    np.testing.assert_allclose(free.eigenvalues_, dense.eigenvalues_, rtol=1e-9)
    np.testing.assert_allclose(free.explained_variance_ratio_, dense.explained_variance_ratio_,
                               rtol=1e-9)
    np.testing.assert_allclose(np.asarray(free.eigenvectors_), dense.eigenvectors_, atol=1e-9)
    scale = np.abs(dense.transform(new)).max()
    np.testing.assert_allclose(free.transform(new), dense.transform(new), atol=1e-9 * scale)
    np.testing.assert_allclose(free.reconstruction_error(new), dense.reconstruction_error(new),
                               atol=1e-9 * scale**2)
    # Lazy rows in several blocks: each block's errors with its own rows' k(x, x).
    lazy = free.reconstruction_error(da.from_array(new, chunks=max(1, len(new) // 3)))
    np.testing.assert_allclose(lazy.compute(), dense.reconstruction_error(new),
                               atol=1e-9 * scale**2)
    assert free.eigenvalue_residuals_.max() <= 1e-10 * free.eigenvalues_[0]


def test_matrix_free_equals_scikit_learn(X, new):
    """scikit-learn's KernelPCA (dense eigendecomposition): eigenvalues, fit_transform and
    transform, up to the sign of each component."""
    ours = ExactKernelPCA(n_components=5, gamma=0.05, **FREE)
    theirs = SklearnKernelPCA(n_components=5, kernel="rbf", gamma=0.05, eigen_solver="dense")
    Y, expected = ours.fit_transform(X), theirs.fit_transform(X)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-9)
    _same_columns(Y, expected, 1e-8)
    _same_columns(ours.transform(new), theirs.transform(new), 1e-8)


def test_a_rank_deficient_kernel_gives_zero_components(X):
    """A linear kernel on 3 features has 3 positive eigenvalues: more components are zero
    columns with scikit-learn's warning, or dropped with remove_zero_eig."""
    low = X[:, :3]
    with pytest.warns(ZeroEigenvalueWarning, match="only 3 eigenvalue"):
        model = ExactKernelPCA(n_components=5, kernel="linear", **FREE).fit(low)
    dense = ExactKernelPCA(n_components=3, kernel="linear").fit(low)
    np.testing.assert_allclose(model.eigenvalues_[:3], dense.eigenvalues_, rtol=1e-9)
    assert model.eigenvalues_[3:].tolist() == [0.0, 0.0]
    assert not np.asarray(model.transform(low[:7]))[:, 3:].any()
    kept = ExactKernelPCA(n_components=5, kernel="linear", remove_zero_eig=True, **FREE)
    assert kept.fit(low).n_components_ == 3


def test_numpy_dask_zarr_and_dataarray_input_give_one_model(tmp_path, X, new):
    """The same rows in memory, as a dask array chunked both ways, in a Zarr store and as a
    DataArray: the same eigenpairs; lazy input gives a lazy transform."""
    path = tmp_path / "x.zarr"
    zarr.create_array(path, data=X, chunks=(64, 4))
    inputs = {"numpy": X, "dask": da.from_array(X, chunks=(70, 4)), "zarr": str(path),
              "xarray": xr.DataArray(da.from_array(X, chunks=150), dims=("time", "x"))}
    expected = ExactKernelPCA(n_components=4, gamma=0.05, **FREE).fit(X).transform(new)
    for name, given in inputs.items():
        model = ExactKernelPCA(n_components=4, gamma=0.05, **FREE).fit(given)
        np.testing.assert_allclose(model.transform(new), expected, atol=1e-12, err_msg=name)
        assert isinstance(model.eigenvectors_, da.Array)
    assert isinstance(model.transform(inputs["dask"]), da.Array)


def test_auto_is_dense_while_the_gram_fits_and_matrix_free_beyond(X):
    """eigen_solver="auto" (the default) takes the matrix-free solver once 2.5 n^2 words pass
    the memory available, with the same eigenvalues."""
    dense = ExactKernelPCA(n_components=3, gamma=0.05).fit(X)
    with dask.config.set({"kpca-dask.memory-limit": "2 MiB"}):
        beyond = ExactKernelPCA(n_components=3, gamma=0.05).fit(X)
    assert (dense.eigen_solver_, beyond.eigen_solver_) == ("dense", "matrix-free")
    np.testing.assert_allclose(beyond.eigenvalues_, dense.eigenvalues_, rtol=1e-9)


@pytest.mark.parametrize(("params", "error", "match"), [
    ({"n_components": None}, InvalidParameterError, "n_components must be an int.*dense"),
    ({"n_components": 0.9}, InvalidParameterError, "n_components must be an int"),
    ({"n_components": 2, "kernel": "precomputed"}, InvalidParameterError,
     'kernel="precomputed" gives none'),
])
def test_what_the_matrix_free_solver_cannot_do_is_refused(X, params, error, match):
    """Every component, a fraction of the variance or a kernel matrix: one clear error each."""
    with pytest.raises(error, match=match):
        ExactKernelPCA(**params, **FREE).fit(X if params.get("kernel") is None else X @ X.T)


def test_sparse_rows_are_refused_by_the_matrix_free_solver(X):
    with pytest.raises(InvalidInputError, match="takes dense rows.*toarray"):
        ExactKernelPCA(n_components=2, **FREE).fit(sparse.csr_matrix(X))


def test_float32_tiles_agree_with_float64_to_their_rounding(X):
    """dtype="float32" makes the tiles in float32 and sums them in float64."""
    wide = ExactKernelPCA(n_components=4, gamma=0.05, **FREE).fit(X)
    narrow = ExactKernelPCA(n_components=4, gamma=0.05, dtype="float32", **FREE).fit(X)
    np.testing.assert_allclose(narrow.eigenvalues_, wide.eigenvalues_, rtol=1e-5)


def test_gamma_rules_are_resolved_for_both_solvers(X):
    """gamma="median" is resolved from a seeded sample: both solvers use the same value."""
    dense = ExactKernelPCA(n_components=3, gamma="median").fit(X)
    free = ExactKernelPCA(n_components=3, gamma="median", **FREE).fit(X)
    assert dense.kernel_params_["gamma"] == free.kernel_params_["gamma"] > 0
    np.testing.assert_allclose(free.eigenvalues_, dense.eigenvalues_, rtol=1e-9)


def test_the_result_does_not_depend_on_the_threads_or_the_panels(X):
    """One thread or four, read again each product or persisted: the same eigenpairs."""
    results = []
    for options in ({"num_workers": 1}, {"num_workers": 4, "kpca-dask.exact-rows": "read"}):
        with dask.config.set({"scheduler": "threads", **options}):
            results.append(ExactKernelPCA(n_components=4, gamma=0.05, **FREE).fit(X))
    np.testing.assert_allclose(results[1].eigenvalues_, results[0].eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(results[1].eigenvectors_),
                               np.asarray(results[0].eigenvectors_), atol=1e-10)


def test_inverse_transform_is_one_error_naming_the_alternative(X):
    model = ExactKernelPCA(n_components=2, gamma=0.05, **FREE).fit(X)
    with pytest.raises(NotInvertibleError, match=r"KernelPCA\(\.\.\., fit_inverse_transform"):
        model.inverse_transform(model.transform(X[:3]))


def test_patterns_of_a_matrix_free_model_equal_the_dense_ones(X):
    """The correlation maps read the lazy embedding by panels of the training rows."""
    dense = ExactKernelPCA(n_components=3, gamma=0.05).fit(X)
    free = ExactKernelPCA(n_components=3, gamma=0.05, **FREE).fit(X)
    np.testing.assert_allclose(free.patterns(X, kind="correlation"),
                               dense.patterns(X, kind="correlation"), atol=1e-9)


@pytest.mark.parametrize("pcscaling", [1, 2])
def test_scaled_scores_of_a_matrix_free_model_equal_the_dense_ones(X, new, pcscaling):
    """transform(pcscaling=) scales the matrix-free scores as eofs does the dense ones."""
    dense = ExactKernelPCA(n_components=3, gamma=0.05).fit(X)
    free = ExactKernelPCA(n_components=3, gamma=0.05, **FREE).fit(X)
    np.testing.assert_allclose(free.transform(new, pcscaling=pcscaling),
                               dense.transform(new, pcscaling=pcscaling), atol=1e-9)


def test_with_every_row_a_landmark_nystrom_is_the_same_model(X):
    """KernelPCA with n_landmarks = n reaches the matrix-free eigenvalues to 1e-8."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nystrom = KernelPCA(n_components=4, gamma=0.05, n_landmarks=X.shape[0],
                            landmarks="uniform", random_state=0).fit(X)
    free = ExactKernelPCA(n_components=4, gamma=0.05, **FREE).fit(X)
    np.testing.assert_allclose(nystrom.eigenvalues_, free.eigenvalues_, rtol=1e-8)
