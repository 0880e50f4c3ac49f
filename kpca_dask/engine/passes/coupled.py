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

import dask
import dask.array as da
import numpy as np

from ..._memory import release_freed_memory
from ...blocks.cross_sums import (
    CoupledStatistics,
    FieldKernel,
    coupled_statistics_of_block,
    finish_coupled,
    merge_coupled,
)
from ...blocks.statistics import kernel_origin
from ...validation import one_feature_chunk
from ..graph_values import shared_values
from .nystrom import chain_heads, pass_plan, pass_threads, raise_if_nonfinite, reads_inlined

__all__ = ["compute_coupled_pass", "field_kernel"]


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
    X = one_feature_chunk(X, stacklevel=3)
    Y = one_feature_chunk(Y, stacklevel=3).rechunk({0: X.chunks[0]})
    m_x, m_y = len(side_x.reference), len(side_y.reference)
    words = m_x * m_y + (m_x**2 + m_y**2 if within else 0)
    plan = pass_plan(X, int(np.ceil(np.sqrt(words))))
    # The landmark arrays every task reads, shared once per graph (not copied into each task).
    shared = shared_values(X, side_x.landmarks, side_y.landmarks)
    # The sides travel without their landmarks, which each task is given as shared values.
    sides = [FieldKernel(None, s.kernel, s.params, s.reference, s.origin)
             for s in (side_x, side_y)]
    blocks_x, blocks_y = X.to_delayed().ravel(), Y.to_delayed().ravel()
    offsets = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(np.int64)
    add = dask.delayed(_add_block, pure=True)
    heads = chain_heads(len(blocks_x), plan.chains, lambda running, i: add(
        running, blocks_x[i], blocks_y[i], int(offsets[i]), *shared, sides[0], sides[1],
        dtype, plan.blas_threads, plan.block_bytes, within))
    merge = dask.delayed(merge_coupled, pure=True)
    while len(heads) > 1:
        heads = [merge(*heads[i:i + 2]) for i in range(0, len(heads), 2)]
    # A block that is both fields' (Y given as X) stays a task: it is read once either way.
    reads = {b.key for b in blocks_x} ^ {b.key for b in blocks_y}
    result = reads_inlined(dask.delayed(finish_coupled, pure=True)(heads[0]), reads)
    with pass_threads(X, plan) as options:
        (stats,) = dask.compute(result, **options)
    release_freed_memory()
    raise_if_nonfinite(stats.x, "X")
    raise_if_nonfinite(stats.y, "Y")
    return stats


def _add_block(running, block_x, block_y, row_offset, landmarks_x, landmarks_y,
               side_x: FieldKernel, side_y: FieldKernel, dtype, blas_threads, block_bytes,
               within):
    """One task of a chain: the sides given their shared landmark arrays back."""
    return coupled_statistics_of_block(
        running, block_x, block_y, row_offset,
        FieldKernel(landmarks_x, side_x.kernel, side_x.params, side_x.reference, side_x.origin),
        FieldKernel(landmarks_y, side_y.kernel, side_y.params, side_y.reference, side_y.origin),
        dtype, blas_threads, block_bytes, within)
