"""The dask graph of the coupled pass: one read of two fields that share their samples.

Each row block of x and the same rows of y go to one task
(:func:`kpca_dask.blocks.cross_sums.coupled_statistics_of_block`), which adds
both fields' own sums and their cross sums S_xy into the running sums of its
chain; chains and their pairwise merge are those of the single pass
(:mod:`kpca_dask.engine.passes.nystrom`), planned for the m_x^2 + m_y^2 +
m_x m_y words a chain holds (docs/design.md §20). Both fields are cut into common row
blocks of whole stored chunks first (:func:`row_groups`), so the two are read side
by side, each chunk once and inside the task that adds it, whatever their stored chunks.
"""

from __future__ import annotations

import warnings
from functools import partial

import dask
import dask.array as da
import numpy as np
from dask.array.core import PerformanceWarning

from ..._memory import release_freed_memory
from ...blocks.coupled_replicates import CoupledReplicateSums, coupled_replicates_of_block
from ...blocks.cross_sums import (
    CoupledStatistics,
    FieldKernel,
    coupled_statistics_of_block,
)
from ...blocks.replicate_counts import DrawnCounts, FoldCounts
from ...blocks.statistics import finish_statistics, kernel_origin, merge_running
from ...validation import one_feature_chunk
from ..graph_values import shared_values
from .nystrom import chain_heads, pass_plan, pass_threads, raise_if_nonfinite, reads_inlined

__all__ = ["compute_coupled_pass", "compute_coupled_replicates", "field_kernel",
           "row_groups", "aligned_pieces"]


def field_kernel(X: da.Array, landmarks: np.ndarray, kernel, params: dict, reference,
                 dtype) -> FieldKernel:
    """One field's side of the pass: its landmarks shifted to the kernel's origin, in the
    pass's dtype (as the single pass shifts them)."""
    origin = kernel_origin(landmarks, kernel, X)
    Z = np.asarray(landmarks, dtype=np.float64)
    if origin is not None:
        Z = Z - origin
    return FieldKernel(Z.astype(dtype), kernel, dict(params),
                       np.asarray(reference, np.float64), origin)


def compute_coupled_pass(X: da.Array, Y: da.Array, side_x: FieldKernel, side_y: FieldKernel,
                         dtype=np.float64, *, within: bool = True) -> CoupledStatistics:
    """Both fields' statistics and their cross sums, from one read of each; each field's G
    (m x m) only when ``within`` (a 0 x 0 array otherwise: MCA needs none).

    Examples
    --------
    >>> X = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> side = field_kernel(X, np.eye(2), "linear", {}, np.zeros(2), np.float64)
    >>> stats = compute_coupled_pass(X, X, side, side)
    >>> stats.n_samples, stats.cross.tolist() == stats.x.gram.tolist()
    (3, True)
    """
    def task(running, parts_x, parts_y, start, rows, landmarks, sides, plan):
        return dask.delayed(_add_block, pure=True)(
            running, start, *landmarks, *sides, dtype, plan.blas_threads, plan.block_bytes,
            within, len(parts_x), *parts_x, *parts_y)

    stats = _chained(X, Y, (side_x, side_y), _words(side_x, side_y, within), task,
                     merge_running, finish_statistics)
    raise_if_nonfinite(stats.x, "X")
    raise_if_nonfinite(stats.y, "Y")
    return stats


def compute_coupled_replicates(X: da.Array, Y: da.Array, side_x: FieldKernel,
                               side_y: FieldKernel, counts, dtype=np.float64, *,
                               within: bool = True) -> CoupledReplicateSums:
    """The coupled pass's sums for every bootstrap replicate (or fold) at once, in one read of
    each field; ``counts`` a :class:`~kpca_dask.blocks.replicate_counts.DrawnCounts`,
    :class:`~kpca_dask.blocks.replicate_counts.FoldCounts` or (B, n).

    Examples
    --------
    >>> from kpca_dask.blocks.replicate_counts import DrawnCounts
    >>> X = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> side = field_kernel(X, np.eye(2), "linear", {}, np.zeros(2), np.float64)
    >>> sums = compute_coupled_replicates(X, X, side, side, DrawnCounts(0, 4, 3))
    >>> sums.n_replicates, sums.cross.shape
    (4, (4, 2, 2))
    """
    made = isinstance(counts, (DrawnCounts, FoldCounts))  # counts each block makes its own
    n_replicates = counts.n_replicates if made else len(counts)
    add = partial(coupled_replicates_of_block, n_replicates=n_replicates, dtype=dtype,
                  within=within)

    def task(running, parts_x, parts_y, start, rows, landmarks, sides, plan):
        given = counts if made else np.ascontiguousarray(counts[:, start:start + rows])
        return dask.delayed(_add_replicates, pure=True)(
            add, running, start, given, *landmarks, *sides, plan.blas_threads,
            plan.block_bytes, len(parts_x), *parts_x, *parts_y)

    words = n_replicates * _words(side_x, side_y, within)
    sums = _chained(X, Y, (side_x, side_y), words, task, merge_running, finish_statistics)
    raise_if_nonfinite(sums.replicate(0).x, sums.nonfinite_field)
    return sums


#: The most rows of a block of whole chunks of both fields, in their largest chunks: past
#: it, Y is cut into X's blocks instead (and warned about).
COMMON_BLOCK_CHUNKS = 4


def row_groups(X: da.Array, Y: da.Array) -> tuple[da.Array, list[tuple[list, list]]]:
    """Y (cut into X's row blocks where the two chunkings rarely meet) and the pass's
    blocks: for each, the indices of the chunks of X and of Y it is made of.

    A block ends where a chunk of X and a chunk of Y both end, so each stored chunk is
    read by one task, inside it (:func:`~kpca_dask.engine.passes.nystrom.reads_inlined`),
    which adds them run by run (:func:`aligned_pieces`): Y cut into X's blocks instead
    makes a chunk of Y feed two tasks, read as a task of its own and ahead of the chains
    (measured: a worker held 94 MiB of chunks where its pass's model is 58). Where the
    chunkings meet only rarely (blocks of more than :data:`COMMON_BLOCK_CHUNKS` of the
    larger chunks), Y is cut into X's blocks, with a warning that says how to store it.

    Examples
    --------
    >>> X, Y = da.zeros((12, 2), chunks=(2, 2)), da.zeros((12, 1), chunks=(3, 1))
    >>> row_groups(X, Y)[1]
    [([0, 1, 2], [0, 1]), ([3, 4, 5], [2, 3])]
    """
    ends_x, ends_y = np.cumsum(X.chunks[0]).tolist(), np.cumsum(Y.chunks[0]).tolist()
    common = sorted(set(ends_x) & set(ends_y))
    largest = max(max(X.chunks[0]), max(Y.chunks[0]))
    if max(np.diff([0, *common])) > COMMON_BLOCK_CHUNKS * largest:
        warnings.warn(
            f"X and Y are stored in row chunks that rarely end together ({X.chunks[0][0]} and "
            f"{Y.chunks[0][0]} rows): Y is cut into X's blocks, and its chunks are read "
            "ahead of the pass. Store both fields with the same row chunks (e.g. "
            "Y.rechunk({0: X.chunks[0]}).to_zarr(...)).", PerformanceWarning, stacklevel=6)
        Y = Y.rechunk({0: X.chunks[0]})
        return Y, [([i], [i]) for i in range(len(X.chunks[0]))]
    groups, first_x, first_y = [], 0, 0
    for end in common:
        last_x, last_y = ends_x.index(end), ends_y.index(end)
        groups.append((list(range(first_x, last_x + 1)), list(range(first_y, last_y + 1))))
        first_x, first_y = last_x + 1, last_y + 1
    return Y, groups


def aligned_pieces(parts_x, parts_y):
    """``(offset, x, y)`` for each run of rows that lies in one chunk of X and one of Y, in
    order: a block's chunks cut where either field's end, never stacked, so a task holds its
    chunks and one chunk's worth of work at a time.

    Examples
    --------
    >>> x, y = [np.zeros((2, 1)), np.ones((2, 1))], [np.zeros((3, 1)), np.ones((1, 1))]
    >>> [(offset, len(a), len(b)) for offset, a, b in aligned_pieces(x, y)]
    [(0, 2, 2), (2, 1, 1), (3, 1, 1)]
    """
    starts = [np.concatenate([[0], np.cumsum([p.shape[0] for p in parts])]).astype(int)
              for parts in (parts_x, parts_y)]
    cuts = sorted(set(starts[0][1:].tolist()) | set(starts[1][1:].tolist()))
    begin, i, j = 0, 0, 0
    for end in cuts:
        while starts[0][i + 1] <= begin:
            i += 1
        while starts[1][j + 1] <= begin:
            j += 1
        x = parts_x[i][begin - starts[0][i]:end - starts[0][i]]
        y = parts_y[j][begin - starts[1][j]:end - starts[1][j]]
        yield begin, x, y
        begin = end


def _words(side_x: FieldKernel, side_y: FieldKernel, within: bool) -> int:
    """The float64 words of one chain's running sums."""
    m_x, m_y = len(side_x.reference), len(side_y.reference)
    return m_x * m_y + (m_x**2 + m_y**2 if within else 0)


def _chained(X, Y, sides, words: int, task, merge, finish):
    """Chains of tasks over blocks of whole chunks of X and of Y (:func:`row_groups`),
    merged pairwise and finished, computed on the plan's threads; each chunk read inside the
    task that adds it. ``task(running, parts_x, parts_y, start, rows, landmarks, sides,
    plan)`` makes one chain task (a Delayed) of a block from its chunks of each field."""
    X = one_feature_chunk(X, stacklevel=4)
    Y, groups = row_groups(X, one_feature_chunk(Y, "Y", stacklevel=4))
    plan = pass_plan(X, int(np.ceil(np.sqrt(words))))
    # The landmark arrays every task reads, shared once per graph (not copied into each
    # task); the sides travel without them.
    landmarks = shared_values(X, *(side.landmarks for side in sides))
    bare = [FieldKernel(None, s.kernel, s.params, s.reference, s.origin) for s in sides]
    blocks_x, blocks_y = X.to_delayed().ravel(), Y.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)

    def add_to(running, i: int):
        in_x, in_y = groups[i]
        start = int(starts[in_x[0]])
        return task(running, [blocks_x[j] for j in in_x], [blocks_y[j] for j in in_y], start,
                    int(starts[in_x[-1] + 1]) - start, landmarks, bare, plan)

    heads = chain_heads(len(groups), plan.chains, add_to)
    merge = dask.delayed(merge, pure=True)
    while len(heads) > 1:
        heads = [merge(*heads[i:i + 2]) for i in range(0, len(heads), 2)]
    # A block that is both fields' (Y given as X) stays a task: it is read once either way.
    reads = {b.key for b in blocks_x} ^ {b.key for b in blocks_y}
    result = reads_inlined(dask.delayed(finish, pure=True)(heads[0]), reads)
    with pass_threads(X, plan) as options:
        (out,) = dask.compute(result, **options)
    release_freed_memory()
    return out


def _with_landmarks(side: FieldKernel, landmarks) -> FieldKernel:
    return FieldKernel(landmarks, side.kernel, side.params, side.reference, side.origin)


def _add_block(running, row_offset, landmarks_x, landmarks_y, side_x: FieldKernel,
               side_y: FieldKernel, dtype, blas_threads, block_bytes, within, n_x, *parts):
    """One task of a chain: its chunks of X (the first ``n_x`` parts) and of Y added run by
    run (:func:`aligned_pieces`), the sides given their shared landmark arrays back."""
    sides = (_with_landmarks(side_x, landmarks_x), _with_landmarks(side_y, landmarks_y))
    for offset, x, y in aligned_pieces(parts[:n_x], parts[n_x:]):
        running = coupled_statistics_of_block(running, x, y, row_offset + offset, *sides,
                                              dtype, blas_threads, block_bytes, within)
    return running


def _add_replicates(add, running, row_offset, counts, landmarks_x, landmarks_y, side_x,
                    side_y, blas_threads, block_bytes, n_x, *parts):
    """One task of a replicate chain, as :func:`_add_block`; given counts are the block's."""
    sides = (_with_landmarks(side_x, landmarks_x), _with_landmarks(side_y, landmarks_y))
    made = isinstance(counts, (DrawnCounts, FoldCounts))
    for offset, x, y in aligned_pieces(parts[:n_x], parts[n_x:]):
        given = counts if made else counts[:, offset:offset + x.shape[0]]
        running = add(running, x, y, row_offset + offset, given, sides=sides,
                      blas_threads=blas_threads, block_bytes=block_bytes)
    return running
