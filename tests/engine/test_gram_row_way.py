"""The n x n Gram matrix of lazy rows by pairs of row panels (docs/design.md §19): equal to
numpy's in float64 for any number of runs and any chunking, the way that reads less taken,
each chunk read (G + 1) / 2 times for G runs, NaN refused by its row."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from _reads import CountingRows
from sklearn.metrics.pairwise import pairwise_kernels

from kpca_dask.engine.gram import (
    gram_by_panels,
    gram_plan,
    inner_products,
    row_groups,
    sums_by_row_panels,
)
from kpca_dask.errors import NonFiniteInputError


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(0)
    return rng.normal(size=(203, 700)) + np.linspace(0.0, 4.0, 700)


def _lower(S):
    return np.tril(S)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("runs", [1, 2, 3, 7])
def test_row_way_equals_numpy(rows, dtype, runs):
    """X Xᵀ and the column sums in float64, whatever the number of runs held, with uneven
    row chunks and several feature chunks."""
    values = rows.astype(dtype)
    X = da.from_array(values, chunks=((40, 23, 60, 30, 50), (300, 400)))
    most = -(-values.nbytes // runs) if runs > 1 else 10**9
    assert len(row_groups(X, most)) >= min(runs, X.numblocks[0])
    S, column_sums = sums_by_row_panels(X, most)
    exact = values.astype(np.float64)
    expected = exact @ exact.T
    np.testing.assert_allclose(_lower(S), _lower(expected), rtol=1e-12,
                               atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(column_sums, exact.sum(axis=0), rtol=1e-12)


def test_shifted_rows_keep_distances(rows):
    """Every row less the first run's mean: the distances, from the shifted Gram matrix, are
    the rows' own."""
    X = da.from_array(rows, chunks=(50, 700))
    S, _ = sums_by_row_panels(X, rows.nbytes // 3, shifted=True)
    S = _lower(S) + _lower(S).T - np.diag(np.diag(S))
    norms = np.diag(S)
    distances = norms[:, None] + norms[None, :] - 2 * S
    expected = ((rows[:, None, :] - rows[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(distances, expected, atol=1e-9 * expected.max())


def test_plan_takes_the_way_that_reads_less():
    """Time-chunked data (one chunk across the features) take the row way; data with every
    row in each feature chunk the column way; G runs read (G + 1) / 2 times."""
    along_rows = da.zeros((100, 1000), dtype=np.float32, chunks=(10, 1000))
    assert gram_plan(along_rows, 10**9) == ("rows", 1.0)
    assert gram_plan(along_rows, along_rows.nbytes // 2) == ("rows", 1.5)
    assert len(row_groups(along_rows, along_rows.nbytes // 4)) == 5
    assert gram_plan(along_rows, along_rows.nbytes // 4) == ("rows", 3.0)
    along_features = da.zeros((100, 1000), chunks=(100, 100))
    assert gram_plan(along_features, 8 * 100 * 250) == ("columns", 1.0)


KERNELS = [("linear", {}), ("rbf", {"gamma": 3e-4}),
           ("polynomial", {"gamma": 1e-3, "degree": 2, "coef0": 1.0}),
           ("cosine", {}), ("sigmoid", {"gamma": 1e-5, "coef0": 0.1}),
           ("laplacian", {"gamma": 1e-3})]


@pytest.mark.parametrize("kernel, params", KERNELS)
def test_kernel_matrix_is_the_same_either_way(rows, kernel, params):
    """gram_by_panels equals scikit-learn's kernel matrix, by rows (time-chunked) and by
    columns (feature-chunked) alike; the laplacian kernel goes the column way."""
    expected = pairwise_kernels(rows, metric=kernel, **params)
    for chunks in [(30, 700), (203, 100)]:
        X = da.from_array(rows, chunks=chunks)
        K, diagonal = gram_by_panels(X, kernel, params)
        np.testing.assert_allclose(K, expected, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(diagonal, np.diag(expected), rtol=1e-10, atol=1e-12)


def test_same_on_every_scheduler(rows):
    """The threaded and the synchronous schedulers give the same numbers, bit for bit."""
    X = da.from_array(rows.astype(np.float32), chunks=(25, 700))
    threaded = inner_products(X)[0]
    with dask.config.set(scheduler="sync"):
        synchronous = inner_products(X)[0]
    np.testing.assert_array_equal(threaded, synchronous)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("row", [3, 170])
def test_nan_is_refused_by_its_row(rows, bad, row):
    """A NaN or an infinity in a held run or in a run read after it names its row."""
    values = rows.copy()
    values[row, 11] = bad
    X = da.from_array(values, chunks=(50, 700))
    with pytest.raises(NonFiniteInputError, match=f"first in row {row}"):
        sums_by_row_panels(X, values.nbytes // 2)


@pytest.mark.parametrize("runs", [1, 2, 4])
def test_each_chunk_is_read_g_plus_one_halves(rows, runs):
    """One run reads every chunk once; G runs read the data (G + 1) / 2 times."""
    source = CountingRows(rows.astype(np.float32))
    X = da.from_array(source, chunks=(20, 700))
    source.reads.clear()  # from_array's look at the first rows for its meta
    most = 10**9 if runs == 1 else -(-source.values.nbytes // runs)
    groups = row_groups(X, most)
    sums_by_row_panels(X, most)
    chunks = X.numblocks[0]
    assert source.total() == pytest.approx(chunks * (len(groups) + 1) / 2, abs=chunks / 2)
    if runs == 1:
        assert set(source.reads.values()) == {1}
