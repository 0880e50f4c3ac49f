"""The pass reduced into tiles of G, for an m whose m x m sums no worker holds alone.

docs/design.md §11: when 2.2 m^2 float64 words exceed a worker's memory, G is
a dask array of t x t tiles spread over the workers. Landmarks are cut into T
ranges of t (the last shorter); the lower part of tile row I,

    G[I, :b_I] = sum_b D_b[:, I]^T D_b[:, :b_I],    b_I the end of range I,

is summed by chains of row blocks of its own (:func:`tile_row_of_block`: each
task makes the block's kernel rows against the landmarks up to b_I and adds
one GEMM into a t x b_I float64 panel), then the chains of a row are added
pairwise. A tile row holds at most t m words, never m^2. The tiles of G are
views of the panels (above the diagonal, transposed views), so G takes
m^2 (1 + 1/T) / 2 words over the cluster. s, n and t come with the last
tile row, whose landmarks are all of them.

Each row block is read once and its kernel values made T times, once per
tile row, in prefixes: (T + 1) / 2 times the kernel work of one full pass,
and about the same GEMM flops as one SYRK (n m^2 (1 + 1/T)); see
docs/guide/sharded-landmarks.md for the whole cost.

:func:`tile_size` cuts t from the workers' memory: a pass task's panel and
its product (2 t m words) and a factorisation task (about (m + t) t words)
stay within a quarter of a worker thread's share.
"""

from __future__ import annotations

import dataclasses
import math

import dask
import dask.array as da
import numpy as np

from .._memory import MemoryBudget, memory_budget
from .._parallel import blas_limit, compute_held, distributed_client, persisted_on
from ..blocks.kernels import kernel_diagonal
from ..blocks.landmark_kernel import LandmarkKernel
from ..blocks.sparse_rows import as_block, first_nonfinite
from ..blocks.statistics import (
    PassStatistics,
    RunningStatistics,
    even_block_rows,
    kernel_block_rows,
    kernel_origin,
    kernel_rows_into,
    merge_running,
    shifted_to_origin,
)
from ..errors import InvalidParameterError
from .graph_values import shared_values
from .landmark_factor import OVERFLOW_MESSAGE
from .passes import raise_if_nonfinite, row_offsets

__all__ = ["tiled_pass", "tile_size", "tile_row_of_block", "TASK_SHARE", "LEAST_TILE"]

#: The share of a worker thread's memory one task of the tiled pass or solve may hold.
TASK_SHARE = 0.25

#: Tiles smaller than this many landmarks make BLAS slow and the graphs large.
LEAST_TILE = 256


def tile_size(n_landmarks: int, budget: MemoryBudget) -> int:
    """t: the largest tile whose tasks fit :data:`TASK_SHARE` of a worker thread's memory,
    and small enough that there are at least 2 sqrt(workers) tiles a side (at least 2).

    Examples
    --------
    >>> budget = MemoryBudget(2**31, 1, True, "a worker", None, 2**30, workers=4)
    >>> tile_size(16_000, budget), tile_size(1500, budget)
    (1048, 375)
    """
    room = budget.process_bytes if budget.sizing_bytes is None else budget.sizing_bytes
    share = TASK_SHARE * room / max(1, budget.threads)
    m = max(1, n_landmarks)
    by_memory = int(share // (8 * 2 * m))  # a panel and its GEMM's product: 2 t m words
    per_side = max(2, math.ceil(2 * math.sqrt(budget.workers)))
    return max(1, min(max(by_memory, LEAST_TILE), math.ceil(m / per_side)))


def tiled_pass(X: da.Array, landmarks: np.ndarray, kernel, params: dict, dtype,
               reference: np.ndarray) -> PassStatistics:
    """The pass over ``X`` with G left on the cluster as tiles (module docstring)."""
    if X.numblocks[1] != 1:
        # The tiles' block function takes whole rows; the kernel terms summed over feature
        # chunks (docs/design.md §12) feed one m x m accumulator, not tile rows.
        raise InvalidParameterError(
            f"The landmark problem of m = {len(landmarks)} is solved as tiles over the workers "
            f"(2.2 m^2 words outgrow one), which needs whole rows, but X has "
            f"{X.numblocks[1]} chunks along its features. Rechunk it to whole rows if a row "
            "block fits a task (X.rechunk({1: -1}); a DataArray: X.chunk() with -1 for each "
            "feature dimension), or use fewer landmarks so that one worker holds the problem "
            "(dask config 'kpca-dask.landmark-solve': 'worker').")
    m = len(landmarks)
    budget = memory_budget(X)
    t = tile_size(m, budget)
    ranges = [(start, min(m, start + t)) for start in range(0, m, t)]
    origin = kernel_origin(landmarks, kernel, X)
    Z = np.asarray(landmarks, dtype=np.float64)
    Z = Z if origin is None else Z - origin
    shared = shared_values(X, Z.astype(dtype), np.asarray(reference, np.float64), origin)
    items = list(zip(X.to_delayed().ravel(), row_offsets(X)))
    chains = max(1, min(len(items), budget.workers * budget.threads // len(ranges)))
    add = dask.delayed(tile_row_of_block, pure=True)
    merge = dask.delayed(merge_running, pure=True)
    panels = []
    for start, stop in ranges:
        heads = []
        for run in np.array_split(np.arange(len(items)), chains):
            running = None
            for i in run:
                block, offset = items[i]
                running = add(running, block, int(offset), shared[0], kernel, params, dtype,
                              shared[1], shared[2], start, stop, budget.block_bytes)
            heads.append(running)
        while len(heads) > 1:
            heads = [merge(*heads[i:i + 2]) for i in range(0, len(heads), 2)]
        panels.append(dask.delayed(finished_panel, pure=True)(heads[0], start))
    rows = []
    for i, (start, stop) in enumerate(ranges):
        row = []
        for j, (left, right) in enumerate(ranges):
            tile = (dask.delayed(tile_of, pure=True)(panels[i], left, right, False) if j <= i
                    else dask.delayed(tile_of, pure=True)(panels[j], start, stop, True))
            row.append(da.from_delayed(tile, (stop - start, right - left), np.float64,
                                       meta=np.empty((0, 0), np.float64)))
        rows.append(row)
    summaries = [dask.delayed(panel_summary, pure=True)(panel) for panel in panels]
    # Not optimised, as in kpca_dask.engine.cluster_solve.held_on_cluster: the panels are
    # sums added to in place, and must be finished once.
    gram, *summaries = persisted_on(distributed_client(X), da.block(rows), *summaries,
                                    optimize_graph=False)
    return _checked([compute_held(summary) for summary in summaries], gram)


def tile_row_of_block(running, block, row_offset, landmarks, kernel, params, dtype, reference,
                      origin, start, stop, block_bytes):
    """Add one row block to tile row ``start:stop``'s panel G[start:stop, :stop] and return it.

    A task of a chain of the tiled pass (module docstring); ``running`` None
    starts the chain. The panel is a :class:`~kpca_dask.blocks.statistics.RunningStatistics`
    whose ``gram`` is (stop - start) x stop and whose column sums cover the
    landmarks up to ``stop``.
    """
    if running is None:
        running = RunningStatistics(np.asarray(reference[:stop], np.float64),
                                    np.zeros((stop - start, stop)), np.zeros(stop))
    x = as_block(block)
    running.n_samples += x.shape[0]
    n_bad, first_bad = first_nonfinite(x)
    if n_bad:
        return running.count_nonfinite(n_bad, int(row_offset + first_bad))
    x = shifted_to_origin(x, origin).astype(dtype, copy=False)
    rows = even_block_rows(x.shape[0], kernel_block_rows(stop, np.dtype(dtype).itemsize,
                                                         block_bytes))
    buffer = np.empty((min(rows, x.shape[0]), stop), dtype)
    kernel_rows = LandmarkKernel(landmarks[:stop], kernel, params, dtype)
    shift = reference[:stop].astype(dtype, copy=False)
    with blas_limit(None):
        for first in range(0, x.shape[0], rows):
            D = kernel_rows_into(buffer[: min(rows, x.shape[0] - first)],
                                 x[first:first + rows], kernel_rows, shift, running.column_sums)
            # One GEMM in the block's dtype, added into the float64 panel (as the
            # one-chunk pass adds its SYRK's panels).
            running.gram += D[:, start:stop].T @ D
    running.diagonal_sum += float(kernel_diagonal(x, kernel, **params).sum(dtype=np.float64))
    return running


def finished_panel(running: RunningStatistics, start: int) -> RunningStatistics:
    """The panel's diagonal tile made symmetric (its lower triangle mirrored), in place."""
    t = running.gram.shape[0]
    block = running.gram[:, start:start + t]
    block[...] = np.tril(block) + np.tril(block, -1).T
    return running


def tile_of(panel: RunningStatistics, left: int, right: int, transposed: bool) -> np.ndarray:
    """Columns ``left:right`` of a panel, a view (transposed for a tile above the diagonal)."""
    tile = panel.gram[:, left:right]
    return tile.T if transposed else tile


def panel_summary(panel: RunningStatistics) -> PassStatistics:
    """A panel's n, s, t and counts, with a 1 x 1 G that is NaN if the panel is not finite."""
    finite = bool(np.isfinite(panel.gram.sum(axis=0)).all())
    return PassStatistics(panel.n_samples, panel.column_sums,
                          np.full((1, 1), 0.0 if finite else np.nan), panel.diagonal_sum,
                          panel.n_nonfinite, panel.first_nonfinite_row, panel.reference)


def _checked(summaries: list[PassStatistics], gram: da.Array) -> PassStatistics:
    """The pass's statistics from the panels' summaries; a NaN or overflow raises here."""
    last = summaries[-1]  # its landmarks are all m: s and r whole
    raise_if_nonfinite(dataclasses.replace(last, gram=np.zeros((1, 1))))
    if not all(np.isfinite(summary.gram).all() for summary in summaries):
        raise InvalidParameterError(OVERFLOW_MESSAGE.format(where="X and the landmarks"))
    return dataclasses.replace(last, gram=gram)
