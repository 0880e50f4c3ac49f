"""A landmark matrix of low numerical rank on tiles: one process's pivoted factor, by columns.

docs/design.md §11. When the tiled Cholesky of K_mm meets a pivot at or below the
cut-off tau, one process would take LAPACK's pivoted factorisation (``pstrf``) and keep
the r landmarks whose residual variance, given those kept before them, is above tau
(:mod:`kpca_dask.engine.solve.landmark_factor`). Smooth kernels on many landmarks are
like that: r = 355 of m = 5000 and 387 of 16 000 on uniform 32-d rows (rbf, gamma
0.01, float32 pass). The same factor is made here without K_mm: greedily, one column
at a time, each the kernel column of the landmark of largest residual variance less its
projection on the columns before (:func:`pivoted_by_columns`), in m r float64 words and
about m r^2 / 2 reads. The problem is then r x r: G on the kept landmarks, gathered from
the tiles, and the single process's solve (:func:`solve_low_rank`), whose exact or
estimated trace follows one process's rule. The model is that of one process to
rounding, where the jitter of K_mm + tau I damped the directions within tau and moved
the eigenvalues by up to 1e-3; and it costs seconds where the tiled factorisation and
its inverse take 2 m^3 / 3 flops on the workers (bench/bench_large_m.py --cluster at
m = 16 000 on two one-thread workers: 94.2 s with the factor by columns, 204.8 s with
the tiled one).

Past :data:`LOW_RANK_SHARE` of m kept landmarks, or half the client's room, the columns
give up, and the jittered tiled factorisation goes on as before.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._parallel import compute_held
from ...blocks.kernels import kernel_diagonal, pairwise_kernel
from ...blocks.statistics import PassStatistics
from ...errors import InvalidParameterError
from ..solve.landmark_factor import NEGATIVE_MARGIN, OVERFLOW_MESSAGE, LandmarkFactor
from ..solve.nystrom import NoveltyTerms, SmallProblem, solve_with_factor

__all__ = ["pivoted_by_columns", "solve_low_rank", "landmark_block", "most_kept",
           "LOW_RANK_SHARE", "BLOCK"]

#: The most landmarks kept by columns, as a share of m. The columns read about m r^2 / 2
#: words of the factor, 0.7-0.9 ns each with the kernel columns (0.21 s at r = 355,
#: m = 5000; 1.1 s at r = 387, m = 16 000), and r m p of the landmarks, where the tiled
#: factorisation and its inverse take 2 m^3 / 3 flops at about 0.035 ns each on two
#: one-thread workers (2.9 s at m = 5000) after K_mm's m^2 p: so up to m / 8 the columns
#: cost about a quarter of what they save, and that much more when they give up.
LOW_RANK_SHARE = 1 / 8

#: Columns of the factor per array: the factor grows by these, with no copy, and holds
#: m r words rounded up to them.
BLOCK = 64


def most_kept(m: int, room_bytes: int | None = None) -> int:
    """The most landmarks :func:`pivoted_by_columns` keeps before giving up: a share of m,
    and no more columns than half of ``room_bytes`` holds (the other half for the r x r
    problem and its solve).

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
    diagonal = np.array(kernel_diagonal(Z, kernel, **params), dtype=np.float64)
    _raise_if_nonfinite(diagonal)
    # As pstrf: the sums of squares kept apart from the diagonal, and the candidates in
    # its swapped order, so that equal residuals (repeated landmarks) pick the same one.
    squares, order = np.zeros(m), np.arange(m)
    blocks: list[np.ndarray] = []  # the factor's columns over all landmarks, BLOCK at a time
    rank = 0
    while rank < m:
        at = rank + int(np.argmax(diagonal[order[rank:]] - squares[order[rank:]]))
        pivot = int(order[at])
        if not diagonal[pivot] - squares[pivot] > cutoff:
            break
        if rank == most:
            return None
        order[[rank, at]] = order[[at, rank]]
        column = landmark_block(Z, kernel, params, (0, m), (pivot, pivot + 1))[:, 0]
        _raise_if_nonfinite(column)
        for number, block in enumerate(blocks):
            done = min(BLOCK, rank - number * BLOCK)
            column -= block[:done].T @ block[:done, pivot]
        if rank % BLOCK == 0:
            blocks.append(np.empty((min(BLOCK, most - rank), m)))
        blocks[-1][rank % BLOCK] = column / np.sqrt(column[pivot])
        squares += blocks[-1][rank % BLOCK] ** 2
        rank += 1
    residual = diagonal - squares
    residual[order[:rank]] = 0.0  # eliminated
    if residual.min(initial=0.0) < -NEGATIVE_MARGIN * cutoff:
        return None  # as one process's pstrf: not positive semi-definite
    kept = order[:rank].copy()
    lower = np.zeros((rank, rank), order="F")
    for number, block in enumerate(blocks):
        done = min(BLOCK, rank - number * BLOCK)
        lower[:, number * BLOCK:number * BLOCK + done] = block[:done, kept].T
    lower[np.triu_indices(rank, 1)] = 0.0  # rounding of the eliminated landmarks' entries
    identity = rank == m and np.array_equal(kept, np.arange(m))
    return LandmarkFactor(m, cutoff, "pivoted cholesky", lower=lower,
                          kept=None if identity else kept)


def landmark_block(Z: np.ndarray, kernel, params: dict, rows: tuple[int, int],
                   columns: tuple[int, int]) -> np.ndarray:
    """K_mm[rows, columns] ((start, stop) each) in float64. Precomputed landmarks are rows
    ``[k(z, z_1), ..., k(z, z_m), k(z, z)]`` (:func:`kpca_dask.blocks.kernels.precomputed_block`):
    the block is read off them.

    Examples
    --------
    >>> Z = np.array([[0.0], [1.0], [2.0]])
    >>> landmark_block(Z, "linear", {}, (1, 3), (2, 3)).tolist()
    [[2.0], [4.0]]
    >>> K = np.array([[1.0, 0.5, 1.0], [0.5, 2.0, 2.0]])  # m = 2, then k(z, z)
    >>> landmark_block(K, "precomputed", {}, (0, 2), (1, 2)).tolist()
    [[0.5], [2.0]]
    """
    if isinstance(kernel, str) and kernel == "precomputed":
        return np.array(Z[rows[0]:rows[1], columns[0]:columns[1]], dtype=np.float64)
    return np.array(pairwise_kernel(Z[rows[0]:rows[1]], Z[columns[0]:columns[1]], kernel,
                                    **params), dtype=np.float64)


def _raise_if_nonfinite(values: np.ndarray) -> None:
    if not np.all(np.isfinite(values)):
        raise InvalidParameterError(OVERFLOW_MESSAGE.format(where="the landmarks"))


def solve_low_rank(stats: PassStatistics, factor: LandmarkFactor,
                   n_components: int | float, remove_zero_eig: bool,
                   pass_dtype: np.dtype | type) -> SmallProblem:
    """The small problem on the r kept landmarks of ``factor``, G's r x r block gathered
    from its tiles, solved here as one process solves it; P and W mu are zero on the
    landmarks left out, as there.

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask.engine.passes.nystrom import pass_statistics
    >>> X = np.array([[0.0], [1.0], [1.0], [3.0]])  # two landmarks coincide
    >>> stats = pass_statistics(da.from_array(X, chunks=2), X, "rbf", {"gamma": 1.0})
    >>> stats = stats.compute()
    >>> factor = pivoted_by_columns(X, "rbf", {"gamma": 1.0}, 1e-10, 4)
    >>> stats = dataclasses.replace(stats, gram=da.from_array(stats.gram, chunks=2))
    >>> small = solve_low_rank(stats, factor, 2, False, np.float64)
    >>> factor.kept.tolist(), small.method  # pstrf's order: landmark 1 is left out
    ([0, 3, 2], 'tiles, factor by columns, dense')
    >>> small.solution.projection[1].tolist()
    [0.0, 0.0]
    """
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
        f"tiles, factor by columns, {small.method}", factor.method)
