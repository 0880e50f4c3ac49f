"""The n x n Gram matrix of lazy rows by pairs of row panels (kpca_dask.engine.exact.gram).

X Xᵀ and the column sums equal numpy's float64 ones for float32 and float64 data,
one run or several, uneven row chunks and several feature chunks; :func:`gram_plan`
takes the row way for data chunked along the samples and the column way for data
chunked along the features, and reports (G + 1) / 2 reads for G runs; every named
kernel's matrix is scikit-learn's whichever way it is summed (the laplacian kernel
always by columns); the numbers do not depend on the chunks or the scheduler; NaN
and infinities are refused by their row; each row chunk is read as often as
the plan says; and the kernel of new rows against rows stored in row chunks is
scikit-learn's, taken the row way.
"""

from __future__ import annotations

import itertools

import dask
import dask.array as da
import numpy as np
import pytest
from _counting import CountingRows
from scipy.spatial.distance import cdist
from sklearn.gaussian_process.kernels import Matern
from sklearn.metrics.pairwise import pairwise_kernels

from kpca_dask.blocks.feature_sums import feature_sum
from kpca_dask.engine.exact import gram
from kpca_dask.engine.exact.gram import (
    column_ranges,
    cross_inner_products,
    cross_kernel_by_panels,
    gram_by_panels,
    gram_hold_bytes,
    gram_plan,
    inner_products,
    row_groups,
    sums_by_row_panels,
)
from kpca_dask.errors import NonFiniteInputError

N, P = 150, 2300  # P beyond one float64 feature panel of the row way (2048 columns)
UNEVEN = (17, 40, 23, 31, 9, 30)


@pytest.fixture(scope="module")
def rows() -> np.ndarray:
    """Rows far from the origin (an offset growing along the features), float64."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(N, P)) + np.linspace(0.0, 4.0, P)


def _most_bytes(X: da.Array, runs: int) -> int:
    """A ``most_bytes`` for which :func:`row_groups` cuts ``X`` into exactly ``runs`` runs."""
    row_bytes = X.dtype.itemsize * X.shape[1]
    edges = np.cumsum((0,) + X.chunks[0])
    held = sorted({int(b - a) * row_bytes for a, b in itertools.combinations(edges, 2)})
    most = next((m for m in held if len(row_groups(X, m)) == runs), None)
    assert most is not None, f"no most_bytes gives {runs} runs of {X.chunks[0]}"
    return most


def _full(S: np.ndarray) -> np.ndarray:
    """The symmetric matrix of the lower triangle ``S`` holds."""
    return np.tril(S) + np.tril(S, -1).T


def _close(got, expected, tolerance: float = 1e-12) -> None:
    expected = np.asarray(expected)
    np.testing.assert_allclose(got, expected, rtol=tolerance,
                               atol=tolerance * np.abs(expected).max())


@pytest.fixture
def hold_half(monkeypatch):
    """The Gram passes hold at most half the data however small they are (as they do
    beyond HALF_FROM_BYTES), so that the small arrays here take several runs."""
    monkeypatch.setattr(gram, "HALF_FROM_BYTES", 0)


# -- X Xᵀ by pairs of row panels -----------------------------------------------------------


@pytest.mark.parametrize("runs", [1, 2, 3, 6])
@pytest.mark.parametrize("chunks", [(UNEVEN, P), (UNEVEN, (700, 1000, 600))],
                         ids=["one-feature-chunk", "three-feature-chunks"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_way_equals_numpy(rows, dtype, chunks, runs):
    """The lower triangle of S (F order) is numpy's float64 X Xᵀ to 1e-12 and the column
    sums numpy's, for one run, several runs and every chunk a run of its own."""
    values = rows.astype(dtype)
    X = da.from_array(values, chunks=chunks)
    most = _most_bytes(X, runs)
    S, column_sums = sums_by_row_panels(X, most)
    exact = values.astype(np.float64)
    assert S.shape == (N, N) and S.dtype == np.float64 and S.flags.f_contiguous
    _close(np.tril(S), np.tril(exact @ exact.T))
    _close(column_sums, exact.sum(axis=0))


@pytest.mark.parametrize("runs", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shifted_row_way_is_the_gram_matrix_of_rows_less_the_first_runs_mean(rows, dtype,
                                                                              runs):
    """shifted=True: S is (X − μ)(X − μ)ᵀ with μ the mean of the first run's rows, so the
    squared distances from it are numpy's; the column sums are the data's own."""
    values = rows.astype(dtype)
    X = da.from_array(values, chunks=(UNEVEN, P))
    most = _most_bytes(X, runs)
    first = sum(X.chunks[0][: row_groups(X, most)[0][1]])
    S, column_sums = sums_by_row_panels(X, most, shifted=True)
    exact = values.astype(np.float64)
    shifted = exact - exact[:first].mean(axis=0)
    _close(np.tril(S), np.tril(shifted @ shifted.T))
    _close(column_sums, exact.sum(axis=0))
    S = _full(S)
    norms = np.diag(S)
    distances = norms[:, None] + norms[None, :] - 2.0 * S
    expected = cdist(exact, exact, "sqeuclidean")
    np.testing.assert_allclose(distances, expected, atol=1e-12 * expected.max())


@pytest.mark.parametrize("chunks", [(UNEVEN, P), (50, (1000, 1300)), (N, 400)],
                         ids=["rows", "both", "features"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inner_products_equal_numpy_whichever_way(rows, dtype, chunks):
    """inner_products gives numpy's X Xᵀ (both triangles) and column sums by the way its
    plan takes."""
    values = rows.astype(dtype)
    X = da.from_array(values, chunks=chunks)
    A, column_sums = inner_products(X)
    exact = values.astype(np.float64)
    _close(A, exact @ exact.T)
    np.testing.assert_array_equal(A, A.T)
    _close(column_sums, exact.sum(axis=0))


def test_streamed_runs_in_pieces_give_the_same_sums(rows, monkeypatch):
    """Runs that are not held, read a few chunks at a time rather than whole, give the
    same S (to 1e-12: other products) and the same column sums."""
    X = da.from_array(rows.astype(np.float32), chunks=(UNEVEN, P))
    most = _most_bytes(X, 2)
    whole = sums_by_row_panels(X, most)
    monkeypatch.setattr(gram, "_STREAMED_BYTES", (1, 1))  # one chunk a piece
    pieces = sums_by_row_panels(X, most)
    _close(np.tril(pieces[0]), np.tril(whole[0]))
    np.testing.assert_array_equal(pieces[1], whole[1])


# -- the plan ------------------------------------------------------------------------------


def test_row_groups_are_runs_of_whole_chunks_within_most_bytes():
    """Runs cover every chunk once, in order, each within most_bytes unless it is one
    chunk; a chunk larger than most_bytes is a run of its own."""
    X = da.zeros((N, 10), dtype=np.float32, chunks=(UNEVEN, 10))
    row_bytes = 40
    for most in [1, 40 * row_bytes, 60 * row_bytes, 100 * row_bytes, 10**9]:
        groups = row_groups(X, most)
        assert groups[0][0] == 0 and groups[-1][1] == len(UNEVEN)
        assert all(a[1] == b[0] for a, b in zip(groups[:-1], groups[1:]))
        for first, stop in groups:
            held = sum(UNEVEN[first:stop]) * row_bytes
            assert held <= most or stop == first + 1
    assert row_groups(X, 1) == [(k, k + 1) for k in range(len(UNEVEN))]
    assert row_groups(X, 10**9) == [(0, len(UNEVEN))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plan_of_time_chunked_data_is_rows(dtype):
    """Data in one chunk across the features take the row way once they do not fit one
    column panel, reading (G + 1) / 2 times for G runs; float32 rows that fit take it
    too (one read either way, and a run in float32 holds half a float64 panel)."""
    X = da.zeros((120, 1000), dtype=dtype, chunks=(10, 1000))
    for runs in [2, 3, 4, 6, 12]:
        most = X.nbytes // runs
        assert len(row_groups(X, most)) == runs
        assert gram_plan(X, most) == ("rows", (runs + 1) / 2)
    if dtype == np.float32:
        assert gram_plan(X, 10**9) == ("rows", 1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plan_of_feature_chunked_data_is_columns(dtype):
    """Data chunked along the features with every row in a chunk take the column way (one
    read of each chunk), as do data chunked along both axes whose runs do not all fit."""
    along_features = da.zeros((100, 1000), dtype=dtype, chunks=(100, 100))
    assert gram_plan(along_features, 8 * 100 * 250) == ("columns", 1.0)
    both = da.zeros((100, 1000), dtype=dtype, chunks=(10, 100))
    most = both.nbytes // 3
    assert len(row_groups(both, most)) > 1
    assert gram_plan(both, most) == ("columns", 1.0)


def test_gram_by_panels_takes_the_planned_way(rows, hold_half):
    """With half the data held, time-chunked data go by rows in two runs, and data chunked
    along the features by columns, as gram_plan says of gram_hold_bytes."""
    X = da.from_array(rows, chunks=(25, P))
    assert gram_hold_bytes(X) == X.nbytes // 2
    assert gram_plan(X, gram_hold_bytes(X)) == ("rows", 1.5)
    Y = da.from_array(rows, chunks=(N, 460))
    assert gram_plan(Y, gram_hold_bytes(Y))[0] == "columns"


# -- named kernels -------------------------------------------------------------------------

KERNELS = [
    ("linear", {}),
    ("rbf", {"gamma": 1.0 / (2 * P)}),
    ("polynomial", {"gamma": 1.0 / P, "degree": 3, "coef0": 1.0}),
    ("cosine", {}),
    ("sigmoid", {"gamma": 1e-4, "coef0": 0.1}),
    ("matern", {"gamma": 1.0 / (2 * P), "nu": 0.5}),
    ("matern", {"gamma": 1.0 / (2 * P), "nu": 2.5}),
    ("laplacian", {"gamma": 1.0 / P}),
]

#: (dtype, chunks, whether half the data are held, the way the plan takes).
WAYS = [
    (np.float32, (UNEVEN, P), False, "rows"),
    (np.float32, (UNEVEN, (700, 1000, 600)), True, "rows"),
    (np.float64, (25, P), True, "rows"),
    (np.float64, (50, 460), True, "columns"),
]


def _sklearn_kernel(values: np.ndarray, kernel: str, params: dict) -> np.ndarray:
    if kernel == "matern":
        return Matern(length_scale=1.0 / np.sqrt(2.0 * params["gamma"]), nu=params["nu"])(values)
    return pairwise_kernels(values, metric=kernel, **params)


@pytest.mark.parametrize("dtype, chunks, half, way", WAYS,
                         ids=[f"{np.dtype(w[0]).name}-{w[3]}-{i}" for i, w in enumerate(WAYS)])
@pytest.mark.parametrize("kernel, params", KERNELS,
                         ids=[k + str(p.get("nu", "")) for k, p in KERNELS])
def test_kernel_matrix_is_sklearns_whichever_way(rows, monkeypatch, kernel, params, dtype,
                                                 chunks, half, way):
    """gram_by_panels gives scikit-learn's kernel matrix and k(x, x) to 1e-12, by rows (one
    run or several) or by columns; the laplacian kernel is summed by columns always.

    One exception: by columns, a row's squared distance to itself is its norm less its
    inner product with itself, summed apart (~1e-12 of the norm, not 0), and Matérn
    nu = 0.5 moves like d = √d² near 0, so its diagonal in K is 1 to 1e-7 only. By rows
    that distance is 0 exactly."""
    if half:
        monkeypatch.setattr(gram, "HALF_FROM_BYTES", 0)
    values = rows.astype(dtype)
    X = da.from_array(values, chunks=chunks)
    assert gram_plan(X, gram_hold_bytes(X))[0] == way
    expected = _sklearn_kernel(values.astype(np.float64), kernel, params)
    K, diagonal = gram_by_panels(X, kernel, params)
    apart = ~np.eye(N, dtype=bool)
    _close(K[apart], expected[apart])
    rough = kernel == "matern" and params["nu"] == 0.5 and way == "columns"
    _close(np.diag(K), np.diag(expected), 1e-7 if rough else 1e-12)
    _close(diagonal, np.diag(expected))


def test_laplacian_goes_the_column_way(rows, hold_half):
    """Time-chunked data, which the rbf kernel sums by rows (each chunk read once or
    twice), are read by the laplacian kernel once per column panel."""
    source = CountingRows(rows.astype(np.float32))
    X = da.from_array(source, chunks=(25, P))
    panels = len(column_ranges(X, gram_hold_bytes(X)))
    assert panels > 2
    source.clear()  # the read dask makes of an empty slice to learn the dtype
    gram_by_panels(X, "laplacian", {"gamma": 1.0 / P})
    assert dict(source.reads) == {start: panels for start in range(0, N, 25)}
    source.clear()
    gram_by_panels(X, "rbf", {"gamma": 1.0 / P})
    assert dict(source.reads) == {0: 1, 25: 1, 50: 1, 75: 2, 100: 2, 125: 2}


# -- chunks and schedulers -----------------------------------------------------------------


@pytest.mark.parametrize("runs", [1, 3])
def test_same_for_every_chunking_and_scheduler(rows, runs):
    """The sync and the threaded schedulers give the same S bit for bit; other row and
    feature chunks the same to 1e-12."""
    values = rows.astype(np.float32)
    results = []
    for chunks in [(UNEVEN, P), (30, (700, 1000, 600)), (50, 1150)]:
        X = da.from_array(values, chunks=chunks)
        most = _most_bytes(X, runs) if runs > 1 else X.nbytes
        with dask.config.set(scheduler="threads"):
            threaded = sums_by_row_panels(X, most)
        with dask.config.set(scheduler="sync"):
            synchronous = sums_by_row_panels(X, most)
        np.testing.assert_array_equal(threaded[0], synchronous[0])
        np.testing.assert_array_equal(threaded[1], synchronous[1])
        results.append(threaded)
    for S, column_sums in results[1:]:
        _close(np.tril(S), np.tril(results[0][0]))
        _close(column_sums, results[0][1])


def test_kernel_matrix_same_on_every_scheduler(rows, hold_half):
    """gram_by_panels by rows in two runs: the same kernel matrix on the sync and the
    threaded schedulers, bit for bit."""
    X = da.from_array(rows.astype(np.float32), chunks=(UNEVEN, (700, 1000, 600)))
    with dask.config.set(scheduler="threads"):
        threaded = gram_by_panels(X, "rbf", {"gamma": 1.0 / P})
    with dask.config.set(scheduler="sync"):
        synchronous = gram_by_panels(X, "rbf", {"gamma": 1.0 / P})
    np.testing.assert_array_equal(threaded[0], synchronous[0])
    np.testing.assert_array_equal(threaded[1], synchronous[1])


# -- NaN and infinities --------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("row", [3, 61, 149], ids=["first-run", "second-run", "last-row"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_value_is_refused_by_its_row(rows, dtype, row, bad):
    """A NaN or an infinity in the first run or in a later one (read against the first)
    is refused with NonFiniteInputError naming its row."""
    values = rows.astype(dtype)
    values[row, 1234] = bad
    X = da.from_array(values, chunks=(UNEVEN, (700, 1000, 600)))
    most = _most_bytes(X, 3)
    assert row_groups(X, most)[0][1] <= 2  # row 3 in the first run, 61 and 149 later
    with pytest.raises(NonFiniteInputError, match=rf"first in row {row}\)"):
        sums_by_row_panels(X, most)


@pytest.mark.parametrize("row", [101, 115, 140])
def test_non_finite_value_in_a_streamed_piece_names_its_row(rows, monkeypatch, row):
    """A later run read one chunk at a time (the first, second or third piece) names the
    row of its NaN in the whole data, not in the piece."""
    monkeypatch.setattr(gram, "_STREAMED_BYTES", (1, 1))
    values = rows.copy()
    values[row, 5] = np.nan
    X = da.from_array(values, chunks=(UNEVEN, P))
    most = _most_bytes(X, 2)
    assert row_groups(X, most) == [(0, 3), (3, 6)]  # rows 80-149 the later run's
    with pytest.raises(NonFiniteInputError, match=rf"first in row {row}\)"):
        sums_by_row_panels(X, most)


@pytest.mark.parametrize("chunks", [(25, P), (N, 460)], ids=["rows", "columns"])
def test_inner_products_refuse_non_finite_values_either_way(rows, hold_half, chunks):
    """inner_products, by rows or by columns, refuses an infinity naming its row."""
    values = rows.copy()
    values[88, 2299] = np.inf
    X = da.from_array(values, chunks=chunks)
    with pytest.raises(NonFiniteInputError, match=r"first in row 88\)"):
        inner_products(X)


# -- reads ---------------------------------------------------------------------------------


@pytest.mark.parametrize("feature_chunks", [300, 100], ids=["one", "three"])
@pytest.mark.parametrize("runs", [1, 2, 3, 4, 6, 12])
def test_each_chunk_is_read_as_often_as_the_plan_says(runs, feature_chunks):
    """One run reads every chunk once; with G equal runs, the chunks of run j (from 0) are
    read j + 1 times: (G + 1) / 2 times on average, what gram_plan reports."""
    rng = np.random.default_rng(1)
    source = CountingRows(rng.normal(size=(120, 300)).astype(np.float32))
    X = da.from_array(source, chunks=(10, feature_chunks))
    most = X.nbytes // runs
    groups = row_groups(X, most)
    assert len(groups) == runs
    source.clear()  # the read dask makes of an empty slice to learn the dtype
    sums_by_row_panels(X, most)
    per_chunk = X.numblocks[1]  # one read of a row chunk is one read of each feature chunk
    expected = {10 * k: per_chunk * (j + 1)
                for j, (first, stop) in enumerate(groups) for k in range(first, stop)}
    assert dict(source.reads) == expected
    average = source.total() / (per_chunk * X.numblocks[0])
    assert average == (runs + 1) / 2
    if runs > 1 and X.numblocks[1] == 1:  # in three feature chunks columns may tie
        assert gram_plan(X, most) == ("rows", average)


def test_streamed_pieces_read_no_more(monkeypatch):
    """Later runs read one chunk at a time are read as often as whole."""
    monkeypatch.setattr(gram, "_STREAMED_BYTES", (1, 1))
    rng = np.random.default_rng(2)
    source = CountingRows(rng.normal(size=(120, 300)).astype(np.float32))
    X = da.from_array(source, chunks=(10, 300))
    source.clear()
    sums_by_row_panels(X, X.nbytes // 3)
    assert source.total() == 12 * 2


def test_inner_products_read_as_planned(rows, hold_half):
    """inner_products of time-chunked rows with half of them held: two runs, the first
    read once and the second twice."""
    source = CountingRows(rows.astype(np.float32))
    X = da.from_array(source, chunks=(15, P))
    source.clear()
    A, _ = inner_products(X)
    assert dict(source.reads) == {15 * k: 1 if k < 5 else 2 for k in range(10)}
    exact = source.values.astype(np.float64)
    _close(A, exact @ exact.T)


def test_cross_products_read_the_rows_once(rows):
    """A Xᵀ of new rows against time-chunked rows: numpy's, each chunk of X read once."""
    source = CountingRows(rows.astype(np.float32))
    X = da.from_array(source, chunks=(30, P // 2))
    source.clear()  # from_array's look at the first rows for its meta
    new = rows[:17] * 0.5
    out = cross_inner_products(da.from_array(new, chunks=(10, P)), X)
    np.testing.assert_allclose(out, new @ source.values.astype(np.float64).T, rtol=1e-12)
    assert source.total() == 2 * X.numblocks[0]  # two feature chunks a row chunk, once each


CROSS_KERNELS = [("linear", {}), ("rbf", {"gamma": 2e-4}),
                 ("polynomial", {"gamma": 1e-4, "degree": 2, "coef0": 1.0}), ("cosine", {})]


@pytest.mark.parametrize(("kernel", "params"), CROSS_KERNELS)
@pytest.mark.parametrize("in_pieces", [False, True])
def test_cross_kernel_of_time_chunked_rows_is_sklearns(rows, monkeypatch, kernel, params,
                                                       in_pieces):
    """k(A, X) and k(a, a) of new rows against rows stored in row chunks, the row way (new
    rows held in runs, X read by runs against each): scikit-learn's, to 1e-10."""
    X = da.from_array(rows, chunks=(25, P))
    assert gram_plan(X, gram.gram_hold_bytes(X))[0] == "rows"
    new = rows[:40] * 1.1
    if in_pieces:  # several runs of the new rows, X streamed a few chunks at a time
        monkeypatch.setattr(gram, "gram_hold_bytes", lambda Y: 15 * P * 8)
        monkeypatch.setattr(gram, "_STREAMED_BYTES", (1, 2 * 25 * P * 8))
        K, diagonal = gram._cross_kernel_by_rows(da.from_array(new, chunks=(10, P)), X,
                                                 kernel, params, feature_sum(kernel))
    else:
        K, diagonal = cross_kernel_by_panels(new, X, kernel, params)
    expected = pairwise_kernels(new, rows, metric=kernel, **params)
    np.testing.assert_allclose(K, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    np.testing.assert_allclose(diagonal, np.diag(pairwise_kernels(new, metric=kernel,
                                                                  **params)), rtol=1e-10)
