"""The linear kernel's exact total variance with any number of landmarks (docs/design.md §2).

The pass adds up the rows beside the kernel's sums, so trace(J K J) = t - |sum x|^2 / n is
known exactly: ``centred_trace_`` equals numpy's sum of squared deviations to 1e-10 for
float64 and float32 rows far from the origin, dense or sparse, whatever the chunking and the
scheduler, fitted at once or batch by batch, and for rows stored in chunks of features (the
wide pass adds each chunk's column sums and float64 squares in the task that reads it); the
variance fractions are shares of it, and a saved model keeps it. Other kernels keep the
Nyström estimate.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from scipy import sparse

import kpca_dask
from kpca_dask import KernelPCA

N, P, M = 600, 12, 5


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    """Rows of a few strong directions plus noise, far from the origin (mean 100)."""
    rng = np.random.default_rng(11)
    return 100.0 + rng.normal(size=(N, 3)) @ rng.normal(size=(3, P)) + 0.1 * rng.normal(
        size=(N, P))


def _deviations(X) -> float:
    X = np.asarray(X, dtype=np.float64)
    return float(((X - X.mean(axis=0)) ** 2).sum())


def _fit(X, **params) -> KernelPCA:
    return KernelPCA(n_components=3, kernel="linear", n_landmarks=M, landmarks="uniform",
                     random_state=0, **params).fit(X)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exact_total_with_few_landmarks(rows, dtype):
    X = rows.astype(dtype)
    kpca = _fit(da.from_array(X, chunks=(100, P)), dtype=dtype)
    expected = _deviations(X)
    np.testing.assert_allclose(kpca.centred_trace_, expected, rtol=1e-10)
    assert kpca.total_variance_kind_ == "exact"
    np.testing.assert_allclose(kpca.total_variance_, expected / (N - 1), rtol=1e-10)
    np.testing.assert_allclose(kpca.explained_variance_ratio_,
                               kpca.eigenvalues_ / expected, rtol=1e-10)
    assert kpca.explained_variance_ratio_.sum() < 1.0


def test_the_total_does_not_depend_on_chunks_scheduler_or_batches(rows):
    expected = _fit(rows).centred_trace_
    for chunks in [(37, P), (N, P), (150, P)]:
        for scheduler in ["threads", "sync"]:
            with dask.config.set(scheduler=scheduler):
                got = _fit(da.from_array(rows, chunks=chunks)).centred_trace_
            np.testing.assert_allclose(got, expected, rtol=1e-10)
    batched = KernelPCA(n_components=3, kernel="linear", n_landmarks=M, landmarks="uniform",
                        random_state=0)
    for start in range(0, N, 200):
        batched.partial_fit(rows[start:start + 200])
    np.testing.assert_allclose(batched.centred_trace_, _deviations(rows), rtol=1e-10)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rows_chunked_along_their_features(rows, dtype):
    """The wide pass (docs/design.md §12): the same exact total from feature chunks, each
    chunk read once."""
    from _counting import CountingRows

    X = rows.astype(dtype)
    source = CountingRows(X)
    lazy = da.from_array(source, chunks=(150, 5), asarray=True, fancy=False)
    given = {"n_components": 3, "kernel": "linear", "landmarks": X[:M], "dtype": dtype}
    kpca = KernelPCA(**given).fit(lazy)  # given landmarks: the pass is the only read
    np.testing.assert_allclose(kpca.centred_trace_, _deviations(X), rtol=1e-10)
    assert kpca.total_variance_kind_ == "exact"
    np.testing.assert_allclose(kpca.explained_variance_ratio_,
                               kpca.eigenvalues_ / kpca.centred_trace_, rtol=1e-12)
    chunks = source.count(lambda key: (key[0].start, key[1].start))
    assert len(chunks) == 4 * 3 and max(chunks.values()) == 1  # every chunk, once
    row_way = KernelPCA(**given).fit(da.from_array(X, chunks=(150, P)))
    # the same model as from whole rows, to the products' float32 rounding at mean 100
    np.testing.assert_allclose(kpca.eigenvalues_, row_way.eigenvalues_,
                               rtol=1e-10 if dtype == "float64" else 1e-4)


def test_rows_chunked_along_their_features_in_checkpointed_segments(rows, tmp_path):
    """A checkpointed fit adds the pass in segments of row blocks (``blocks=``): each
    segment's moments are its own rows', and the total is still exact."""
    lazy = da.from_array(rows, chunks=(50, 5))
    kpca = KernelPCA(n_components=3, kernel="linear", landmarks=rows[:M]).fit(
        lazy, checkpoint=str(tmp_path / "pass.zarr"))
    np.testing.assert_allclose(kpca.centred_trace_, _deviations(rows), rtol=1e-10)
    assert kpca.total_variance_kind_ == "exact"


def test_sparse_rows_and_a_saved_model(rows, tmp_path):
    kept = np.where(np.abs(rows - 100.0) > 1.0, rows, 0.0)
    kpca = _fit(sparse.csr_matrix(kept))
    np.testing.assert_allclose(kpca.centred_trace_, _deviations(kept), rtol=1e-10)
    loaded = kpca_dask.load(kpca.save(tmp_path / "linear.zarr"))
    assert loaded.centred_trace_ == kpca.centred_trace_
    assert loaded.total_variance_kind_ == "exact"


def test_other_kernels_keep_the_estimate(rows):
    kpca = KernelPCA(n_components=3, kernel="rbf", gamma=1e-3, n_landmarks=M,
                     landmarks="uniform", random_state=0).fit(rows)
    assert not hasattr(kpca, "centred_trace_")
    assert kpca.total_variance_kind_ == "nystrom-estimate"
