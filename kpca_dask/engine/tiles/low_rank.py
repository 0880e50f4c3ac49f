"""A landmark matrix of low numerical rank on tiles: one process's pivoted factor, by columns.

docs/design.md §11. When the tiled Cholesky of K_mm meets a pivot at or below the
cut-off tau, one process would take LAPACK's pivoted factorisation (``pstrf``) and keep
the r landmarks whose residual variance, given those kept before them, is above tau
(:mod:`kpca_dask.engine.solve.landmark_factor`). Smooth kernels on many landmarks are
like that: r = 354 of m = 5000 and 387 of 16 000 on uniform 32-d rows (rbf, gamma
0.01, float32 pass). The same factor is made here without K_mm: greedily, one column
at a time, each the kernel column of the landmark of largest residual variance less its
projection on the columns before (:func:`pivoted_by_columns`), in m r float64 words and
about m r^2 / 2 reads. The problem is then r x r: G on the kept landmarks, gathered from
the tiles, and the single process's solve (:func:`solve_low_rank`). The model is that of
one process to rounding, where the jitter of K_mm + tau I damped the directions within
tau and moved the eigenvalues by up to 1e-3; and it costs seconds where the tiled
factorisation and its inverse took 2 m^3 / 3 flops on the workers (68 s of a 188 s fit
at m = 16 000 on two one-thread workers).

Past :data:`LOW_RANK_SHARE` of m kept landmarks the columns would cost more than they
save, and the jittered tiled factorisation goes on as before.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._parallel import compute_held
from ...blocks.kernels import kernel_diagonal, pairwise_kernel
from ...blocks.statistics import PassStatistics
from ..solve.landmark_factor import NEGATIVE_MARGIN, LandmarkFactor
from ..solve.nystrom import NoveltyTerms, SmallProblem, solve_with_factor

__all__ = ["pivoted_by_columns", "solve_low_rank", "most_kept", "LOW_RANK_SHARE"]

#: The most landmarks kept by columns, as a share of m. The columns read about m r^2 / 2
#: words, 0.7 ns each (0.21 s at r = 354, m = 5000; 1.1 s at r = 387, m = 16 000), where
#: the tiled factorisation and its inverse take 2 m^3 / 3 flops at about 0.035 ns each on
#: two one-thread workers (2.9 s at m = 5000): so up to m / 8 the columns cost at most a
#: fifth to two fifths of what they save, and that much more when they give up.
LOW_RANK_SHARE = 1 / 8


def most_kept(m: int, room_bytes: int | None = None) -> int:
    """The most landmarks :func:`pivoted_by_columns` keeps before giving up: a share of m,
    and no more columns than half of ``room_bytes`` holds (the other half for the copy
    as their array grows and the r x r problem).

    Examples
    --------
    >>> most_kept(16_000), most_kept(100), most_kept(16_000, room_bytes=2**28)
    (2000, 12, 1048)
    """
    most = max(1, int(LOW_RANK_SHARE * m))
    if room_bytes is not None:
        most = min(most, max(1, room_bytes // (2 * 8 * max(m, 1))))
    return most


def pivoted_by_columns(landmarks, kernel, params: dict, cutoff: float, most: int
                       ) -> LandmarkFactor | None:
    """K_mm's pivoted Cholesky factor, as LAPACK's ``pstrf`` with ``tol=cutoff`` gives it,
    from one kernel column per kept landmark; None when more than ``most`` landmarks
    would be kept or a residual shows an indefinite kernel (module docstring).

    Examples
    --------
    >>> Z = np.array([[0.0], [1.0], [1.0]])  # the last two landmarks coincide
    >>> factor = pivoted_by_columns(Z, "rbf", {"gamma": 1.0}, 1e-10, 3)
    >>> factor.method, factor.rank, factor.kept.tolist()
    ('pivoted cholesky', 2, [0, 1])
    >>> pivoted_by_columns(Z, "rbf", {"gamma": 1.0}, 1e-10, 1) is None
    True
    """
    Z = np.asarray(landmarks, dtype=np.float64)
    m = Z.shape[0]
    residual = np.array(kernel_diagonal(Z, kernel, **params), dtype=np.float64)
    # Row j: the factor's column j over all landmarks. Grown by doubling, so that a low
    # rank holds m r words, not the m^2 / 8 of the most kept.
    columns = np.empty((min(most, m, 64), m))
    kept: list[int] = []
    while True:
        pivot = int(np.argmax(residual))  # the first of equals, as pstrf's MAXLOC
        if not residual[pivot] > cutoff:
            break
        if len(kept) == most:
            return None
        j = len(kept)
        if j == columns.shape[0]:
            grown = np.empty((min(most, m, 2 * j), m))
            grown[:j] = columns
            columns = grown
        column = np.array(pairwise_kernel(Z, Z[pivot:pivot + 1], kernel, **params)[:, 0],
                          dtype=np.float64)
        column -= columns[:j].T @ columns[:j, pivot]
        columns[j] = column / np.sqrt(column[pivot])
        residual -= columns[j] ** 2
        residual[pivot] = 0.0  # eliminated, not left to rounding
        kept.append(pivot)
    if residual.min(initial=0.0) < -NEGATIVE_MARGIN * cutoff:
        return None  # as one process's pstrf: not positive semi-definite
    order = np.array(kept, dtype=np.intp)
    lower = np.asfortranarray(np.tril(columns[:len(kept), order].T))
    identity = len(kept) == m and np.array_equal(order, np.arange(m))
    return LandmarkFactor(m, cutoff, "pivoted cholesky", lower=lower,
                          kept=None if identity else order)


def solve_low_rank(stats: PassStatistics, factor: LandmarkFactor, n_components,
                   remove_zero_eig: bool, pass_dtype) -> SmallProblem:
    """The small problem on the r kept landmarks of ``factor``, G's r x r block gathered
    from its tiles, solved here as one process solves it; P and W mu are zero on the
    landmarks left out, as there."""
    m = factor.size
    kept = np.arange(m) if factor.kept is None else factor.kept
    ascending = np.sort(kept)
    # Sorted indices cut each tile once; the block then takes the factor's order.
    block = compute_held(stats.gram[ascending][:, ascending])
    at = np.searchsorted(ascending, kept)
    restricted = dataclasses.replace(
        stats, gram=np.asfortranarray(block[np.ix_(at, at)]),
        column_sums=stats.column_sums[kept], reference=stats.reference[kept])
    lower = factor.lower

    def own() -> LandmarkFactor:  # the exact trace overwrites the factor it is given
        return LandmarkFactor(kept.size, factor.cutoff, factor.method,
                              lower=np.array(lower, order="F"))

    small = solve_with_factor(restricted, own(), n_components, remove_zero_eig, own,
                              pass_dtype=pass_dtype)
    projection = np.zeros((m, small.solution.projection.shape[1]))
    projection[kept] = small.solution.projection
    weights = np.zeros(m)
    weights[kept] = small.novelty.mean_weights
    return SmallProblem(
        dataclasses.replace(small.solution, projection=projection),
        NoveltyTerms(weights, small.novelty.mean_norm2), kept.size,
        f"tiles, {small.method}", factor.method)
