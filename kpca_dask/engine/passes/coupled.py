"""The dask graph of the coupled pass: one read of two fields that share their samples.

Each row block of x and the same rows of y go to one task
(:func:`kpca_dask.blocks.cross_sums.coupled_statistics_of_block`), which adds
both fields' own sums and their cross sums S_xy into the running sums of its
chain; chains and their pairwise merge are those of the single pass
(:mod:`kpca_dask.engine.passes.nystrom`), planned for the m_x^2 + m_y^2 +
m_x m_y words a chain holds (docs/design.md §20). y is cut into x's row
blocks first, so the two are read side by side whatever their stored chunks.
"""

from __future__ import annotations

from functools import partial

import dask
import dask.array as da
import numpy as np

from ..._memory import release_freed_memory
from ...blocks.coupled_replicates import CoupledReplicateSums, coupled_replicates_of_block
from ...blocks.cross_sums import (
    CoupledStatistics,
    FieldKernel,
    coupled_statistics_of_block,
    finish_coupled,
    merge_coupled,
)
from ...blocks.replicate_counts import DrawnCounts
from ...blocks.statistics import kernel_origin
from ...validation import one_feature_chunk
from ..graph_values import shared_values
from .nystrom import chain_heads, pass_plan, pass_threads, raise_if_nonfinite, reads_inlined

__all__ = ["compute_coupled_pass", "compute_coupled_replicates", "field_kernel"]


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
    def task(running, block_x, block_y, start, rows, landmarks, sides, plan):
        return dask.delayed(_add_block, pure=True)(
            running, block_x, block_y, start, *landmarks, *sides, dtype, plan.blas_threads,
            plan.block_bytes, within)

    stats = _chained(X, Y, (side_x, side_y), _words(side_x, side_y, within), task,
                     merge_coupled, finish_coupled)
    raise_if_nonfinite(stats.x, "X")
    raise_if_nonfinite(stats.y, "Y")
    return stats


def compute_coupled_replicates(X: da.Array, Y: da.Array, side_x: FieldKernel,
                               side_y: FieldKernel, counts, dtype=np.float64, *,
                               within: bool = True) -> CoupledReplicateSums:
    """The coupled pass's sums for every bootstrap replicate at once, in one read of each
    field; ``counts`` a :class:`~kpca_dask.blocks.replicate_counts.DrawnCounts` or (B, n).

    Examples
    --------
    >>> from kpca_dask.blocks.replicate_counts import DrawnCounts
    >>> X = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> side = field_kernel(X, np.eye(2), "linear", {}, np.zeros(2), np.float64)
    >>> sums = compute_coupled_replicates(X, X, side, side, DrawnCounts(0, 4, 3))
    >>> sums.n_replicates, sums.cross.shape
    (4, (4, 2, 2))
    """
    n_replicates = counts.n_replicates if isinstance(counts, DrawnCounts) else len(counts)
    add = partial(coupled_replicates_of_block, n_replicates=n_replicates, dtype=dtype,
                  within=within)

    def task(running, block_x, block_y, start, rows, landmarks, sides, plan):
        given = (counts if isinstance(counts, DrawnCounts)
                 else np.ascontiguousarray(counts[:, start:start + rows]))
        return dask.delayed(_add_replicates, pure=True)(
            add, running, block_x, block_y, start, given, *landmarks, *sides,
            plan.blas_threads, plan.block_bytes)

    words = n_replicates * _words(side_x, side_y, within)
    sums = _chained(X, Y, (side_x, side_y), words, task, _merge_replicates,
                    _finish_replicates)
    raise_if_nonfinite(sums.replicate(0).x, sums.nonfinite_field)
    return sums


def _words(side_x: FieldKernel, side_y: FieldKernel, within: bool) -> int:
    """The float64 words of one chain's running sums."""
    m_x, m_y = len(side_x.reference), len(side_y.reference)
    return m_x * m_y + (m_x**2 + m_y**2 if within else 0)


def _chained(X, Y, sides, words: int, task, merge, finish):
    """Chains of tasks over the row blocks of X and the same rows of Y, merged pairwise and
    finished, computed on the plan's threads; each block read inside the task that adds it.
    ``task(running, block_x, block_y, start, rows, landmarks, sides, plan)`` makes one
    chain task (a Delayed) of a row block."""
    X = one_feature_chunk(X, stacklevel=4)
    Y = one_feature_chunk(Y, "Y", stacklevel=4).rechunk({0: X.chunks[0]})
    plan = pass_plan(X, int(np.ceil(np.sqrt(words))))
    # The landmark arrays every task reads, shared once per graph (not copied into each
    # task); the sides travel without them.
    landmarks = shared_values(X, *(side.landmarks for side in sides))
    bare = [FieldKernel(None, s.kernel, s.params, s.reference, s.origin) for s in sides]
    blocks_x, blocks_y = X.to_delayed().ravel(), Y.to_delayed().ravel()
    offsets = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
    heads = chain_heads(len(blocks_x), plan.chains, lambda running, i: task(
        running, blocks_x[i], blocks_y[i], int(offsets[i]), int(X.chunks[0][i]), landmarks,
        bare, plan))
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


def _add_block(running, block_x, block_y, row_offset, landmarks_x, landmarks_y,
               side_x: FieldKernel, side_y: FieldKernel, dtype, blas_threads, block_bytes,
               within):
    """One task of a chain: the sides given their shared landmark arrays back."""
    return coupled_statistics_of_block(
        running, block_x, block_y, row_offset, _with_landmarks(side_x, landmarks_x),
        _with_landmarks(side_y, landmarks_y), dtype, blas_threads, block_bytes, within)


def _add_replicates(add, running, block_x, block_y, row_offset, counts, landmarks_x,
                    landmarks_y, side_x, side_y, blas_threads, block_bytes):
    """One task of a replicate chain: the sides given their shared landmark arrays back."""
    sides = (_with_landmarks(side_x, landmarks_x), _with_landmarks(side_y, landmarks_y))
    return add(running, block_x, block_y, row_offset, counts, sides=sides,
               blas_threads=blas_threads, block_bytes=block_bytes)


def _merge_replicates(*chains: CoupledReplicateSums) -> CoupledReplicateSums:
    for chain in chains[1:]:
        chains[0].add(chain)
    return chains[0]


def _finish_replicates(sums: CoupledReplicateSums) -> CoupledReplicateSums:
    return sums.finished()
