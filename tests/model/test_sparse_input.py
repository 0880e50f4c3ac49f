"""scipy.sparse input: the same model and embedding as the dense input, never densified."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from scipy import sparse

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import InvalidInputError, NonFiniteInputError

KERNELS = {
    "rbf": {"gamma": 0.3},
    "laplacian": {"gamma": 0.3},
    "polynomial": {"gamma": 0.3, "degree": 2},
    "linear": {},
    "sigmoid": {"gamma": 0.05},
    "cosine": {},
    "matern": {"gamma": 0.3, "kernel_params": {"nu": 2.5}},
}


@pytest.fixture(scope="module")
def counts():
    """300 rows of 40 features at 10 % density, with a few empty rows."""
    X = sparse.random(300, 40, density=0.1, format="csr", random_state=0,
                      data_rvs=np.random.default_rng(0).random)
    X = X.tolil()
    X[[3, 100], :] = 0.0
    return X.tocsr()


def _fit(X, **params):
    params = {"n_components": 4, "n_landmarks": 60, "random_state": 0, **params}
    return KernelPCA(**params).fit(X)


@pytest.mark.filterwarnings("ignore:The kernel is not positive semi-definite")
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernel_equals_the_dense_result(counts, kernel):
    """Each named kernel on sparse rows gives the dense input's model and embedding (1e-10)."""
    sparse_model = _fit(counts, kernel=kernel, **KERNELS[kernel])
    dense_model = _fit(counts.toarray(), kernel=kernel, **KERNELS[kernel])
    np.testing.assert_allclose(sparse_model.eigenvalues_, dense_model.eigenvalues_,
                               rtol=1e-10, atol=1e-12)
    Y = sparse_model.transform(counts)
    assert isinstance(Y, np.ndarray)
    np.testing.assert_allclose(Y, dense_model.transform(counts.toarray()), atol=1e-10)


@pytest.mark.parametrize("landmarks", ["uniform", "kmeans", "rpcholesky"])
def test_landmark_strategies_work_on_sparse_samples(counts, landmarks):
    """Every landmark strategy picks the same dense m x p landmarks from sparse rows."""
    sparse_model = _fit(counts, landmarks=landmarks)
    dense_model = _fit(counts.toarray(), landmarks=landmarks)
    assert isinstance(sparse_model.landmarks_, np.ndarray)
    np.testing.assert_allclose(sparse_model.landmarks_, dense_model.landmarks_, atol=1e-12)


@pytest.mark.parametrize("gamma", ["median", "scale"])
def test_bandwidth_rules_on_sparse_rows(counts, gamma):
    """gamma='median' and 'scale' resolve to the dense input's value."""
    assert _fit(counts, gamma=gamma).gamma_ == pytest.approx(
        _fit(counts.toarray(), gamma=gamma).gamma_, rel=1e-12)


def test_automatic_landmarks_on_sparse_rows(counts):
    """n_landmarks='auto' grows m on sparse rows as on dense ones."""
    params = {"n_landmarks": "auto", "tol": 0.2, "landmarks": "uniform", "max_landmarks": 64}
    sparse_path = _fit(counts, **params).landmark_path_
    dense_path = _fit(counts.toarray(), **params).landmark_path_
    assert [m for m, _ in sparse_path] == [m for m, _ in dense_path]
    np.testing.assert_allclose([e for _, e in sparse_path], [e for _, e in dense_path],
                               rtol=1e-9)


@pytest.mark.parametrize("fmt", ["csc", "coo", "lil"])
def test_other_sparse_formats_are_converted(counts, fmt):
    """CSC, COO and other formats are read as CSR rows: the same embedding."""
    model = _fit(counts)
    np.testing.assert_allclose(model.transform(counts.asformat(fmt)), model.transform(counts),
                               atol=1e-12)


def test_sparse_array_classes(counts):
    """scipy's sparse arrays (csr_array) are accepted like sparse matrices."""
    model = _fit(counts)
    np.testing.assert_allclose(model.transform(sparse.csr_array(counts)),
                               model.transform(counts), atol=1e-12)


def test_dask_array_of_sparse_blocks_is_lazy_and_chunking_free(counts):
    """A dask array with scipy.sparse chunks: transform is lazy, and the model does not
    depend on the row chunks."""
    X = da.from_array(counts, chunks=(70, 40), asarray=False)
    model = _fit(X)
    Y = model.transform(X)
    assert isinstance(Y, da.Array)
    other = _fit(da.from_array(counts, chunks=(128, 40), asarray=False))
    np.testing.assert_allclose(other.eigenvalues_, model.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(Y.compute(), other.transform(counts), atol=1e-10)


def test_sparse_blocks_in_a_process_cluster(counts, process_cluster):
    """Sparse blocks travel to worker processes and give the threaded result."""
    from distributed import Client

    X = da.from_array(counts, chunks=(70, 40), asarray=False)
    local = _fit(X)
    with Client(process_cluster):
        distributed = _fit(X)
        Y = distributed.transform(X).compute()
    np.testing.assert_allclose(distributed.eigenvalues_, local.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(Y, local.transform(counts), atol=1e-10)


def test_nonfinite_value_in_a_sparse_block(counts):
    """A NaN stored in one sparse block of a dask array is found by the pass and its
    global row named."""
    X = counts.tolil()
    X[250, 5] = np.inf
    X = da.from_array(X.tocsr(), chunks=(70, 40), asarray=False)
    with pytest.raises(NonFiniteInputError, match="first in row 250"):
        _fit(X, landmarks=np.ones((5, 40)))


def test_dense_meta_with_sparse_blocks_is_refused(counts):
    """Sparse blocks under a dense meta would be shifted (densified): a clear error instead."""
    X = da.from_array(counts, chunks=(100, 40), asarray=False)
    X = da.map_blocks(lambda b: b, X, meta=np.empty((0, 0)), dtype=np.float64)
    with pytest.raises(InvalidInputError, match="meta is dense.*asarray=False"):
        _fit(X, kernel="rbf", landmarks=np.ones((5, 40)))


def test_npz_file_is_an_input(counts, tmp_path):
    """A matrix saved with scipy.sparse.save_npz is read by path as sparse blocks."""
    path = tmp_path / "counts.npz"
    sparse.save_npz(path, counts)
    model = _fit(str(path))
    np.testing.assert_allclose(model.transform(path).compute(), model.transform(counts),
                               atol=1e-12)


def test_dense_npz_archive_is_refused(tmp_path):
    """An .npz that is not a save_npz matrix gets an error saying what to save."""
    path = tmp_path / "dense.npz"
    np.savez(path, X=np.ones((3, 2)))
    with pytest.raises(InvalidInputError, match="scipy.sparse.save_npz"):
        _fit(str(path))


def test_exact_kernel_pca_accepts_sparse(counts):
    """ExactKernelPCA gives the dense input's embedding for sparse input."""
    exact = ExactKernelPCA(3, gamma=0.3)
    np.testing.assert_allclose(np.abs(exact.fit_transform(counts)),
                               np.abs(ExactKernelPCA(3, gamma=0.3).fit_transform(counts.toarray())),
                               atol=1e-10)
