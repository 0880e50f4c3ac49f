"""The samples read before the pass touch a small share of the stored chunks."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import zarr
from zarr.storage import LocalStore, WrapperStore

from kpca_dask import KernelPCA
from kpca_dask.engine.sampling import as_generator, run_rows, sample_indices
from kpca_dask.io import open_array
from kpca_dask.landmarks.auto import planned_samples

N_ROWS, CHUNK_ROWS = 200_000, 2_000  # 100 stored chunks; runs of run_rows(n) = 200 rows


class CountingStore(WrapperStore):
    """A real store that counts the chunk objects read from it."""

    def __init__(self, store, reads: collections.Counter | None = None):
        super().__init__(store)
        self.reads = collections.Counter() if reads is None else reads

    def _with_store(self, store):  # zarr re-wraps the store (read-only views): keep one count
        return type(self)(store, self.reads)

    async def get(self, key, prototype, byte_range=None):
        value = await super().get(key, prototype, byte_range)
        if value is not None and key.startswith("c/"):
            self.reads[key] += 1
        return value


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("sampling") / "x.zarr"
    data = np.random.default_rng(0).normal(size=(N_ROWS, 4)).astype(np.float32)
    zarr.create_array(str(path), data=data, chunks=(CHUNK_ROWS, 4))
    return path


def _fit_counting(path, **params):
    store = CountingStore(LocalStore(str(path), read_only=True))
    kpca = KernelPCA(3, n_landmarks=50, random_state=0, **params)
    kpca.fit(open_array(zarr.open_array(store=store, mode="r")))
    return kpca, store.reads


@pytest.mark.parametrize("gamma, at_most", [(None, 0.15), ("median", 0.25)])
def test_sampling_reads_a_small_share_of_the_chunks(store_path, gamma, at_most):
    """A k-means fit reads each of the 100 chunks once for the pass and, before it,
    only the few chunks its runs of rows fall in (10 runs per sample), not all 100."""
    _, reads = _fit_counting(store_path, gamma=gamma)
    n_chunks = N_ROWS // CHUNK_ROWS
    assert len(reads) == n_chunks  # the pass read every chunk
    read_for_samples = sum(reads.values()) - n_chunks
    assert 0 < read_for_samples <= at_most * n_chunks, read_for_samples


def test_stored_chunking_does_not_change_the_sampled_rows(store_path, tmp_path):
    """The same rows in chunks of 2000 and of 4999 rows give the same landmarks and gamma."""
    other = tmp_path / "other.zarr"
    zarr.create_array(str(other), data=zarr.open_array(str(store_path))[:], chunks=(4999, 4))
    a, _ = _fit_counting(store_path, gamma="median", landmarks="uniform")
    b, _ = _fit_counting(other, gamma="median", landmarks="uniform")
    assert a.gamma_ == b.gamma_
    np.testing.assert_array_equal(a.landmark_indices_, b.landmark_indices_)


def test_a_sample_is_runs_of_rows():
    """20 000 rows of 10^7 fill 10 slots of 2000 rows; 1000 rows are 100 rows in each of 10."""
    for size, runs in [(20_000, 10), (1_000, 10)]:
        indices = sample_indices(10**7, size, as_generator(0))
        slots, per_slot = np.unique(indices // run_rows(10**7), return_counts=True)
        assert indices.size == size and np.unique(indices).size == size
        assert slots.size == runs and set(per_slot) == {size // runs}


def test_every_row_is_about_equally_likely():
    """Runs wrap around the end of their slot, so no row of a slot is favoured: over
    2000 seeds, the first, middle and last row of the slots are drawn equally often."""
    n = 10**5  # slots of 100 rows; 300 rows are 10 runs of 30
    counts = np.zeros(n)
    for seed in range(2000):
        np.add.at(counts, sample_indices(n, 300, as_generator(seed)), 1)
    by_offset = counts.reshape(-1, run_rows(n)).sum(axis=0)
    expected = 2000 * 300 / run_rows(n)
    assert np.abs(by_offset / expected - 1).max() < 0.05, by_offset


@pytest.mark.parametrize("n", [10**7, 10**9])  # slots permuted; slots drawn in batches
def test_growing_samples_share_their_slots(n):
    """The automatic m samples 20 m rows for each m tried; each sample's runs lie in the
    slots of the largest, so the growth reads no more slots than its last sample."""
    samples = planned_samples(n, "kmeans", rng=as_generator(1), validation_rng=as_generator(2),
                              max_landmarks=1024)
    landmark_samples = samples[1:]
    assert [s.size for s in landmark_samples] == [20 * m for m in (128, 256, 512, 1024)]
    slots = [set(s // run_rows(n)) for s in landmark_samples]
    assert set().union(*slots) == slots[-1]


@pytest.mark.parametrize("size", [1, 300, 5_000, 30_000])
def test_rows_of_in_memory_data_are_taken_from_its_blocks(rng, size):
    """Wrapped numpy data: the sample's rows come from the blocks the graph holds, across block
    edges, equal to indexing the array; an array made by tasks is read by the scheduler."""
    import dask
    import dask.array as da

    from kpca_dask.engine.sampling import RowSampler, held_blocks
    from kpca_dask.validation import as_dask_array

    X = rng.normal(size=(40_000, 3))
    wrapped, _ = as_dask_array(X, block_rows=7_000)
    assert held_blocks(wrapped) is not None
    made = da.from_array(X, chunks=(7_000, 3)) + 0.0  # blocks of a task
    assert held_blocks(made) is None and held_blocks(wrapped.astype(np.float32)) is None
    for source in (wrapped, made):
        rows, indices = RowSampler(source).sample(size, np.random.default_rng(size))
        np.testing.assert_array_equal(rows, X[indices])
        assert not np.shares_memory(rows, X)

    def no_scheduler(*args, **kwargs):
        raise AssertionError("the rows were read by a scheduler")

    with dask.config.set(scheduler=no_scheduler):  # wrapped rows need none, in any order
        edges = np.array([39_999, 0, 6_999, 7_000, 13_999, 14_000])
        np.testing.assert_array_equal(RowSampler(wrapped).take(edges), X[edges])
        float32, _ = as_dask_array(X.astype(np.float32), block_rows=7_000)
        np.testing.assert_array_equal(RowSampler(float32).take(edges),
                                      X.astype(np.float32)[edges])
