"""Fit reads each chunk of the data once, and stays lazy where it should."""

from __future__ import annotations

import collections

import dask
import dask.array as da
import numpy as np
import pytest
from _counting import CountComputes, CountingRows

from kpca_dask import KernelPCA


def _source(n=2000, rows=100, seed=0):
    data = np.random.default_rng(seed).normal(size=(n, 4))
    source = CountingRows(data)
    X = da.from_array(source, chunks=(rows, -1), asarray=True, fancy=False)
    chunk_starts = [(start, start + rows) for start in range(0, n, rows)]
    return source, X, chunk_starts


def test_fit_reads_every_chunk_exactly_once():
    """With given landmarks, fitting reads each of the 20 chunks once and nothing else."""
    source, X, chunks = _source()
    landmarks = source.values[::40]
    KernelPCA(3, landmarks=landmarks, n_landmarks=len(landmarks)).fit(X)
    assert source.row_ranges() == collections.Counter({chunk: 1 for chunk in chunks})


def test_uniform_landmarks_add_only_reads_of_their_own_rows():
    """Drawing landmarks reads only the chunks holding them; the pass reads each chunk once."""
    source, X, chunks = _source()
    kpca = KernelPCA(3, n_landmarks=5, landmarks="uniform", random_state=0).fit(X)
    holding = {start // 100 for start in kpca.landmark_indices_}
    per_chunk = collections.Counter()
    for (start, _stop), count in source.row_ranges().items():
        per_chunk[start // 100] += count
    for index in range(len(chunks)):
        assert per_chunk[index] == 1 + (index in holding), (index, per_chunk[index])


def test_fit_computes_once():
    """Fit hands the scheduler one graph for the pass (plus one for the landmark rows)."""
    _, X, _ = _source()
    with CountComputes() as counted:
        KernelPCA(3, n_landmarks=50, random_state=0).fit(X)
    assert counted.computes == 2


def test_transform_of_dask_input_is_lazy():
    """transform of a dask array computes nothing and keeps the row chunks."""
    source, X, _ = _source()
    kpca = KernelPCA(3, n_landmarks=50, random_state=0).fit(X)
    source.clear()
    Y = kpca.transform(X)
    assert isinstance(Y, da.Array) and not source.reads
    assert Y.chunks == (X.chunks[0], (3,))
    np.testing.assert_allclose(Y.compute(), kpca.transform(source.values), rtol=1e-12)


def test_pass_output_is_m_sized():
    """Nothing n-sized comes back from the pass: its result is m and m x m arrays."""
    from kpca_dask.engine.passes.nystrom import pass_statistics

    _, X, _ = _source(n=5000)
    stats = pass_statistics(X, np.zeros((7, 4)), "rbf", {"gamma": 1.0}).compute()
    assert stats.n_samples == 5000
    assert stats.column_sums.shape == (7,) and stats.gram.shape == (7, 7)


def _reads_per_chunk(source, rows=100):
    per_chunk = collections.Counter()
    for (start, _stop), count in source.row_ranges().items():
        per_chunk[start // rows] += count
    return per_chunk


def test_gamma_and_landmark_samples_are_read_together():
    """gamma="median" and k-means landmarks each sample rows from nearly every chunk;
    their samples are read in one go: each chunk once for both, once for the pass."""
    source, X, chunks = _source()
    KernelPCA(3, gamma="median", n_landmarks=20, random_state=0).fit(X)
    per_chunk = _reads_per_chunk(source)
    assert set(per_chunk) == set(range(len(chunks)))
    assert max(per_chunk.values()) == 2, per_chunk


def test_automatic_m_reads_its_samples_together():
    """n_landmarks="auto" samples held-out rows and then rows for each m it tries;
    all of them are read in one go, not once per m."""
    source, X, chunks = _source(n=3000)
    kpca = KernelPCA(3, n_landmarks="auto", landmarks="uniform", max_landmarks=1024,
                     tol=1e-12, gamma=5.0, random_state=0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cap is reached on purpose: several m tried
        kpca.fit(X)
    assert len(kpca.landmark_path_) >= 3
    assert max(_reads_per_chunk(source).values()) == 2


def test_reading_together_changes_no_result(monkeypatch):
    """The same rows, so the same gamma, landmarks and model, read together or one by one."""
    from kpca_dask.engine import sampling

    _, X, _ = _source()
    together = KernelPCA(3, gamma="median", n_landmarks=20, random_state=0).fit(X)
    monkeypatch.setattr(sampling, "READ_TOGETHER_BYTES", 0)
    source, X, _ = _source()
    apart = KernelPCA(3, gamma="median", n_landmarks=20, random_state=0).fit(X)
    assert max(_reads_per_chunk(source).values()) == 3  # what reading together saves
    assert together.gamma_ == apart.gamma_
    np.testing.assert_array_equal(together.landmarks_, apart.landmarks_)
    np.testing.assert_array_equal(together.eigenvalues_, apart.eigenvalues_)


@pytest.mark.parametrize("strategy", ["uniform", "kmeans", "rpcholesky"])
def test_each_strategy_samples_exactly_the_rows_planned_for_it(strategy):
    """planned_sample is the strategy's own first draw: with it held in memory, choosing
    the landmarks reads nothing more from the source."""
    from kpca_dask.engine.sampling import RowSampler
    from kpca_dask.landmarks.strategies import planned_sample, select_landmarks

    source, X, _ = _source()
    rng = np.random.default_rng(3)
    planned = planned_sample(X.shape[0], 10, strategy, rng)
    assert planned.size > 0
    sampler = RowSampler.reading_ahead(X, [planned, np.array([0])])
    reads_before = source.total()
    select_landmarks(X, 10, strategy, rng=rng, kernel="rbf", params={"gamma": 0.5},
                     sampler=sampler)
    assert source.total() == reads_before


def test_each_block_is_read_inside_the_task_that_adds_it(tmp_path):
    """No chunk of a Zarr array, nor partition of a DataFrame, is a task of its own in
    the pass: a scheduler cannot read blocks ahead of the chains that add them."""
    import dask.dataframe as dd
    import pandas as pd

    from kpca_dask.engine.passes.nystrom import pass_statistics
    from kpca_dask.io import open_array, write_array
    from kpca_dask.io.frames import frame_to_array

    write_array(da.ones((400, 3), chunks=(50, 3)), str(tmp_path / "x.zarr"))
    frame = dd.from_pandas(pd.DataFrame(np.ones((400, 3)), columns=list("abc")),
                           npartitions=8)
    for X in (open_array(str(tmp_path / "x.zarr")), frame_to_array(frame)):
        statistics = pass_statistics(X, np.ones((5, 3)), "rbf", {"gamma": 0.5})
        keys = set(dict(statistics.__dask_graph__()))
        assert not keys & set(X.__dask_keys__()[i][0] for i in range(X.numblocks[0]))
        with dask.config.set(scheduler="threads"):
            assert statistics.compute().n_samples == 400
