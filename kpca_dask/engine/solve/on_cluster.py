"""The m x m work on a cluster's workers: the sums stay there, the solve runs there.

With a ``distributed`` client (docs/design.md §11) the pass's reduction ends
on a worker, and its m x m sums G stay on the cluster as a persisted dask
array, ``PassStatistics.gram``; only n, s, t and r (O(m)) reach the client,
and of the solve only the solution (O(m q): P, c, eigenvalues, ratios,
residuals, novelty terms). Two ways,
:func:`kpca_dask.engine.solve.landmark_memory.landmark_solve_mode` chooses:

- ``"worker"``: G is one chunk on one worker, and the whole small problem
  (:func:`kpca_dask.engine.solve.nystrom.solve_small_problem`) runs there as one task,
  in its 2.2 m^2 words;
- ``"tiles"``: G and K_mm are t x t tiles spread over the workers, reduced by
  :mod:`kpca_dask.engine.tiles.rows_pass` and solved by
  :mod:`kpca_dask.engine.tiles.solve` with ``dask.array.linalg``.

``"auto"`` (the default of dask's configuration key
``kpca-dask.landmark-solve``) takes ``"worker"`` while 2.2 m^2 words fit in
three quarters of the smallest worker's room (60 % of its memory_limit, less
its code), and ``"tiles"`` past that. With a local scheduler nothing
here is used: the statistics are numpy arrays in this process, as they
always were.

Statistics on the cluster add (more rows, merged shards) on the cluster:
:func:`added_statistics`, :func:`summed_statistics`.
"""

from __future__ import annotations

import dataclasses
import operator
from functools import reduce

import dask
import dask.array as da
import numpy as np

from ..._parallel import (
    compute_held,
    distributed_client,
    held_client,
    persist_held,
    persisted_on,
)
from ...blocks.statistics import PassStatistics, summed_features
from ..graph_values import shared_values
from ..passes.nystrom import pass_plan, pass_statistics, raise_if_nonfinite
from .landmark_memory import configured_solve_mode
from .nystrom import SmallProblem, solve_small_problem

__all__ = ["held_on_cluster",
           "is_held", "solve_statistics", "added_statistics", "summed_statistics",
           "client_of", "is_alive", "cluster_pass"]


def is_held(stats: PassStatistics | None) -> bool:
    """Whether the m x m sums of ``stats`` are a dask array (on a cluster, or in a file)."""
    return stats is not None and isinstance(stats.gram, da.Array)


def client_of(gram: da.Array):
    """The distributed client whose futures hold ``gram``, or None (not persisted)."""
    return held_client(gram)


def is_alive(gram: da.Array) -> bool:
    """Whether every tile of a held ``gram`` can still be read: its futures, or its file."""
    from distributed import futures_of

    futures = futures_of(gram)
    if not futures:
        return True  # read from a file when computed
    client = futures[0].client
    # "lost": its worker was lost and the scheduler computes it again from its recipe,
    # which it can always do here (what its tasks read is a task too, never scattered data:
    # engine.graph_values); the future stays "lost" until the new copy is in memory, and a
    # read waits for it. "pending": not computed yet. "cancelled" or "error": gone for good.
    return client.status == "running" and all(
        f.status in ("finished", "pending", "lost") for f in futures)


def cluster_pass(X, landmarks, kernel, params: dict, dtype, reference, mode: str
                 ) -> PassStatistics:
    """The pass over ``X`` with its sums left on the cluster: one chunk, or tiles."""
    if mode == "tiles":
        from ..tiles.rows_pass import tiled_pass  # noqa: PLC0415 - only clusters that need tiles

        return tiled_pass(X, landmarks, kernel, params, dtype, reference)
    statistics = pass_statistics(X, landmarks, kernel, params, dtype, reference,
                                 plan=pass_plan(X, len(landmarks)))
    return held_on_cluster(statistics, len(landmarks))


def held_on_cluster(statistics, n_landmarks: int) -> PassStatistics:
    """The pass's ``statistics`` (a Delayed) computed on the cluster, G left there.

    One run of the pass: G (one chunk, the very array the reduction made, not a
    copy) is persisted and the rest, O(m), is brought here. A NaN in the data or
    an overflowed kernel value raises here as it would with a local pass.
    """
    checked = dask.delayed(checked_statistics, pure=True)(statistics)
    gram = da.from_delayed(dask.delayed(gram_of, pure=True)(checked),
                           (n_landmarks, n_landmarks), np.float64,
                           meta=np.empty((0, 0), np.float64))
    summary = dask.delayed(summary_of, pure=True)(checked)
    # Not optimised: dask.array fuses the chain (finish, check, G) into a task of its own,
    # which repeats work the summary also does on sums added to in place: with it, a
    # 4000-row pass counted 6000 rows.
    client = distributed_client(statistics)
    gram, summary = persisted_on(client, gram, summary, optimize_graph=False)
    return dataclasses.replace(compute_held(summary), gram=gram)


def checked_statistics(stats: PassStatistics) -> PassStatistics:
    """The pass's statistics, or the error a NaN or an overflow makes (a task on a worker)."""
    raise_if_nonfinite(stats)
    return stats


def gram_of(stats: PassStatistics) -> np.ndarray:
    """G of the statistics: the array itself, so that the persisted chunk is no copy."""
    return stats.gram


def summary_of(stats: PassStatistics) -> PassStatistics:
    """The statistics without G: what the client keeps (O(m))."""
    return dataclasses.replace(stats, gram=None)


def solve_statistics(stats: PassStatistics, landmarks, kernel, params: dict, rcond: float,
                     n_components, remove_zero_eig: bool = False, *, pass_dtype=np.float64
                     ) -> SmallProblem:
    """The small problem of ``stats`` solved where G is: here, on a worker, or in tiles.

    Examples
    --------
    >>> from kpca_dask.engine.passes.nystrom import compute_pass
    >>> X = da.from_array(np.array([[0.0], [1.0], [2.0], [3.0]]), chunks=2)
    >>> params = {"gamma": 1.0, "degree": 1, "coef0": 1.0}
    >>> stats = compute_pass(X, X.compute(), "polynomial", params)
    >>> solve_statistics(stats, X.compute(), "polynomial", params, 1e-10, 1).method
    'dense'
    """
    if not is_held(stats):
        return solve_small_problem(stats, landmarks, kernel, params, rcond, n_components,
                                   remove_zero_eig, pass_dtype=pass_dtype)
    gram = stats.gram
    mode = configured_solve_mode()
    if gram.numblocks != (1, 1) and mode != "worker":
        from ..tiles.solve import solve_tiles  # noqa: PLC0415 - only clusters that need tiles

        return solve_tiles(stats, landmarks, kernel, params, rcond, n_components,
                           remove_zero_eig, pass_dtype=pass_dtype)
    if gram.numblocks != (1, 1):
        gram = gram.rechunk(-1)
    client = client_of(gram) or distributed_client(gram)
    (landmark_values,) = shared_values(gram, np.asarray(landmarks))
    task = dask.delayed(solve_on_worker, pure=True)(
        summary_of(stats), gram.to_delayed()[0, 0], landmark_values, kernel, params, rcond,
        n_components, remove_zero_eig, np.dtype(pass_dtype).name)
    if client is None:  # a file's G and a local scheduler: computed here
        return task.compute()
    return client.compute(task).result()


def solve_on_worker(summary: PassStatistics, gram: np.ndarray, landmarks, kernel, params,
                    rcond, n_components, remove_zero_eig, pass_dtype) -> SmallProblem:
    """The small problem as one task, on the worker that holds G (module docstring)."""
    stats = dataclasses.replace(summary, gram=gram)
    return solve_small_problem(stats, landmarks, kernel, params, rcond, n_components,
                               remove_zero_eig, pass_dtype=pass_dtype)


def added_statistics(batch: PassStatistics, total: PassStatistics) -> PassStatistics:
    """``total`` plus a fresh ``batch``, G added into the batch's (which nothing else reads).

    The result's G is held on the cluster when both are; when one of them is a numpy
    array here (a model fitted by a local scheduler), the other is brought here and the
    sum is a numpy array (:func:`summed_statistics`). The model's own ``total`` is left as
    it was.
    """
    if not (is_held(batch) and is_held(total)):
        return summed_statistics(batch, total)
    gram, other = batch.gram, total.gram.rechunk(batch.gram.chunks)
    if gram.numblocks == (1, 1):
        summed = da.map_blocks(added_into_first, gram, other, dtype=np.float64)
    else:  # tiles above the diagonal are views of those below: added to a copy
        summed = gram + other
    return _with_gram(batch, [total], persist_held(summed))


def summed_statistics(*parts: PassStatistics) -> PassStatistics:
    """The sum of statistics some of which are held on the cluster; none is changed.

    Held on the cluster when every part is. A part whose G is a numpy array here is
    never sent to the cluster as data without a recipe (docs/design.md §14), and a task
    holding it would give the scheduler an m x m copy: the held ones are brought here
    instead, where an m x m array is held already, and added.
    """
    grams = [part.gram for part in parts]
    if all(isinstance(gram, da.Array) for gram in grams):
        first = grams[0]
        summed = reduce(operator.add, [gram.rechunk(first.chunks) for gram in grams])
        return _with_gram(parts[0], parts[1:], persist_held(summed))
    here = [compute_held(gram) if isinstance(gram, da.Array) else np.asarray(gram)
            for gram in grams]
    return _with_gram(parts[0], parts[1:], reduce(operator.add, here))


def added_into_first(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``first += second`` in place, returned: a task given a chunk no other task reads."""
    first += second
    return first


def _with_gram(first: PassStatistics, others, gram: da.Array) -> PassStatistics:
    parts = [first, *others]
    bad_rows = [p.first_nonfinite_row for p in parts if p.first_nonfinite_row >= 0]
    return PassStatistics(
        n_samples=sum(p.n_samples for p in parts),
        column_sums=np.sum([p.column_sums for p in parts], axis=0),
        gram=gram,
        diagonal_sum=float(sum(p.diagonal_sum for p in parts)),
        n_nonfinite=sum(p.n_nonfinite for p in parts),
        first_nonfinite_row=min(bad_rows) if bad_rows else -1,
        reference=first.reference,
        feature_sums=reduce(summed_features, [p.feature_sums for p in parts],
                            np.zeros_like(first.feature_sums)
                            if first.feature_sums is not None else None))
