"""The pass reduced into tiles of G, for an m whose m x m sums no worker holds alone.

docs/design.md §11: when 2.2 m^2 float64 words exceed a worker's memory, G is
a dask array of t x t tiles spread over the workers. Landmarks are cut into T
ranges of t (the last shorter); the lower part of tile row I,

    G[I, :b_I] = sum_b D_b[:, I]^T D_b[:, :b_I],    b_I the end of range I,

is summed by chains of row blocks of its own (:func:`tile_row_of_block`: each
task makes the block's kernel rows against the landmarks up to b_I and adds
their products into a t x b_I float64 panel, :func:`add_tile_row`), then the
chains of a row are added pairwise, and the chains go longest first to the
least loaded worker thread (:func:`chain_places`). A tile row holds at most
t m words, never m^2. The tiles of G are views of the panels (above the
diagonal, transposed views), so G takes m^2 (1 + 1/T) / 2 words over the
cluster. s, n and t come with the last
tile row, whose landmarks are all of them.

Each row block is read once and its kernel values made T times, once per
tile row, in prefixes: (T + 1) / 2 times the kernel work of one full pass,
and the flops of one SYRK (n m^2: each diagonal tile by a rank-k update, the
rest by GEMMs); see docs/guide/sharded-landmarks.md for the whole cost.

:func:`tile_size` cuts t from a model of a worker's peak, apart from a pass
block's (:func:`tiles_peak_bytes`): the lower tiles of G, K_mm and its factor
on the worker that holds most (G's tile rows whole on the workers the pass
places them on, the others spread evenly), and beside them each thread's task (a tile row's
panel, its kernel block and its product; a factorisation task's few tiles),
within the room the workers measure (their limit's modelled peak less what
their code holds now, :attr:`kpca_dask._memory.MemoryBudget.measured_room`).
The largest tiles that fit, as few as there are at least 2 sqrt(workers) a
side: each tile is a task of every product and of the factorisation, so
fewer, larger tiles cost less scheduling and move fewer bytes.
"""

from __future__ import annotations

import dataclasses
import math

import dask
import dask.array as da
import numpy as np

from ..._memory import MemoryBudget, memory_budget
from ..._parallel import blas_limit, compute_held, distributed_client, persisted_on
from ...blocks.landmark_kernel import LandmarkKernel
from ...blocks.statistics import (
    PANEL_BYTES,
    PassStatistics,
    RunningStatistics,
    counted_rows,
    even_block_rows,
    kernel_origin,
    kernel_rows_into,
    merge_running,
)
from ...errors import InvalidParameterError
from ..graph_values import shared_values
from ..passes.nystrom import raise_if_nonfinite, row_offsets
from ..solve.landmark_factor import OVERFLOW_MESSAGE

__all__ = ["tiled_pass", "tile_size", "tiles_peak_bytes", "panel_loads", "chains_a_row",
           "tile_row_of_block",
           "tile_block_rows", "LEAST_TILE", "TILE_ARRAYS"]

#: Tiles smaller than this many landmarks make BLAS slow and the graphs large.
LEAST_TILE = 256

#: m x m arrays whose lower tiles the workers hold at once at most: G's panels, K_mm's
#: tiles and their factor's (K_mm's only until the factor has read them).
TILE_ARRAYS = 3

#: The fewest rows of a tile row's kernel block: GEMMs with fewer than ~2000 rows (their
#: inner dimension) run below BLAS's rate (bench/bench_syrk_rate.py).
TILE_BLOCK_ROWS = 2048


def tile_block_rows(t: int) -> int:
    """Rows of a tile row's kernel block: as many as the tile (its panel's product is as
    large), at least :data:`TILE_BLOCK_ROWS`.

    Examples
    --------
    >>> tile_block_rows(4000), tile_block_rows(300)
    (4000, 2048)
    """
    return max(TILE_BLOCK_ROWS, t)


def tiles_peak_bytes(n_landmarks: int, t: int, workers: int, threads: int) -> int:
    """A worker's modelled peak above its code with tiles of t (module docstring).

    The larger of the pass's (the panels of G the most loaded worker holds, placed as
    the pass places them, :func:`panel_loads`, and per thread a panel of t x m float64
    words, its kernel block of :func:`tile_block_rows` float32 rows and its product of at
    most ``PANEL_BYTES``) and the solve's (those panels, an even share of the lower tiles
    of the other :data:`TILE_ARRAYS` - 1 arrays, which dask spreads, and per thread four
    tiles).

    Examples
    --------
    >>> tiles_peak_bytes(16_000, 4000, 4, 1) / 2**30
    1.5...
    """
    m = n_landmarks
    T = -(-m // t)
    lower = 8 * t * t * T * (T + 1) / 2  # an array's lower tiles, the diagonal ones whole
    panels = max(panel_loads(m, t, workers, threads).values())
    pass_task = 8 * t * m + 4 * tile_block_rows(t) * m + PANEL_BYTES
    solve_task = 4 * 8 * t * t
    return int(max(panels + threads * pass_task,
                   panels + (TILE_ARRAYS - 1) * lower / max(1, workers) + threads * solve_task))


def chains_a_row(tile_rows: int, threads: int, blocks: int | None = None) -> int:
    """Chains each tile row's sums are cut into: the cluster's threads shared out over the
    tile rows, at least one, at most one a row block (``blocks``, when known).

    Examples
    --------
    >>> chains_a_row(3, 8), chains_a_row(3, 8, blocks=2), chains_a_row(10, 4)
    (2, 2, 1)
    """
    chains = threads // max(1, tile_rows)
    return max(1, chains if blocks is None else min(blocks, chains))


def panel_loads(n_landmarks: int, t: int, workers: int, threads: int) -> dict:
    """Bytes of G's panels on each worker, the tile rows placed as the pass places their
    chains (:func:`chain_places`, equal chains): a tile row's panel, its lower tiles,
    stays on the worker of its first chain.

    Examples
    --------
    >>> loads = panel_loads(4000, 1000, 2, 1)  # rows 3 and 0 (4 + 1 tiles), rows 2 and 1
    >>> sorted(value / 8e6 for value in loads.values())
    [5.0, 5.0]
    """
    m = max(1, n_landmarks)
    ranges = [(start, min(m, start + t)) for start in range(0, m, t)]
    slots = [str(worker) for worker in range(max(1, workers)) for _ in range(max(1, threads))]
    places = chain_places(ranges, [1] * chains_a_row(len(ranges), len(slots)), slots)
    loads = dict.fromkeys(slots, 0.0)
    for row, (start, stop) in enumerate(ranges):
        loads[places[row, 0]["workers"][0]] += 8.0 * (stop - start) * stop
    return loads


def tile_size(n_landmarks: int, budget: MemoryBudget) -> int:
    """t: the largest tile (the fewest a side, at least 2 sqrt(workers) and 2) whose
    modelled peak (:func:`tiles_peak_bytes`) fits the workers' measured room; the tiles
    of :data:`LEAST_TILE` when none does.

    Examples
    --------
    >>> budget = MemoryBudget(2**31, 1, True, "a worker", workers=4,
    ...                       measured_room_bytes=2**30)
    >>> tile_size(16_000, budget), tile_size(1500, budget)
    (2286, 375)
    """
    m = max(1, n_landmarks)
    per_side = max(2, math.ceil(2 * math.sqrt(budget.workers)))
    most = max(per_side, math.ceil(m / LEAST_TILE))
    for side in range(per_side, most + 1):
        t = math.ceil(m / side)
        if tiles_peak_bytes(m, t, budget.workers, budget.threads) <= budget.measured_room:
            return t
    return math.ceil(m / most)


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
    chains = chains_a_row(len(ranges), budget.workers * budget.threads, len(items))
    runs = np.array_split(np.arange(len(items)), chains)
    places = chain_places(ranges, [len(run) for run in runs], worker_threads(X))
    add = dask.delayed(tile_row_of_block, pure=True)
    merge = dask.delayed(merge_running, pure=True)
    panels = []
    for row, (start, stop) in enumerate(ranges):
        heads = []
        for number, run in enumerate(runs):
            running = None
            with dask.annotate(**places[row, number]):
                for i in run:
                    block, offset = items[i]
                    running = add(running, block, int(offset), shared[0], kernel, params,
                                  dtype, shared[1], shared[2], start, stop,
                                  tile_block_rows(t))
            heads.append(running)
        with dask.annotate(**places[row, 0]):
            while len(heads) > 1:
                heads = [merge(*heads[i:i + 2]) for i in range(0, len(heads), 2)]
            panels.append(dask.delayed(finished_panel, pure=True)(heads[0], start))
    rows = _panel_tiles(panels, ranges, places)
    summaries = [dask.delayed(panel_summary, pure=True)(panel) for panel in panels]
    # Not optimised, as in kpca_dask.engine.solve.on_cluster.held_on_cluster: the panels are
    # sums added to in place, and must be finished once.
    gram, *summaries = persisted_on(distributed_client(X), da.block(rows), *summaries,
                                    optimize_graph=False)
    # One round trip for the T summaries, not T.
    return _checked(compute_held(dask.delayed(list, pure=True)(summaries)), gram)


def _panel_tiles(panels: list, ranges: list[tuple[int, int]], places: dict) -> list:
    """G's tiles as rows of dask arrays: the lower ones views of their tile row's panel, the
    upper ones transposed views of their column's, each made where its panel is (a view
    made on another worker would copy the whole panel there)."""
    rows = []
    for i, (start, stop) in enumerate(ranges):
        row = []
        for j, (left, right) in enumerate(ranges):
            with dask.annotate(**places[max(i, j), 0]):
                tile = (dask.delayed(tile_of, pure=True)(panels[i], left, right, False)
                        if j <= i else
                        dask.delayed(tile_of, pure=True)(panels[j], start, stop, True))
                row.append(da.from_delayed(tile, (stop - start, right - left), np.float64,
                                           meta=np.empty((0, 0), np.float64)))
        rows.append(row)
    return rows


def worker_threads(X: da.Array) -> list[str]:
    """The address of each worker of the cluster that computes ``X``, once per thread."""
    client = distributed_client(X)
    if client is None:
        return []
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return [address for address, worker in sorted(workers.items())
            for _ in range(max(1, worker.get("nthreads", 1)))]


def chain_places(ranges: list[tuple[int, int]], lengths: list[int], threads: list[str]) -> dict:
    """Where each chain of the tiled pass runs: (tile row, chain) -> dask annotations.

    A tile row's chain costs its rows times (start + t / 2) t (the GEMM left of its
    diagonal tile and the tile's rank-k update), so the rows' costs grow from the
    first to the last; left to dask, which starts chains as threads come free, two
    costly rows can share a worker while another waits (1 s of 9 at m = 5000 on two
    workers). The chains go longest first to the thread with the least work so far
    (the LPT rule, within 4/3 of the best), each to its worker's address with
    ``allow_other_workers``: a hint, which a lost worker's chains do without.

    ``threads`` lists a worker's address once per thread (:func:`worker_threads`); empty,
    dask places every chain.

    Examples
    --------
    >>> places = chain_places([(0, 1), (1, 2), (2, 3)], [4], ["tcp://a", "tcp://b"])
    >>> [places[row, 0]["workers"] for row in range(3)]
    [['tcp://b'], ['tcp://b'], ['tcp://a']]
    >>> chain_places([(0, 2), (2, 4)], [3], [])
    {(0, 0): {}, (1, 0): {}}
    """
    chains = {(row, number): (stop - start) * (start + (stop - start) / 2) * length
              for row, (start, stop) in enumerate(ranges) for number, length in enumerate(lengths)}
    if not threads:
        return {chain: {} for chain in chains}
    load = dict.fromkeys(range(len(threads)), 0.0)
    places = {}
    for chain in sorted(chains, key=lambda chain: (-chains[chain], chain)):
        slot = min(load, key=lambda slot: (load[slot], slot))
        load[slot] += chains[chain]
        places[chain] = {"workers": [threads[slot]], "allow_other_workers": True}
    return places


def tile_row_of_block(running, block, row_offset, landmarks, kernel, params, dtype, reference,
                      origin, start, stop, block_rows):
    """Add one row block to tile row ``start:stop``'s panel G[start:stop, :stop] and return it.

    A task of a chain of the tiled pass (module docstring); ``running`` None
    starts the chain. The panel is a :class:`~kpca_dask.blocks.statistics.RunningStatistics`
    whose ``gram`` is (stop - start) x stop and whose column sums cover the
    landmarks up to ``stop``.
    """
    if running is None:
        running = RunningStatistics(np.asarray(reference[:stop], np.float64),
                                    np.zeros((stop - start, stop)), np.zeros(stop))
    # t only in the last tile row: the pass's n, s and t are read from its panel alone
    x = counted_rows(running, block, row_offset, kernel, params, origin, dtype,
                     totals=stop == len(landmarks))
    if x is None:
        return running
    rows = even_block_rows(x.shape[0], block_rows)
    buffer = np.empty((min(rows, x.shape[0]), stop), dtype)
    kernel_rows = LandmarkKernel(landmarks[:stop], kernel, params, dtype)
    shift = reference[:stop].astype(dtype, copy=False)
    with blas_limit(None):
        for first in range(0, x.shape[0], rows):
            D = kernel_rows_into(buffer[: min(rows, x.shape[0] - first)],
                                 x[first:first + rows], kernel_rows, shift, running.column_sums)
            add_tile_row(running.gram, D, start)
    return running


def add_tile_row(panel: np.ndarray, D: np.ndarray, start: int) -> None:
    """``panel += D[:, start:]^T D`` on the panel's lower part (its columns up to
    ``start + t`` and the diagonal tile's lower triangle), in the block's dtype.

    The diagonal tile by a rank-k update (numpy sends a product with its own transpose
    to BLAS ``syrk``), the columns left of it by GEMMs of at most ``PANEL_BYTES`` each,
    each added into the float64 panel at once: the flops of one SYRK of the block's
    kernel rows over all the tile rows (:func:`kpca_dask.blocks.statistics.add_gram`'s
    way).

    Examples
    --------
    >>> panel = np.zeros((1, 2))
    >>> add_tile_row(panel, np.array([[1.0, 2.0], [3.0, 4.0]]), 1)
    >>> panel.tolist()
    [[14.0, 20.0]]
    """
    own = D[:, start:]
    panel[:, start:] += own.T @ own
    width = max(64, PANEL_BYTES // (D.dtype.itemsize * max(1, own.shape[1])))
    for left in range(0, start, width):
        right = min(start, left + width)
        panel[:, left:right] += own.T @ D[:, left:right]


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
                          panel.n_nonfinite, panel.first_nonfinite_row, panel.reference,
                          panel.feature_sums)


def _checked(summaries: list[PassStatistics], gram: da.Array) -> PassStatistics:
    """The pass's statistics from the panels' summaries; a NaN or overflow raises here."""
    last = summaries[-1]  # its landmarks are all m: s and r whole
    raise_if_nonfinite(dataclasses.replace(last, gram=np.zeros((1, 1))))
    if not all(np.isfinite(summary.gram).all() for summary in summaries):
        raise InvalidParameterError(OVERFLOW_MESSAGE.format(where="X and the landmarks"))
    return dataclasses.replace(last, gram=gram)
