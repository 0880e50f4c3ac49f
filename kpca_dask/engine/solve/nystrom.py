"""The small problem of the Nyström method: from the pass statistics to the model.

The pass (:mod:`kpca_dask.engine.passes.nystrom`) returns, summed over the row blocks,

    n,  s = D^T 1,  G = D^T D,  t = sum_i k(x_i, x_i)

with B = k(X, Z) and D = B - 1 r^T (docs/design.md §2). With W W^T = K_mm^+
from one Cholesky factorisation (:mod:`kpca_dask.engine.solve.landmark_factor`):

    mu = W^T (s / n + r),   M = W^T S W,  S = G - s s^T / n   (the features' covariance)
    M = V diag(lambda) V^T,  y(x) = P^T k_m(x) - c,  P = W V_q,  c = V_q^T mu

Two ways to the leading eigenpairs of M (docs/design.md §11), chosen by cost:

- **dense**: M formed (LAPACK ``sygst``) and eigendecomposed; O(m^3) and a
  few m x m arrays, the cheaper way for small m (:data:`DENSE_RANK`), and the
  one way for ``n_components=None``, which asks for every eigenpair;
- **iterative**: M applied to blocks of vectors (two triangular solves and
  one symmetric product) by :func:`kpca_dask.engine.solve.eigensolver.leading_eigenpairs`,
  never formed: the factorisation is the only O(m^3) step and G and the
  factor the only m x m arrays.

The iterative way is given the dense way's cost as a budget of products
(the dense way's time at the products' measured rate,
:mod:`kpca_dask.engine.solve.handover`, at most :data:`DENSE_SOLVE_COLUMNS` r
columns): on a flat or clustered spectrum,
where it would converge a few percent a cycle, it stops after two or three
cycles and the dense way finishes, when its one more r x r array fits
(``method`` is then ``"dense after iterative"``). So the solve costs at most
about the dense one, whatever the spectrum (docs/design.md §11).

The residuals ``|M v - lambda v|`` of the pairs kept are the solution's
certificate. trace(M), which the explained-variance ratios and the trace error
need, is exact on the dense way; on the iterative way it is exact (2 m^3 / 3
more flops, through K_kk^{-1}) when that costs at most
:data:`EXACT_TRACE_SHARE` of the pass, and otherwise estimated with its
standard error (:func:`kpca_dask.engine.solve.eigensolver.estimate_trace`). A float
``n_components`` (a fraction of the variance) always takes the exact trace,
since how many components it keeps depends on it.

Maintenance note on the reference row r: the centred covariance does not
depend on r (S is the scatter matrix of the rows of B, which a common shift
leaves unchanged), but its rounding error does. Kernel values are dominated by
a common part (an rbf value is 1 - gamma d^2 + ... for small gamma d^2), so the
uncentred G = sum B^T B is ~n and S, its small difference, loses every digit
that W amplifies: with r = 0 the eigenvalues of an rbf fit with gamma = 1e-9
came out 85 % wrong (1e-7: 6e-5; 1e-5: 2e-9). Shifting by r = the mean
landmark kernel row K_mm 1 / m brought the same three cases to 2e-9, 3e-11 and
1e-13 of the exact eigenvalues: the shifted-data trick for variances.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.linalg import blas, lapack

from ..._memory import process_room_bytes
from ...blocks.signs import fix_signs
from ...blocks.statistics import PassStatistics, fill_upper
from ...errors import InsufficientMemoryError, InvalidParameterError
from .components import ZERO_EIGENVALUE_RTOL, n_components_for
from .eigensolver import estimate_trace, leading_eigenpairs
from .handover import TimedBudget, dense_seconds
from .landmark_factor import LandmarkFactor, every_eigenpair, factor_landmarks, solve_threads

__all__ = ["NystromSolution", "NoveltyTerms", "SmallProblem", "solve_small_problem",
           "solve_with_factor", "DENSE_RANK",
           "Spectrum", "solution_of", "centred_trace",
           "EXACT_TRACE_SHARE", "DENSE_SOLVE_COLUMNS", "dense_fits"]

#: At or below this many features (the factor's rank r) M is formed and
#: eigendecomposed: below it that is faster than the iterative way. At r = 2000 (2 cores,
#: AVX-512) the leading 4 or 10 pairs took 0.5-0.9 s the dense way against 0.7-2.8 s
#: iteratively; at r = 3000 the two were even (1.9-2.1 s), at r = 5000 the iterative way
#: took 4 s against 10.
DENSE_RANK = 2000

#: The iterative way computes trace(M) exactly when its 2 r^3 / 3 flops are at
#: most this share of the pass's n m^2 (float32 flops counted as half), and
#: estimates it otherwise.
EXACT_TRACE_SHARE = 0.15

#: An int n_components above this share of r takes the dense way.
DENSE_COMPONENT_SHARE = 0.25

#: The dense way's cost in columns the iterative way applies M to, per unit of r: M
#: formed (sygst, r^3 flops) and reduced to tridiagonal form (4 r^3 / 3, half of it
#: at the speed of matrix-vector products) against 4 r^2 flops per column. Measured at
#: r = 2000 on one thread: 460 columns in 1.1 s, the dense top 10 in 2.4 s (0.5 r).
DENSE_SOLVE_COLUMNS = 0.5

#: r x r float64 arrays the dense way holds beside G and the factor for the q leading
#: pairs: M (formed in one array, its upper triangle filled in place, then overwritten by
#: LAPACK's ``syevr``) and a margin; for every pair (``syevd``: the vectors, its workspace
#: and M V), four.
DENSE_WORDS, FULL_SPECTRUM_WORDS = 1.25, 4.0


@dataclass(frozen=True)
class NystromSolution:
    """The fitted projection y(x) = P^T k_m(x) - c and what certifies it."""

    projection: np.ndarray  # P = W V_q, (m, q)
    offset: np.ndarray  # c = V_q^T mu, (q,)
    eigenvalues: np.ndarray  # lambda_1..q of J K_nys J
    explained_variance_ratio: np.ndarray  # lambda_j / trace(M), (q,)
    trace_error: float  # (t - trace(W^T G W)) / t
    residuals: np.ndarray | None = None  # |M v_j - lambda_j v_j|, (q,); None in older files
    trace_error_std: float = 0.0  # standard error of trace_error (0: computed exactly)
    # trace(J K J) of the training rows, exact, where the pass knows it (the linear kernel:
    # t - |sum x|^2 / n); the ratios are then shares of it, not of trace(M)
    centred_trace: float | None = None


@dataclass(frozen=True)
class NoveltyTerms:
    """v = W mu and ``|mu|^2``: with the projection, all the novelty score needs.

    See docs/design.md §6.
    """

    mean_weights: np.ndarray  # v = W mu, (m,)
    mean_norm2: float  # |mu|^2


@dataclass(frozen=True)
class SmallProblem:
    """What :func:`solve_small_problem` returns: the solution, the novelty terms, the
    factor's rank and way, and how K_mm was factorised."""

    solution: NystromSolution
    novelty: NoveltyTerms
    landmark_rank: int
    method: str  # "dense", "iterative", "dense after iterative", "tiles", "tiles, <way>"
    # or "tiles, factor by columns, <way>" (kpca_dask.engine.tiles.low_rank)
    factor_method: str = "cholesky"  # LandmarkFactor.method: "eigen" for an indefinite K_mm


@dataclass(frozen=True)
class Spectrum:
    """Leading eigenpairs of M with P's candidate columns W V, and trace(M)."""

    values: np.ndarray
    columns: np.ndarray  # W V, (m, k): the projection's columns, signs not fixed
    vectors: np.ndarray  # V, (r, k)
    residuals: np.ndarray
    trace: float
    trace_std: float


def solve_small_problem(stats: PassStatistics, landmarks, kernel, params: dict, rcond: float,
                        n_components, remove_zero_eig: bool = False, *, pass_dtype=np.float64,
                        method: str = "auto", memory_bytes: int | None = None) -> SmallProblem:
    """The small problem, from the pass statistics to the model (module docstring).

    Components past the positive eigenvalues (an int ``n_components`` above
    their number, see :func:`n_components_for`) get eigenvalue 0 and a zero
    column of P and c, so their embedding column is 0, as in scikit-learn.
    ``method`` forces ``"dense"`` or ``"iterative"`` (then without the dense
    way's budget); ``memory_bytes`` is what the dense way may use beyond G and
    the factor (None: what this process may still take,
    :func:`kpca_dask._memory.process_room_bytes`).

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask.engine.passes.nystrom import pass_statistics
    >>> X = da.from_array(np.array([[0.0], [1.0], [2.0], [3.0]]), chunks=2)
    >>> params = {"gamma": 1.0, "degree": 1, "coef0": 1.0}  # polynomial of degree 1
    >>> stats = pass_statistics(X, X.compute(), "polynomial", params).compute()
    >>> small = solve_small_problem(stats, X.compute(), "polynomial", params, 1e-10, None)
    >>> small.solution.eigenvalues.round(6)
    array([5.])
    """
    if method not in ("auto", "dense", "iterative"):
        raise InvalidParameterError(
            f"method must be 'auto', 'dense' or 'iterative'; got {method!r}")
    return solve_with_factor(
        stats, factor_landmarks(landmarks, kernel, params, rcond), n_components,
        remove_zero_eig, rebuild=lambda: factor_landmarks(landmarks, kernel, params, rcond),
        pass_dtype=pass_dtype, method=method, memory_bytes=memory_bytes)


def solve_with_factor(stats: PassStatistics, factor: LandmarkFactor,
                      n_components: int | float | None, remove_zero_eig: bool,
                      rebuild: Callable[[], LandmarkFactor], *, pass_dtype=np.float64,
                      method: str = "auto", memory_bytes: int | None = None) -> SmallProblem:
    """:func:`solve_small_problem` given K_mm's factor; ``rebuild()`` makes it again (the
    exact trace spends it). The tiles' factor by columns comes here
    (:mod:`kpca_dask.engine.tiles.low_rank`).

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask.engine.passes.nystrom import pass_statistics
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> params = {"gamma": 1.0, "degree": 1, "coef0": 1.0}
    >>> stats = pass_statistics(da.from_array(X, chunks=2), X, "polynomial", params).compute()
    >>> factor = lambda: factor_landmarks(X, "polynomial", params, 1e-10)
    >>> solve_with_factor(stats, factor(), None, False, factor).solution.eigenvalues.round(6)
    array([5.])
    """
    n = stats.n_samples
    mean_feature = factor.whiten((stats.column_sums / n + stats.reference)[:, None])[:, 0]
    weights = factor.unwhiten(mean_feature[:, None])[:, 0]  # v = W mu (docs/design.md §6)
    dense = method == "dense" or (method == "auto" and _dense_is_cheaper(factor.rank,
                                                                         n_components))
    way = "dense"
    if dense:
        spectrum = _dense_spectrum(stats, factor, n_components, memory_bytes)
    else:
        exact = _exact_trace_is_cheap(n, factor.rank, pass_dtype)
        room = process_room_bytes() if memory_bytes is None else memory_bytes
        budget = (DENSE_SOLVE_COLUMNS * factor.rank
                  if method == "auto" and dense_fits(factor.rank, room) else None)
        spectrum, way = _iterative_spectrum(stats, factor, n_components, exact, rebuild,
                                            memory_bytes=memory_bytes, budget=budget)
    solution = solution_of(stats, spectrum, mean_feature, n_components, remove_zero_eig)
    return SmallProblem(solution, NoveltyTerms(weights, float(mean_feature @ mean_feature)),
                        factor.rank, way, factor.method)


def dense_fits(rank: int, memory_bytes: int | None, words: float = DENSE_WORDS) -> bool:
    """Whether the dense way's r x r arrays (``words`` of r^2: :data:`DENSE_WORDS` for the
    leading pairs) fit in ``memory_bytes``.

    Examples
    --------
    >>> dense_fits(5000, 2**30), dense_fits(20000, 2**30), dense_fits(20000, None)
    (True, False, True)
    """
    return memory_bytes is None or words * 8 * rank * rank <= memory_bytes


def _dense_is_cheaper(rank: int, n_components) -> bool:
    if rank <= DENSE_RANK or n_components is None:
        return True
    return isinstance(n_components, (int, np.integer)) and (
        n_components > DENSE_COMPONENT_SHARE * rank)


def _exact_trace_is_cheap(n: int, rank: int, pass_dtype) -> bool:
    half = 0.5 if np.dtype(pass_dtype) == np.float32 else 1.0
    return 2.0 * rank ** 3 / 3.0 <= EXACT_TRACE_SHARE * half * n * rank ** 2


def _scatter_product(stats: PassStatistics, U: np.ndarray) -> np.ndarray:
    """S U = G U - s (s^T U) / n for U of shape (m, b), reading G once.

    As (U^T G)^T, one GEMM with the few vectors on the left, which OpenBLAS streams G
    through faster than its ``symm``: at m = 16 000 and b = 20, 0.26 s against 0.47 on one
    thread, 0.16 s on two (Intel Xeon, SkylakeX kernels). G is whole and symmetric
    (:class:`~kpca_dask.blocks.statistics.PassStatistics`), so G^T = G. Threaded for the
    shapes shown safe (:func:`~kpca_dask.engine.solve.landmark_factor.solve_threads`).
    """
    G = stats.gram
    with solve_threads(G.shape[0], U.shape[1]):
        SU = (np.asarray(U, dtype=np.float64).T @ G).T
    s = stats.column_sums
    SU -= np.outer(s, s @ U) / stats.n_samples
    return SU


def _iterative_spectrum(stats, factor: LandmarkFactor, n_components, exact_trace: bool,
                        rebuild, memory_bytes, budget) -> tuple[Spectrum, str]:
    """The leading pairs by products, or (past ``budget``) the dense way; and which way."""
    if isinstance(n_components, float):
        return _spectrum_for_fraction(stats, factor, n_components, rebuild, memory_bytes,
                                      budget)
    apply, budget = _budgeted(_covariance_operator(stats, factor), factor.rank, budget)
    pairs = leading_eigenpairs(apply, factor.rank, min(int(n_components), factor.rank),
                               budget=budget)
    if not pairs.converged:
        return _dense_spectrum(stats, factor, n_components, memory_bytes), FALLBACK
    columns = factor.unwhiten(pairs.vectors)
    if exact_trace:
        trace, trace_std = _exact_trace(stats, factor), 0.0  # the factor is spent after this
    else:
        trace, trace_std = estimate_trace(apply, pairs)
    return (Spectrum(pairs.values, columns, pairs.vectors, pairs.residuals, trace, trace_std),
            "iterative")


#: The way of a solve that the iterative way handed to the dense one.
FALLBACK = "dense after iterative"


def _budgeted(apply, rank: int, columns: float | None):
    """``apply`` and the iterative way's budget: the dense way's time at the measured rate
    of the products, at most ``columns`` (:class:`~kpca_dask.engine.solve.handover.TimedBudget`);
    no budget where ``columns`` is None."""
    if columns is None:
        return apply, None
    budget = TimedBudget(apply, seconds=lambda: dense_seconds(rank), most=columns)
    return budget.apply, budget


def _covariance_operator(stats: PassStatistics, factor: LandmarkFactor):
    """V -> M V = W^T S W V: two triangular solves and one symmetric product."""
    return lambda V: factor.whiten(_scatter_product(stats, factor.unwhiten(V)))


def _spectrum_for_fraction(stats, factor, eta: float, rebuild, memory_bytes,
                           budget) -> tuple[Spectrum, str]:
    """Leading eigenpairs until their sum reaches ``eta`` of trace(M), doubling how many.

    How many components a fraction takes depends on trace(M), so it is exact
    here (K_kk^{-1}, then the factor once more); past
    :data:`DENSE_COMPONENT_SHARE` of r the dense way is the cheaper one.
    """
    trace = _exact_trace(stats, factor)
    factor = rebuild()  # the exact trace spent the factor
    apply, budget = _budgeted(_covariance_operator(stats, factor), factor.rank, budget)
    r, count, start = factor.rank, 16, None
    spent = 0
    while True:
        if count > DENSE_COMPONENT_SHARE * r:
            return _dense_spectrum(stats, factor, eta, memory_bytes), "dense"
        pairs = leading_eigenpairs(apply, r, count, start=start, budget=None if budget is None
                                   else lambda spent=spent: budget() - spent)
        spent += pairs.products
        if not pairs.converged:
            return _dense_spectrum(stats, factor, eta, memory_bytes), FALLBACK
        if np.sum(pairs.values) >= eta * trace:
            return Spectrum(pairs.values, factor.unwhiten(pairs.vectors), pairs.vectors,
                            pairs.residuals, trace, 0.0), "iterative"
        count, start = 2 * count, pairs.vectors


def _exact_trace(stats: PassStatistics, factor: LandmarkFactor) -> float:
    """trace(M) = <S_kk, K_kk^{-1}> from the inverse computed in place of the factor."""
    inverse = factor.inverse_gram()  # lower triangle of K_kk^{-1}; L is gone
    kept = np.arange(factor.size) if factor.kept is None else factor.kept
    s = stats.column_sums[kept]
    total, step = 0.0, max(1, 2**22 // max(kept.size, 1))
    for start in range(0, kept.size, step):
        cols = slice(start, min(kept.size, start + step))
        # Rows from the panel's first column down: K^{-1}'s lower triangle there.
        S = (stats.gram[np.ix_(kept[start:], kept[cols])]
             - np.outer(s[start:], s[cols]) / stats.n_samples)
        K = np.tril(inverse[start:, cols])  # the panel's top block is lower triangular
        product = S * K
        total += 2.0 * product.sum() - np.trace(product)
    return float(total)


def _dense_spectrum(stats, factor: LandmarkFactor, n_components, memory_bytes) -> Spectrum:
    r = factor.rank
    subset = _is_subset(n_components, r)
    words = DENSE_WORDS if subset else FULL_SPECTRUM_WORDS
    if not dense_fits(r, memory_bytes, words):
        raise InsufficientMemoryError(
            f"n_components={n_components!r} needs the eigenpairs of the {r} x {r} feature "
            f"covariance by a dense eigendecomposition that holds about "
            f"{words * 8 * r * r / 2**30:.1f} GiB beside the pass statistics, more than the "
            f"{memory_bytes / 2**30:.1f} GiB available. Ask for fewer components (an int), or "
            "fewer landmarks.")
    M = _formed(stats, factor)
    trace = float(np.trace(M))
    if subset:
        # M is overwritten (no second r x r array); the residuals come from the products.
        values, vectors = linalg.eigh(M, subset_by_index=[r - int(n_components), r - 1],
                                      overwrite_a=True)
        values, vectors = values[::-1], np.ascontiguousarray(vectors[:, ::-1])
        del M
        images = _covariance_operator(stats, factor)(vectors)
    else:
        values, vectors = every_eigenpair(M)
        values, vectors = values[::-1], vectors[:, ::-1]
        images = M @ vectors
    residuals = np.linalg.norm(images - vectors * values, axis=0)
    return Spectrum(values, factor.unwhiten(vectors), vectors, residuals, trace, 0.0)


def _is_subset(n_components, r: int) -> bool:
    """Whether the dense way needs only the leading q pairs (LAPACK finds them in a third
    of the time of the whole spectrum: 0.04 s against 0.13 s at r = 1000)."""
    return isinstance(n_components, (int, np.integer)) and 0 < n_components < r // 2


def _formed(stats: PassStatistics, factor: LandmarkFactor) -> np.ndarray:
    """M = W^T S W as an r x r array, symmetric to the last bit."""
    kept = factor.kept
    s = stats.column_sums if kept is None else stats.column_sums[kept]
    S = np.array(stats.gram if kept is None else stats.gram[np.ix_(kept, kept)], order="F")
    # S - s s^T / n on the lower triangle, which sygst reads: BLAS syr, no r x r temporary.
    S = blas.dsyr(-1.0 / stats.n_samples, s, lower=1, a=S, overwrite_a=1)
    if factor.lower is not None:
        # LAPACK's sygst: L^{-1} S L^{-T} in place, a third of two products' time.
        M, info = lapack.dsygst(S, factor.lower, itype=1, lower=1, overwrite_a=1)
        if info == 0:
            fill_upper(M)  # in place: M is the one r x r array the dense way adds
            return M
    fill_upper(S)
    W = factor.W if kept is None else factor.W[kept]
    M = W.T @ S @ W
    return 0.5 * (M + M.T)


def solution_of(stats: PassStatistics, spectrum: Spectrum, mean_feature, n_components,
              remove_zero_eig: bool) -> NystromSolution:
    n, lam = stats.n_samples, spectrum.values
    # M is a difference of terms of size trace(W^T G W) = trace(M) + n |mu|^2, so
    # that, not lambda_1, sets the rounding floor: a kernel constant to within
    # rounding (tiny gamma) must give no component, not one made of noise.
    feature_gram_trace = spectrum.trace + n * float(mean_feature @ mean_feature)
    zero_floor = ZERO_EIGENVALUE_RTOL * max(lam[0] if lam.size else 0.0, feature_gram_trace)
    n_positive = int(np.sum(lam > zero_floor)) if lam.size and lam[0] > 0 else 0
    q = n_components_for(n_components, lam, n_positive, spectrum.trace, remove_zero_eig, n)
    exact = centred_trace(stats)
    total = spectrum.trace if exact is None else exact  # what the ratios are shares of
    kept = min(q, n_positive)
    P = spectrum.columns[:, :kept]
    signs = fix_signs(P)  # deterministic: each column's largest entry positive
    offset = (spectrum.vectors[:, :kept] * signs).T @ mean_feature
    eigenvalues = np.zeros(q)
    eigenvalues[:kept] = lam[:kept]
    residuals = np.zeros(q)
    residuals[:kept] = spectrum.residuals[:kept]
    t = stats.diagonal_sum
    # t - trace(K_nys) >= 0 (K - K_nys is positive semi-definite), but the computed
    # difference carries the features' rounding, about eps / rcond of t (docs/design.md §2):
    # 5e-6 below zero at the default rcond on 200 000 rows of two shells. It reads as 0.
    trace_error = max(0.0, (t - feature_gram_trace) / t) if t > 0 else 0.0
    return NystromSolution(
        # C order, as a model file gives it back: the product with a kernel block then
        # runs the same BLAS kernel, so a loaded model transforms bit for bit the same.
        projection=np.ascontiguousarray(np.pad(P * signs, ((0, 0), (0, q - kept)))),
        offset=np.pad(offset, (0, q - kept)),
        eigenvalues=eigenvalues,
        explained_variance_ratio=eigenvalues / total if total > 0 else np.zeros(q),
        trace_error=trace_error,
        residuals=residuals,
        trace_error_std=spectrum.trace_std / t if t > 0 else 0.0,
        centred_trace=exact,
    )


def centred_trace(stats: PassStatistics) -> float | None:
    """``trace(J K J) = t - |sum_i x_i|^2 / n`` of a linear kernel's pass, which adds up the rows
    (None otherwise): the exact total of the variance fractions with any number of
    landmarks (docs/design.md §2). Never below 0 (rounding of rows all alike).

    Examples
    --------
    >>> from kpca_dask.blocks.statistics import PassStatistics
    >>> X = np.array([[1.0, 2.0], [3.0, 2.0]])
    >>> stats = PassStatistics(2, np.zeros(1), np.eye(1), float((X**2).sum()), 0, -1,
    ...                        np.zeros(1), X.sum(axis=0))
    >>> centred_trace(stats)  # |x_1 - mean|^2 + |x_2 - mean|^2
    2.0
    """
    if stats.feature_sums is None:
        return None
    sums = np.asarray(stats.feature_sums, dtype=np.float64)
    return max(0.0, stats.diagonal_sum - float(sums @ sums) / stats.n_samples)
