"""The dask graph of the Nyström pass and of the projection (docs/design.md §2, §11).

:func:`pass_statistics` adds the statistics of every row block of X
(:func:`kpca_dask.blocks.statistics.statistics_of_block`) into a few running
sums, one per *chain* of consecutive blocks: each task of a chain adds its
block to the m x m float64 sums it receives and hands them on, so a chain
holds one m x m array however many blocks it has. :func:`pass_plan` chooses
how many chains run at once from the memory of the place they run
(:mod:`kpca_dask._memory`): one per thread while m is small, fewer (each
with the cores' BLAS threads) once m^2 is large, down to one. The chains are
then added pairwise. Only m-sized and m x m arrays leave the workers.

:func:`project` maps every row block to its embedding. The small arrays every
task needs (landmarks, P, c) are shared once per graph, not copied into each
task.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

import dask
import dask.array as da
import dask.threaded
import numpy as np
from dask.delayed import Delayed
from threadpoolctl import threadpool_limits

from ..._compat import task_spec
from ..._memory import memory_budget, release_freed_memory
from ..._parallel import capped_blas, compute_options, distributed_client, scheduler_for
from ...blocks.projection import project_block
from ...blocks.statistics import (
    PassStatistics,
    finish_statistics,
    kernel_origin,
    merge_running,
    statistics_of_block,
)
from ...blocks.wide_rows import project_sums, statistics_of_sums, with_feature_moments
from ...errors import InvalidParameterError, NonFiniteInputError
from ...validation import one_feature_chunk
from ..graph_values import shared_values
from ..solve.landmark_factor import OVERFLOW_MESSAGE, reference_row
from .wide import WideTerms, is_wide, split_slice

__all__ = ["pass_statistics", "compute_pass", "chain_heads", "pass_plan", "pass_threads",
           "PassPlan", "project",
           "row_offsets", "raise_if_nonfinite", "ACCUMULATOR_BYTES",
           "SPLIT_EVERY", "reads_inlined"]

#: How many partial results one node of a tree reduction adds up (the pre-image pass's).
SPLIT_EVERY = 8

#: The most bytes of running m x m sums a process holds at once while there are
#: threads to spare: past it, fewer chains run, each with more BLAS threads.
ACCUMULATOR_BYTES = 2**28

#: Once fewer chains than threads run (m^2 large), each kernel block adds into m x m sums
#: it reads and writes whole, so a block takes up to this many float32 rows (float64: half)
#: rather than the 128 MiB of a small m: the pass's update ran at 176 GFLOP/s on 3355-row
#: blocks and 186-191 on 10 000-20 000 at m = 10 000 (bench/bench_syrk_rate.py, docs/design.md
#: §11). Never more than half of the sums' m^2 float64 words, nor than the task's share.
RATE_BLOCK_ROWS = 10_000


def row_offsets(X: da.Array) -> np.ndarray:
    """Global index of the first row of each row block (from metadata only)."""
    return np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)


@dataclass(frozen=True)
class PassPlan:
    """How the pass runs: chains at once, each task's BLAS threads, the local pool's threads."""

    chains: int
    blas_threads: int
    local_threads: int | None  # threads of dask's local pool for the pass; None: a cluster's
    block_bytes: int | None = None  # the most a task's kernel block takes (MemoryBudget)


def pass_plan(X: da.Array, n_landmarks: int) -> PassPlan:
    """Chains per process: one per thread while their m x m sums fit :data:`ACCUMULATOR_BYTES`
    (and an eighth of the process's memory), fewer past that, at least one.

    Examples
    --------
    >>> X = da.zeros((100, 2), chunks=10)
    >>> with dask.config.set(scheduler="threads", num_workers=2):
    ...     pass_plan(X, 500)
    PassPlan(chains=2, blas_threads=1, local_threads=2, block_bytes=134217728)
    >>> with dask.config.set({"scheduler": "threads", "num_workers": 2,
    ...                       "kpca-dask.memory-limit": "16 GiB"}):
    ...     pass_plan(X, 10_000)  # m^2 words over its share: one chain, both cores' BLAS
    PassPlan(chains=1, blas_threads=2, local_threads=1, block_bytes=400000000)
    """
    budget = memory_budget(X)
    m = max(n_landmarks, 1)
    room = min(ACCUMULATOR_BYTES, budget.process_bytes // 8)
    per_process = int(max(1, min(budget.threads, room // (8 * m**2))))
    blas_threads = max(1, budget.threads // per_process)
    block_bytes = budget.block_bytes
    if per_process < budget.threads:  # blocks at the update's rate (RATE_BLOCK_ROWS)
        block_bytes = max(block_bytes, budget.block_bytes_of(
            per_process, min(RATE_BLOCK_ROWS * m * 4, 4 * m**2)))
    client = distributed_client(X)
    processes = len(client.scheduler_info(n_workers=-1)["workers"]) if client else 1
    threaded = scheduler_for(X) is dask.threaded.get
    return PassPlan(max(1, per_process * processes), blas_threads,
                    per_process if threaded else None, block_bytes)


def pass_statistics(
    X: da.Array,
    landmarks: np.ndarray,
    kernel,
    params: dict,
    dtype=np.float64,
    reference: np.ndarray | None = None,
    *,
    blocks: slice | None = None,
    plan: PassPlan | None = None,
) -> Delayed:
    """Lazy one-pass statistics of ``X`` (or of its row ``blocks``) against the landmarks.

    ``X`` chunked along its features is read as it is, its kernel terms summed
    over feature chunks (:mod:`kpca_dask.engine.passes.wide`). The result is a
    ``Delayed`` that computes to a :class:`PassStatistics`; computing it reads
    every chunk of ``X`` exactly once (compute it with :func:`compute_pass`,
    which runs the plan's threads). ``reference`` is the row r subtracted from
    every kernel row (default: :func:`kpca_dask.engine.solve.landmark_factor.reference_row`).

    Examples
    --------
    >>> X = da.ones((10, 2), chunks=(4, 2))
    >>> stats = pass_statistics(X, np.ones((3, 2)), "linear", {}).compute()
    >>> stats.n_samples, float(stats.reference[0]), float(stats.gram[0, 0])
    (10, 2.0, 0.0)
    """
    if reference is None:
        reference = reference_row(landmarks, kernel, params)
    plan = plan or pass_plan(X, len(landmarks))
    chosen = slice(None) if blocks is None else blocks
    moments = None
    if is_wide(X, kernel):
        wide = WideTerms(X, landmarks, kernel, dtype, plan.block_bytes, moments=True)
        shared = shared_values(X, wide.norms, np.asarray(reference, np.float64))
        reads = set(wide.source_keys)
        offsets = np.concatenate([[0], np.cumsum(wide.row_chunks)[:-1]]).astype(np.int64)
        chosen = split_slice(wide.parts, chosen)  # the blocks of X, once split
        if wide.moments is None:
            blocks_of = wide.terms.to_delayed().ravel()
        else:  # unoptimised: fusion would make each chunk's pair twice
            blocks_of = wide.terms.to_delayed(optimize_graph=False).ravel()
            total = wide.moments[chosen].sum(axis=(0, 2)).rechunk(-1)
            moments = total.to_delayed(optimize_graph=False).ravel()[0]
        add = dask.delayed(statistics_of_sums, pure=True)
        rest = (shared[0], kernel, params, dtype, shared[1], plan.blas_threads,
                plan.block_bytes)
    else:
        X = one_feature_chunk(X, stacklevel=3)  # a callable kernel needs whole rows
        origin = kernel_origin(landmarks, kernel, X)
        Z = np.asarray(landmarks, dtype=np.float64)
        if origin is not None:
            Z = Z - origin
        shared = shared_values(X, Z.astype(dtype), np.asarray(reference, np.float64), origin)
        blocks_of, offsets = X.to_delayed().ravel(), row_offsets(X)
        reads = {block.key for block in blocks_of}
        add = dask.delayed(statistics_of_block, pure=True)
        # A chain keeps its block buffers from task to task on the local pool only, where it
        # has a thread of its own; a cluster places chains as it likes (docs/guide/memory.md).
        rest = (shared[0], kernel, params, dtype, shared[1], shared[2], plan.blas_threads,
                plan.block_bytes, plan.local_threads is not None)
    items = list(zip(blocks_of[chosen], offsets[chosen]))
    heads = chain_heads(len(items), plan.chains,
                        lambda running, i: add(running, items[i][0], int(items[i][1]), *rest))
    merge = dask.delayed(merge_running, pure=True)
    while len(heads) > 1:  # pairwise: a node holds two chains' sums, not all of them
        heads = [merge(*heads[i:i + 2]) for i in range(0, len(heads), 2)]
    result = dask.delayed(finish_statistics, pure=True)(heads[0])
    if moments is not None:  # the linear kernel's exact total
        result = dask.delayed(with_feature_moments, pure=True)(result, moments, X.chunks[1])
    return reads_inlined(result, reads)


def chain_heads(count: int, chains: int, add_to: Callable[[Any, int], Delayed]) -> list:
    """The last task of each of ``chains`` chains over the items 0..count-1, in order: a
    chain adds its items one task at a time, ``add_to(running, i)`` (``running`` None at
    its start), so a process holds one running sum per chain (docs/design.md §2).

    Examples
    --------
    >>> chain_heads(5, 2, lambda running, i: (running or ()) + (i,))
    [(0, 1, 2), (3, 4)]
    """
    heads = []
    for run in np.array_split(np.arange(count), max(1, min(chains, count))):
        running = None
        for i in run:
            running = add_to(running, int(i))
        heads.append(running)
    return heads


def reads_inlined(result: Delayed, block_keys: set) -> Delayed:
    """``result`` with each block's read made part of the task that consumes it.

    The consumer is the chain task that adds a row block, or, for data chunked
    along the features, the task that makes a chunk's terms.

    As separate tasks the reads have no dependencies, so a scheduler runs
    them as soon as a thread is free, far ahead of the chains, and a worker
    holds every block read but not yet added (measured: 290-360 MiB of 8 MiB
    chunks on a 572 MiB worker, up to distributed's spill threshold). Inside
    the chain task a block is read when it is added and released after. What
    a block's task depends on alone (a DataFrame partition it converts) is
    inlined with it; what it shares (the Zarr array object) stays a task.
    """
    Task, TaskRef, Alias, convert_legacy_graph = task_spec()
    graph = convert_legacy_graph(dict(result.__dask_graph__()))
    dependents: dict = {}
    for key, node in graph.items():
        for dependency in node.dependencies:
            dependents.setdefault(dependency, set()).add(key)

    def only_used_by(key, user) -> bool:
        return key in graph and dependents.get(key) == {user}

    def inlined(key):
        """The node of ``key``, taken out of the graph with what only it uses."""
        node = graph.pop(key)
        if isinstance(node, Alias):
            return inlined(node.target) if only_used_by(node.target, key) else node
        if not isinstance(node, Task):
            return node
        args = [inlined(arg.key) if isinstance(arg, TaskRef) and only_used_by(arg.key, key)
                else arg for arg in node.args]
        return Task(key, node.func, *args, **node.kwargs)

    for key, node in list(graph.items()):
        if not isinstance(node, Task) or not node.dependencies & block_keys:
            continue
        args = [inlined(arg.key) if isinstance(arg, TaskRef) and arg.key in block_keys
                and only_used_by(arg.key, key) else arg for arg in node.args]
        graph[key] = Task(key, node.func, *args, **node.kwargs)
    return Delayed(result.key, graph)


def compute_pass(X: da.Array, landmarks: np.ndarray, kernel, params: dict, dtype=np.float64,
                 reference: np.ndarray | None = None, *, blocks: slice | None = None
                 ) -> PassStatistics:
    """:func:`pass_statistics` computed: on dask's local pool with the plan's threads.

    With fewer chains than threads, a pool of one thread per chain keeps the
    spare threads from reading blocks far ahead of the chains that add them up.

    Examples
    --------
    >>> X = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(1, 2))
    >>> compute_pass(X, np.zeros((1, 2)), "linear", {}).n_samples
    3
    """
    plan = pass_plan(X, len(landmarks))
    statistics = pass_statistics(X, landmarks, kernel, params, dtype, reference,
                                 blocks=blocks, plan=plan)
    with pass_threads(X, plan) as options:
        (result,) = dask.compute(statistics, **options)
    release_freed_memory()  # the row blocks' memory, before the m x m work that follows
    return result


@contextlib.contextmanager
def pass_threads(X: da.Array, plan: PassPlan):
    """Context for computing a pass on ``plan``'s threads; yields dask.compute's options.

    On dask's local pool the BLAS threads are set here, in the calling thread:
    OpenBLAS takes a lower thread count from a pool thread but not a higher one
    (a chain running alone needs every core's), so the block functions cannot
    raise it themselves.
    """
    if plan.local_threads is None:
        with capped_blas(X):
            yield {}
        return
    with threadpool_limits(limits=plan.blas_threads, user_api="blas"):
        yield {"num_workers": plan.local_threads, **compute_options(X)}


def raise_if_nonfinite(stats: PassStatistics, what: str = "X") -> None:
    """Turn the pass's NaN/inf count, or kernel values that overflowed, into a clear error."""
    if stats.n_nonfinite:
        raise NonFiniteInputError(
            f"{what} contains {stats.n_nonfinite} NaN or infinite value(s), the first in "
            f"row {stats.first_nonfinite_row}. Remove or impute them first, e.g. "
            f"X[~da.isfinite(X).all(axis=1)] to find the rows."
        )
    # Column sums of G: a NaN or an infinity anywhere in G reaches them, and they take
    # m words where a mask of G would take m^2 bytes.
    if not (np.isfinite(stats.gram.sum(axis=0)).all() and np.isfinite(stats.column_sums).all()
            and np.isfinite(stats.diagonal_sum)):
        raise InvalidParameterError(OVERFLOW_MESSAGE.format(where=f"{what} and the landmarks"))


def project(X: da.Array, landmarks: np.ndarray, projection: np.ndarray, offset: np.ndarray,
            kernel, params: dict, dtype) -> da.Array:
    """Lazy projection of every row of ``X``: one kernel block per row block.

    Examples
    --------
    >>> X = da.from_array(np.eye(3), chunks=(2, 3))
    >>> project(X, np.eye(3), np.ones((3, 1)), np.zeros(1), "linear", {}, np.float64).compute()
    array([[1.],
           [1.],
           [1.]])
    """
    q = projection.shape[1]
    if is_wide(X, kernel):
        wide = WideTerms(X, landmarks, kernel, dtype)
        shared = shared_values(X, wide.norms, projection, offset)
        return wide.terms.map_blocks(
            project_sums, norms=shared[0], projection=shared[1], offset=shared[2],
            kernel=kernel, params=params, dtype_kernel=dtype, chunks=(wide.row_chunks, (q,)),
            dtype=np.float64, meta=np.empty((0, 0), np.float64))
    X = one_feature_chunk(X, stacklevel=3)  # a callable kernel needs whole rows
    origin = kernel_origin(landmarks, kernel, X)
    Z = np.asarray(landmarks, dtype=np.float64)
    if origin is not None:
        Z = Z - origin
    shared = shared_values(X, Z.astype(dtype), projection, offset, origin)
    return X.map_blocks(
        project_block,
        landmarks=shared[0],
        projection=shared[1],
        offset=shared[2],
        kernel=kernel,
        params=params,
        dtype_kernel=dtype,
        origin=shared[3],
        chunks=(X.chunks[0], (q,)),
        dtype=np.float64,
        meta=np.empty((0, 0), np.float64),
    )
