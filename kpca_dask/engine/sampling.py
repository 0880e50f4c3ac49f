"""Seeded sampling of rows by global index: the same rows for any chunking.

Used by the landmark strategies, the bandwidth rules and the automatic choice
of m. Indices are drawn from global row numbers with a ``numpy.random.Generator``,
never per chunk, so a seed gives the same rows whatever the chunking or the cluster.

A sample is drawn as contiguous runs of rows at seeded positions
(:func:`sample_indices`): a few thousand rows scattered uniformly over a
chunked store would touch nearly every chunk, so each sample would cost about
a read of the data; ten runs touch about ten chunks. The rule depends on n and
the sample size only, never on the chunks (docs/design.md §2, reproducibility).
:class:`RowSampler` draws and reads the samples of one fit. Built with
:meth:`RowSampler.reading_ahead`, it reads the rows of several planned samples
(gamma's, the landmarks', the automatic m's) in one go and serves them from
memory; the fit hands it to the bandwidth rule and the landmark strategies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dask.array as da
import numpy as np
from dask.highlevelgraph import MaterializedLayer

from .._parallel import (
    compute_options,
    distributed_client,
    read_scheduler,
    with_own_inputs_locally,
)
from ..blocks.sparse_rows import as_block, first_nonfinite
from ..errors import InsufficientMemoryError, NonFiniteInputError

__all__ = ["as_generator", "independent_generators", "take_rows", "raise_if_rows_nonfinite",
           "sample_rows", "sample_indices", "RowSampler", "run_rows", "read_rows",
           "rows_by_runs", "refuse_sample_beyond_memory", "SAMPLE_SHARE", "held_blocks"]

#: Most bytes of rows :meth:`RowSampler.reading_ahead` holds in memory; planned
#: samples above it are read one by one, as they are asked for.
READ_TOGETHER_BYTES = 2**28

#: Longest run of contiguous rows in a sample. Ten runs hold the k-means sample
#: of the default 1000 landmarks (20 000 rows), so a fit touches ~10 stored chunks.
MAX_RUN_ROWS = 2000
#: A run holds at most n / RUNS_PER_DATA rows: below 10^6 rows runs get shorter,
#: and below 2000 rows every run is one row (plain uniform sampling).
RUNS_PER_DATA = 1000
#: Fewest runs a sample of at least this many rows is drawn from, however small it is.
MIN_RUNS = 10
#: Above this many slots, slots are drawn one batch at a time instead of permuted.
_PERMUTED_SLOTS = 2**16
_SLOT_BATCH = 256


def as_generator(random_state) -> np.random.Generator:
    """A numpy Generator from None, an int, a Generator or a legacy RandomState.

    Examples
    --------
    >>> bool(as_generator(0).integers(10) == as_generator(0).integers(10))
    True
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


def independent_generators(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` child generators whose streams are independent of ``rng``'s own draws.

    Spawning does not advance ``rng``, so the landmarks drawn from ``rng``
    afterwards are the same whether or not the children are used.

    Examples
    --------
    >>> rng = as_generator(0)
    >>> child, = independent_generators(rng, 1)
    >>> bool(rng.integers(10**6) == as_generator(0).integers(10**6))
    True
    """
    return list(rng.spawn(n))


@dataclass(frozen=True)
class RowSampler:
    """Seeded samples of the rows of ``X``, some of them read ahead and held in memory.

    One is made per fit and handed to whatever samples rows (the bandwidth
    rule, the landmark strategies, the automatic m), so the rows planned
    ahead are read once. Rows it does not hold are read when asked for.

    Parameters
    ----------
    X : dask array of shape (n_samples, n_features)
    held_indices : ndarray of int64, ascending
        Global rows already read (see :meth:`reading_ahead`).
    held_rows : ndarray or CSR matrix
        Those rows.

    Examples
    --------
    >>> X = da.arange(20.0, chunks=6).reshape(10, 2)
    >>> sampler = RowSampler.reading_ahead(X, [np.array([1, 4]), np.array([4, 9])])
    >>> sampler.held_indices.tolist()
    [1, 4, 9]
    >>> sampler.take(np.array([9, 4]))
    array([[18., 19.],
           [ 8.,  9.]])
    """

    X: da.Array
    held_indices: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    held_rows: object = None

    @classmethod
    def reading_ahead(cls, X: da.Array, samples: list[np.ndarray],
                      max_bytes: int | None = None) -> "RowSampler":
        """A sampler holding the union of the planned ``samples``, read in one compute.

        ``samples`` are the global indices the fit will ask for (see
        :func:`sample_indices` to plan a draw without making it), so a chunk
        holding rows of several samples is read once, not once per sample.
        With fewer than two samples, or a union above ``max_bytes`` (default
        :data:`READ_TOGETHER_BYTES`), nothing is read ahead. NaN or inf rows
        are reported by the :meth:`take` call that asks for them, with its
        purpose.
        """
        samples = [np.asarray(s, dtype=np.int64) for s in samples if len(s)]
        union = np.unique(np.concatenate(samples)) if samples else np.empty(0, np.int64)
        limit = READ_TOGETHER_BYTES if max_bytes is None else max_bytes
        if len(samples) < 2 or union.size * X.shape[1] * X.dtype.itemsize > limit:
            return cls(X)
        return cls(X, union, _read_by_runs(X, union))

    def take(self, indices: np.ndarray, *, purpose: str = "choosing landmarks") -> np.ndarray:
        """Rows ``X[indices]`` as numpy; reads only the chunks that hold rows not held.

        Rows of an X with scipy.sparse blocks come back as a CSR matrix.
        Raises :class:`~kpca_dask.errors.NonFiniteInputError` naming the
        first global row index that holds NaN or inf; ``purpose`` says in
        the message what the rows were read for.
        """
        order = np.argsort(indices)
        ascending = indices[order]
        rows = self._held(ascending)
        if rows is None:
            rows = _read_by_runs(self.X, ascending)
        raise_if_rows_nonfinite(rows, ascending, purpose)
        if np.array_equal(ascending, indices):
            # Asked in order (a sample's indices are): the rows as read, not a reordered
            # copy, which for 400 rows of 10^6 float32 features is 1.6 GB more at once.
            return rows
        return rows[np.argsort(order)]

    def holds(self, size: int, rng: np.random.Generator) -> bool:
        """Whether the rows :meth:`sample` would draw from ``rng`` are held (rng unchanged)."""
        import copy

        return self._held(sample_indices(self.X.shape[0], size, copy.deepcopy(rng))) is not None

    def sample(self, size: int, rng: np.random.Generator, *,
               purpose: str = "choosing landmarks") -> tuple[np.ndarray, np.ndarray]:
        """``size`` distinct rows in seeded runs (all rows when size >= n), and their indices.

        The indices are those of :func:`sample_indices`, ascending.
        """
        indices = sample_indices(self.X.shape[0], size, rng)
        return self.take(indices, purpose=purpose), indices

    def _held(self, ascending: np.ndarray):
        """The held rows at ``ascending``, or None when some of them are not held."""
        union = self.held_indices
        if self.held_rows is None or not ascending.size:
            return None
        where = np.searchsorted(union, ascending)
        if where[-1] < union.size and np.array_equal(union[where], ascending):
            return self.held_rows[where]
        return None


def _read_by_runs(X: da.Array, ascending: np.ndarray):
    """The rows ``X[ascending]`` read now. A chunk of data chunked along the features is made
    inside one task from what only it uses, so a row block's chunks are not all made before
    the first is read (``with_own_inputs_locally``). Rows of blocks the graph holds as
    arrays (in-memory data) are taken from them, with no scheduler."""
    blocks = held_blocks(X)
    if blocks is not None:
        return _rows_of_blocks(blocks, ascending)
    if X.numblocks[1] > 1:
        X = with_own_inputs_locally(X)
    return read_rows(_rows_by_runs(X, ascending))


def held_blocks(X: da.Array) -> list[np.ndarray] | None:
    """The row blocks of ``X`` when its graph is one layer holding them as numpy arrays (how
    the estimators wrap in-memory data, ``kpca_dask.validation.as_dask_array``); else None.

    Reading a fit_transform's k-means sample of 200 000 x 32 in-memory rows through the
    scheduler took 0.13-0.17 s of its 2.7 s (graph, ordering and threads); taken from the
    arrays, milliseconds. Any other graph (or a dask that stored the arrays otherwise) is
    read by the scheduler, as before.

    Examples
    --------
    >>> from kpca_dask.validation import as_dask_array
    >>> [block.shape for block in held_blocks(as_dask_array(np.zeros((5, 2)), block_rows=3)[0])]
    [(3, 2), (2, 2)]
    >>> held_blocks(da.zeros((5, 2), chunks=3)) is None  # made by tasks
    True
    """
    graph = X.__dask_graph__()
    layers = getattr(graph, "layers", None)
    if (X.ndim != 2 or X.numblocks[1] != 1 or layers is None or len(layers) != 1
            or not isinstance(layers.get(X.name), MaterializedLayer)):
        return None
    layer = layers[X.name]
    blocks = [layer.get((X.name, i, 0)) for i in range(X.numblocks[0])]
    if all(type(block) is np.ndarray and block.shape == (rows, X.shape[1])
           and block.dtype == X.dtype for block, rows in zip(blocks, X.chunks[0])):
        return blocks
    return None


def _rows_of_blocks(blocks: list[np.ndarray], ascending: np.ndarray) -> np.ndarray:
    """Rows ``ascending`` (global, sorted) of the stacked ``blocks``, as one new array."""
    starts = np.cumsum([0] + [len(block) for block in blocks])
    ascending = np.asarray(ascending, dtype=np.intp)
    if ascending.size and (ascending[0] < 0 or ascending[-1] >= starts[-1]):
        raise IndexError(f"rows {ascending[0]} to {ascending[-1]} of {starts[-1]} asked")
    which = np.searchsorted(starts, ascending, side="right") - 1
    cuts = np.searchsorted(which, np.arange(len(blocks) + 1))
    parts = [blocks[b][ascending[cuts[b]:cuts[b + 1]] - starts[b]]
             for b in range(len(blocks)) if cuts[b + 1] > cuts[b]]
    return np.concatenate(parts, axis=0) if parts else blocks[0][:0].copy()


def take_rows(X: da.Array, indices: np.ndarray, *, purpose: str = "choosing landmarks"
              ) -> np.ndarray:
    """Rows ``X[indices]`` as numpy, read now; see :meth:`RowSampler.take`.

    Examples
    --------
    >>> X = da.arange(20.0, chunks=6).reshape(10, 2)
    >>> take_rows(X, np.array([3, 0]))
    array([[6., 7.],
           [0., 1.]])
    """
    return RowSampler(X).take(indices, purpose=purpose)


def read_rows(rows: da.Array):
    """``rows`` computed: numpy (or CSR for sparse blocks).

    Rows chunked along the features (docs/design.md §12) and computed here
    are written chunk by chunk into one array made first, so the rows are held
    once: a compute would hold every chunk and their concatenation at once
    (twice the rows). A cluster's workers join them before they are sent.

    Examples
    --------
    >>> read_rows(da.arange(12.0, chunks=3).reshape(2, 6)).tolist()
    [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]
    """
    # "sync" in a task that reads its own rows; else the default, named when dask would
    # import distributed to find it (kpca_dask._parallel.scheduler_for).
    scheduler = read_scheduler() or compute_options(rows).get("scheduler")
    if (rows.numblocks[1] == 1 or not isinstance(rows._meta, np.ndarray)
            or (scheduler is None and distributed_client(rows) is not None)):
        return as_block(rows.compute(scheduler=scheduler))
    out = np.empty(rows.shape, rows.dtype)
    da.store(rows, out, lock=False, scheduler=scheduler)
    return out


#: Most runs read as slices; more scattered rows are read by one fancy index.
_SLICED_RUNS = 128


#: The most of the memory available that a sample of rows held in memory may take.
SAMPLE_SHARE = 0.25


def refuse_sample_beyond_memory(X: da.Array, rows: int, purpose: str, advice: str) -> None:
    """Refuse, before reading it, a sample of ``rows`` float64 rows of ``X`` over
    :data:`SAMPLE_SHARE` of the memory available (wide data: 10^6 features).

    Examples
    --------
    >>> refuse_sample_beyond_memory(da.zeros((10, 3)), 5, "testing", "")
    """
    from dask.utils import format_bytes

    from .._memory import memory_budget

    needed = 8 * min(rows, X.shape[0]) * X.shape[1]
    budget = memory_budget(X)
    if needed > SAMPLE_SHARE * budget.free_bytes:
        raise InsufficientMemoryError(
            f"{purpose} holds {min(rows, X.shape[0])} rows of {X.shape[1]} features in memory: "
            f"{format_bytes(needed)} as float64, more than {SAMPLE_SHARE:.0%} of "
            f"{budget.describe()}. {advice}")


def rows_by_runs(X: da.Array, ascending: np.ndarray) -> da.Array:
    """The lazy rows ``X[ascending]``, each run of consecutive indices taken as a slice.

    Examples
    --------
    >>> rows_by_runs(da.arange(12.0, chunks=4).reshape(6, 2), np.array([1, 2, 5])).compute()
    array([[ 2.,  3.],
           [ 4.,  5.],
           [10., 11.]])
    """
    return _rows_by_runs(X, ascending)


def _rows_by_runs(X: da.Array, ascending: np.ndarray) -> da.Array:
    """``X[ascending]``, each run of consecutive indices taken as a slice.

    A slice of a stored array reads only the stored chunks it overlaps, even
    where one dask chunk spans several of them; a fancy index may read whole
    dask chunks.
    """
    breaks = np.flatnonzero(np.diff(ascending) != 1) + 1
    if ascending.size == 0 or breaks.size >= _SLICED_RUNS:
        return X[ascending]
    starts = ascending[np.r_[0, breaks]]
    stops = ascending[np.r_[breaks - 1, ascending.size - 1]] + 1
    return da.concatenate([X[int(a):int(b)] for a, b in zip(starts, stops)], axis=0)


def raise_if_rows_nonfinite(rows: np.ndarray, indices: np.ndarray, purpose: str) -> None:
    """Refuse NaN or inf in rows read from X, naming the first bad global row.

    Rows of dask or Zarr input are only checked by the fitting pass; rows
    read before it (for landmarks or a bandwidth) must be checked here, or
    NaN would surface as a misleading error in k-means or the Cholesky.

    Examples
    --------
    >>> rows = np.array([[1.0], [np.nan]])
    >>> raise_if_rows_nonfinite(rows, np.array([4, 9]), "testing")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.NonFiniteInputError: X contains NaN or infinite values in row 9, ...
    """
    n_bad, _ = first_nonfinite(rows)
    if n_bad:
        first = int(np.min(indices[_nonfinite_rows(rows)]))
        raise NonFiniteInputError(
            f"X contains NaN or infinite values in row {first}, found while {purpose}. "
            "Remove or impute them first, e.g. X[~da.isfinite(X).all(axis=1)] to find the rows.")


def _nonfinite_rows(rows) -> np.ndarray:
    if hasattr(rows, "indptr"):  # CSR: rows holding a NaN/inf stored value
        owner = np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr))
        return np.unique(owner[~np.isfinite(rows.data)])
    return np.flatnonzero(~np.isfinite(rows).all(axis=1))


def sample_rows(X: da.Array, size: int, rng: np.random.Generator, *,
                purpose: str = "choosing landmarks") -> tuple[np.ndarray, np.ndarray]:
    """``size`` distinct rows in seeded runs (all rows when size >= n); see :func:`sample_indices`.

    Returns the rows as numpy and their global indices, ascending. Rows with
    NaN or inf raise :class:`~kpca_dask.errors.NonFiniteInputError` (see
    :func:`take_rows`).

    Examples
    --------
    >>> X = da.arange(20.0, chunks=6).reshape(10, 2)
    >>> rows, indices = sample_rows(X, 3, as_generator(0))
    >>> bool((rows[:, 0] == 2 * indices).all())
    True
    """
    return RowSampler(X).sample(size, rng, purpose=purpose)


def run_rows(n: int) -> int:
    """Rows per slot of the sampling grid of n rows: n // 1000, at least 1, at most 2000.

    Examples
    --------
    >>> run_rows(70_000), run_rows(10**7), run_rows(500)
    (70, 2000, 1)
    """
    return max(1, min(MAX_RUN_ROWS, n // RUNS_PER_DATA))


def sample_indices(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """The ascending global indices :func:`sample_rows` draws: ``size`` of ``n`` (all if more).

    The rows are split into ``n // L`` slots of ``L = run_rows(n)`` contiguous
    rows (the last slot takes the remainder). A sample of ``size`` rows takes
    ``r = max(ceil(size / L), min(size, 10))`` slots in a seeded random order and
    a run of ``ceil(size / r)`` rows from a seeded offset in each, wrapping
    around the end of the slot (the last run cut to make exactly ``size``):
    every row is about equally likely to be drawn. The order of the slots
    depends on ``n`` and the generator only, so a smaller sample from the same
    generator state lies in the slots of a larger one (the automatic m reads
    its growing samples from the same slots).
    Called on a copy of a generator, it plans a draw without making it.

    Examples
    --------
    >>> import copy
    >>> rng = as_generator(0)
    >>> planned = sample_indices(100, 5, copy.deepcopy(rng))
    >>> bool((planned == sample_indices(100, 5, rng)).all())
    True
    >>> rows = sample_indices(10**7, 20_000, as_generator(0))  # 10 slots of 2000 rows
    >>> np.unique(rows // run_rows(10**7)).size
    10
    """
    if size >= n:
        return np.arange(n)
    if size <= 0:
        return np.empty(0, np.int64)
    slot_rows = run_rows(n)
    n_slots = n // slot_rows
    n_runs = max(-(-size // slot_rows), min(size, MIN_RUNS))
    if n_runs > n_slots:  # nearly every row: runs would not fit in the slots
        return np.sort(rng.choice(n, size=size, replace=False))
    per_run = -(-size // n_runs)
    slots = _slot_order(n_slots, n_runs, rng)
    # The last slot holds the remainder too.
    lengths = np.where(slots == n_slots - 1, n - (n_slots - 1) * slot_rows, slot_rows)
    # A run wraps around the end of its slot, so every row of a slot is equally
    # likely to be drawn: estimates on the sample (the trace error, Var X) stay unbiased.
    offsets = rng.integers(lengths)[:, None] + np.arange(per_run)
    indices = (slots * slot_rows)[:, None] + offsets % lengths[:, None]
    return np.sort(indices.ravel()[:size])


def _slot_order(n_slots: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """The first ``count`` of a seeded random order of ``n_slots`` slots.

    The order does not depend on ``count``: a longer prefix extends a shorter
    one. Few slots are permuted; many are drawn in fixed batches, keeping the
    first occurrence of each, so nothing n-sized is made.
    """
    if n_slots <= _PERMUTED_SLOTS:
        return rng.permutation(n_slots)[:count]
    order: dict[int, None] = {}
    while len(order) < count:
        for slot in rng.integers(n_slots, size=_SLOT_BATCH).tolist():
            order.setdefault(slot, None)
    return np.fromiter(order, dtype=np.int64)[:count]
