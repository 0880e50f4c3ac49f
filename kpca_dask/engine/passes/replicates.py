"""B bootstrap replicates of the pass in one read of the data, and their solves.

:func:`replicate_pass` is the pass of :mod:`kpca_dask.engine.passes.nystrom` with B
weighted sums per chain (:mod:`kpca_dask.blocks.replicate_statistics`): each
task reads its row block once, inside the task, and adds it to all B
replicates; the chains are added pairwise. A chain holds B m^2 float64 words,
so fewer chains run at once than in the fit's pass for the same m (the plan
of an m sqrt(B) pass: the same bytes). :func:`solve_replicates` solves each
replicate with the fit's landmarks, as a fit solves its sums
(docs/design.md §18).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np

from ..._memory import memory_budget, process_room_bytes
from ..._parallel import local_threads, single_blas_thread
from ...blocks.replicate_counts import DrawnCounts
from ...blocks.replicate_statistics import (
    ReplicateSums,
    replicate_statistics_of_block,
)
from ...blocks.statistics import finish_statistics, kernel_origin, merge_running
from ...errors import InsufficientMemoryError
from ...validation import one_feature_chunk
from ..graph_values import shared_values
from ..solve.landmark_factor import reference_row
from ..solve.nystrom import solve_small_problem
from .nystrom import pass_plan, pass_threads, raise_if_nonfinite, reads_inlined, row_offsets

__all__ = ["replicate_pass", "solve_replicates", "ReplicateSpectra", "check_replicate_memory"]


def replicate_pass(X: da.Array, landmarks: np.ndarray, kernel, params: dict, counts,
                   dtype=np.float64) -> ReplicateSums:
    """The B replicates' weighted sums of ``X``, computed in one read of every chunk.

    ``counts`` is a :class:`~kpca_dask.blocks.replicate_counts.DrawnCounts` or
    a (B, n) array of given counts.

    Examples
    --------
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(2, 2))
    >>> sums = replicate_pass(X, X.compute(), "linear", {}, np.ones((3, 4), np.int64))
    >>> sums.gram.shape, sums.n_samples
    ((3, 4, 4), 4)
    """
    X = one_feature_chunk(X, stacklevel=3)
    n_replicates = (counts.n_replicates if isinstance(counts, DrawnCounts)
                    else int(counts.shape[0]))
    m = len(landmarks)
    # A chain's accumulator is B m^2 words: the plan of a pass with m sqrt(B) landmarks.
    plan = pass_plan(X, int(math.ceil(m * math.sqrt(n_replicates))))
    reference = reference_row(landmarks, kernel, params)
    origin = kernel_origin(landmarks, kernel, X)
    Z = np.asarray(landmarks, dtype=np.float64)
    if origin is not None:
        Z = Z - origin
    shared = shared_values(X, Z.astype(dtype), reference, origin)
    blocks, offsets = X.to_delayed().ravel(), row_offsets(X)
    add = dask.delayed(replicate_statistics_of_block, pure=True)
    heads = []
    for run in np.array_split(np.arange(len(blocks)), min(plan.chains, len(blocks))):
        running = None
        for i in run:
            start, rows = int(offsets[i]), int(X.chunks[0][i])
            given = (counts if isinstance(counts, DrawnCounts)
                     else np.ascontiguousarray(counts[:, start:start + rows]))
            running = add(running, blocks[i], start, given, n_replicates, shared[0], kernel,
                          params, dtype, shared[1], shared[2], plan.blas_threads,
                          plan.block_bytes)
        heads.append(running)
    merge = dask.delayed(merge_running, pure=True)
    while len(heads) > 1:
        heads = [merge(*heads[i:i + 2]) for i in range(0, len(heads), 2)]
    result = reads_inlined(dask.delayed(finish_statistics, pure=True)(heads[0]),
                           {block.key for block in blocks})
    with pass_threads(X, plan) as options:
        (sums,) = dask.compute(result, **options)
    raise_if_nonfinite(sums.replicate(0))
    return sums


@dataclass(frozen=True)
class ReplicateSpectra:
    """Each replicate's leading eigenvalues, their ratios, trace and projection."""

    eigenvalues: np.ndarray  # (B, k + 1): one more than asked, for the significance rule
    ratios: np.ndarray  # (B, k + 1), lambda / trace(M_b)
    traces: np.ndarray  # (B,), trace(M_b)
    projections: np.ndarray  # P_b = W V_b, (B, m, k)
    offsets: np.ndarray  # c_b, (B, k)


def solve_replicates(sums: ReplicateSums, landmarks, kernel, params: dict, rcond: float,
                     n_modes: int, dtype=np.float64) -> ReplicateSpectra:
    """Each replicate's small problem with the fit's landmarks, ``n_modes + 1`` pairs of it.

    Examples
    --------
    >>> X = da.from_array(np.random.default_rng(0).normal(size=(20, 3)), chunks=10)
    >>> Z = X.compute()
    >>> sums = replicate_pass(X, Z, "linear", {}, DrawnCounts(0, 2, 20))
    >>> solve_replicates(sums, Z, "linear", {}, 1e-10, 2).projections.shape
    (2, 20, 2)
    """
    n_replicates = sums.gram.shape[0]
    values = np.zeros((n_replicates, n_modes + 1))
    ratios = np.zeros_like(values)
    traces = np.zeros(n_replicates)
    projections = np.zeros((n_replicates, len(landmarks), n_modes))
    offsets = np.zeros((n_replicates, n_modes))

    def solve(b: int):
        # Pairs of eigenvalue 0 (a replicate spans fewer directions than k + 1) are
        # left out, and read as 0 below: the k + 1-th is asked for the rule alone.
        return solve_small_problem(sums.replicate(b), landmarks, kernel, params, rcond,
                                   n_modes + 1, remove_zero_eig=True,
                                   pass_dtype=dtype).solution

    # The replicates side by side, one BLAS thread each: a solve of a few hundred
    # landmarks loses more to BLAS threads waking than it gains (measured: m = 200,
    # 0.26 s a replicate with numpy's threads spinning beside LAPACK's).
    with single_blas_thread(), ThreadPoolExecutor(local_threads()) as pool:
        solutions = list(pool.map(solve, range(n_replicates)))
    for b, solution in enumerate(solutions):
        q = min(solution.eigenvalues.size, n_modes + 1)
        values[b, :q] = solution.eigenvalues[:q]
        ratios[b, :q] = solution.explained_variance_ratio[:q]
        positive = solution.explained_variance_ratio > 0
        traces[b] = (solution.eigenvalues[positive][0] / solution.explained_variance_ratio[
            positive][0]) if positive.any() else 0.0
        k = min(q, n_modes)
        projections[b, :, :k] = solution.projection[:, :k]
        offsets[b, :k] = solution.offset[:k]
    return ReplicateSpectra(values, ratios, traces, projections, offsets)


def check_replicate_memory(rows, n_replicates: int, m: int, word_bytes: int = 8,
                           what: str = "replicates") -> int:
    """The bytes of ``n_replicates`` replicates' (or folds') m x m sums of ``word_bytes``
    words, or InsufficientMemoryError (before any read) where they do not fit this process,
    or a merge of two of them half a process of the pass.

    Examples
    --------
    >>> check_replicate_memory(da.zeros((10, 2)), 4, 10)
    3552
    """
    need = word_bytes * n_replicates * (m * m + m + 1)
    budget = memory_budget(rows)
    for room, where in ((process_room_bytes(), "this process has free"),
                        (budget.process_bytes // 2, f"half {budget.where}")):
        if need > room:
            raise InsufficientMemoryError(
                f"{n_replicates} {what} of {m} landmarks hold {need / 2**30:.2f} GiB of "
                f"sums ({word_bytes} B m^2 bytes), more than the {room / 2**30:.2f} GiB "
                f"{where}. Ask for fewer replicates, or bootstrap in several calls with "
                "different seeds.")
    return need
