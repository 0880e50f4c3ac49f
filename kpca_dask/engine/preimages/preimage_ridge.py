"""The pre-image map's ridge regression, its intercept and its alpha (docs/design.md §6).

The pre-image pass (:func:`~kpca_dask.engine.preimages.reconstruction.preimage_statistics`)
sums, over the n training rows, the features g_i = g(y_i) (r) and the rows
x_i (p), both shifted by a reference (g_0, x_0) close to their means so that
centring them later loses no digits::

    H' = sum (g_i - g_0)(g_i - g_0)^T    R' = sum (g_i - g_0)(x_i - x_0)^T
    s_g = sum (g_i - g_0)                s_x = sum (x_i - x_0)
    T = sum |x_i - x_0|^2

The regression has an unpenalised intercept (the fit's mean), so it works on
the centred sums ``H_c = H' - s_g s_g^T / n``, ``R_c = R' - s_g s_x^T / n`` and
``S = T - |s_x|^2 / n = sum |x_i - x_bar|^2``. With H_c = V diag(d) V^T and
C = V^T R_c (rows C_k), for any alpha::

    B = V diag(1 / (d + alpha)) C,    x_hat(y) = x_bar + B^T (g(y) - g_bar)
    RSS(alpha) = S_perp + sum_k |C_k|^2 alpha^2 / (d_k (d_k + alpha)^2)
    df(alpha) = 1 + sum_k d_k / (d_k + alpha)
    GCV(alpha) = n RSS(alpha) / (n - df(alpha))^2

``S_perp = S - sum_k |C_k|^2 / d_k`` is the least-squares residual (alpha = 0).
Maintenance note: this form of RSS equals
``S - sum |C_k|^2 (d_k + 2 alpha) / (d_k + alpha)^2`` (docs/design.md §15) but
adds positive terms instead of subtracting nearly equal ones, and n - df is
summed as (n - 1 - r) + sum alpha / (d_k + alpha) for the same reason: at small
alpha both are differences of large numbers otherwise. Each alpha then costs
O(r), so :func:`choose_alpha` scores a log grid and refines the best point
without reading the data again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from ...errors import InvalidParameterError

__all__ = ["CentredRidge", "RidgeSolution", "centred_ridge", "gcv_score", "choose_alpha",
           "solve_ridge"]

#: The grid of :func:`choose_alpha`: alpha / d_max from 1e-12 to 1e2, four points a decade.
_GRID_DECADES, _GRID_STEP = (-12.0, 2.0), 0.25


@dataclass(frozen=True)
class CentredRidge:
    """The centred pre-image regression in the eigenbasis of H_c (sizes r and r x p)."""

    n_samples: int
    feature_mean: np.ndarray  # g_bar, (r,)
    target_mean: np.ndarray  # x_bar, (p,)
    eigenvalues: np.ndarray  # d of the directions kept, (k,)
    eigenvectors: np.ndarray  # their columns of V, (r, k)
    projected: np.ndarray  # C = V^T R_c, (k, p)
    least_squares_residual: float  # S_perp, the RSS at alpha = 0


@dataclass(frozen=True)
class RidgeSolution:
    """B (r x p), the intercept x_bar - B^T g_bar (p), the alpha used and its GCV score."""

    coefficients: np.ndarray
    intercept: np.ndarray
    alpha: float
    score: float


def centred_ridge(n: int, gram: np.ndarray, cross: np.ndarray, feature_sum: np.ndarray,
                  target_sum: np.ndarray, target_square: float, feature_shift: np.ndarray,
                  target_shift: np.ndarray) -> CentredRidge:
    """The centred statistics of the pre-image regression from the pass's shifted sums.

    Directions of H_c with d_k at most max(n, r) eps d_max are dropped: there the
    data give rounding, not a direction (scikit-learn's pseudo-inverse cut).

    Examples
    --------
    >>> g = np.array([[0.0], [1.0], [2.0]]); x = 2.0 * g + 1.0  # x = 1 + 2 g exactly
    >>> ridge = centred_ridge(3, g.T @ g, g.T @ x, g.sum(0), x.sum(0), float((x**2).sum()),
    ...                       np.zeros(1), np.zeros(1))
    >>> ridge.eigenvalues, ridge.target_mean, round(ridge.least_squares_residual, 12)
    (array([2.]), array([3.]), 0.0)
    """
    gram, cross = np.asarray(gram, np.float64), np.asarray(cross, np.float64)
    if not (np.isfinite(gram).all() and np.isfinite(cross).all()):
        raise InvalidParameterError(
            "The pre-image statistics are not finite: the kernel overflowed on the "
            "embeddings. Use a smaller gamma, degree or coef0.")
    feature_sum, target_sum = np.asarray(feature_sum), np.asarray(target_sum)
    H = gram - np.outer(feature_sum, feature_sum) / n
    d, V = np.linalg.eigh(0.5 * (H + H.T))
    kept = d > max(n, len(d)) * np.finfo(np.float64).eps * max(d.max(initial=0.0), 0.0)
    d, V = d[kept], V[:, kept]
    C = V.T @ (cross - np.outer(feature_sum, target_sum) / n)
    total = float(target_square) - float(target_sum @ target_sum) / n  # S
    explained = float(((C**2).sum(axis=1) / d).sum()) if len(d) else 0.0
    return CentredRidge(
        n_samples=int(n), feature_mean=np.asarray(feature_shift) + feature_sum / n,
        target_mean=np.asarray(target_shift) + target_sum / n, eigenvalues=d,
        eigenvectors=V, projected=C, least_squares_residual=max(total - explained, 0.0))


def _scores(ridge: CentredRidge, alphas: np.ndarray) -> np.ndarray:
    """GCV(alpha) per value (divided by p) for each alpha: design §15, in the stable form."""
    d, n = ridge.eigenvalues, ridge.n_samples
    weight = (ridge.projected**2).sum(axis=1)  # |C_k|^2
    a = np.asarray(alphas, np.float64)[:, None]
    rss = ridge.least_squares_residual + (weight * a**2 / (d * (d + a) ** 2)).sum(axis=1)
    left = (n - 1 - len(d)) + (a / (d + a)).sum(axis=1)  # n - df
    p = max(ridge.projected.shape[1], 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = n * rss / left**2 / p
    return np.where(left > 0, score, np.inf)


def gcv_score(ridge: CentredRidge, alpha: float) -> float:
    """The generalised cross-validation score of ``alpha``: n RSS / (n - df)^2, per value.

    An estimate of the mean squared error of one reconstructed value of a new
    row (in the units the regression sees: weighted features).

    Examples
    --------
    >>> g = np.array([[0.0], [1.0], [2.0]]); x = 2.0 * g + 1.0
    >>> ridge = centred_ridge(3, g.T @ g, g.T @ x, g.sum(0), x.sum(0), float((x**2).sum()),
    ...                       np.zeros(1), np.zeros(1))
    >>> gcv_score(ridge, 2.0)  # B = 1: RSS = 2, df = 1.5, so 3 * 2 / 1.5**2
    2.6666666666666665
    """
    return float(_scores(ridge, np.array([alpha]))[0])


def choose_alpha(ridge: CentredRidge) -> tuple[float, float]:
    """The alpha of least GCV score, and that score: a log grid, then a bounded search.

    The grid spans alpha / d_max from 1e-12 to 1e2 (four points a decade); the
    best point is refined by a bounded scalar search in log10(alpha) between its
    neighbours.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> g = rng.normal(size=(200, 3)); x = g @ [[1.0], [0.5], [0.0]] + rng.normal(size=(200, 1))
    >>> ridge = centred_ridge(200, g.T @ g, g.T @ x, g.sum(0), x.sum(0), float((x**2).sum()),
    ...                       np.zeros(3), np.zeros(1))
    >>> alpha, score = choose_alpha(ridge)
    >>> bool(score <= gcv_score(ridge, 1e-6) and score <= gcv_score(ridge, 1e3))
    True
    """
    if not len(ridge.eigenvalues):  # nothing to regress on: the mean alone
        return 1.0, gcv_score(ridge, 1.0)
    top = np.log10(ridge.eigenvalues.max())
    exponents = top + np.arange(_GRID_DECADES[0], _GRID_DECADES[1] + _GRID_STEP / 2,
                                _GRID_STEP)
    scores = _scores(ridge, 10.0**exponents)
    best = int(np.argmin(scores))
    if not np.isfinite(scores[best]):
        raise InvalidParameterError(
            "alpha='auto' found no finite cross-validation score: the pre-image map has as "
            "many directions as training rows. Give alpha a number, or fewer landmarks.")
    low, high = exponents[max(best - 1, 0)], exponents[min(best + 1, len(exponents) - 1)]
    found = optimize.minimize_scalar(lambda e: gcv_score(ridge, 10.0**e), bounds=(low, high),
                                     method="bounded", options={"xatol": 1e-3})
    if found.success and found.fun <= scores[best]:
        return float(10.0**found.x), float(found.fun)
    return float(10.0 ** exponents[best]), float(scores[best])


def solve_ridge(ridge: CentredRidge, alpha: float | str) -> RidgeSolution:
    """B = V diag(1 / (d + alpha)) C and the intercept, for a given or chosen alpha.

    ``alpha="auto"`` takes :func:`choose_alpha`'s; 0 is least squares on the
    directions kept.

    Examples
    --------
    >>> g = np.array([[0.0], [1.0], [2.0]]); x = 2.0 * g + 1.0
    >>> ridge = centred_ridge(3, g.T @ g, g.T @ x, g.sum(0), x.sum(0), float((x**2).sum()),
    ...                       np.zeros(1), np.zeros(1))
    >>> solution = solve_ridge(ridge, 0.0)
    >>> solution.coefficients, solution.intercept
    (array([[2.]]), array([1.]))
    """
    if isinstance(alpha, str):
        alpha, score = choose_alpha(ridge)
    else:
        alpha, score = float(alpha), gcv_score(ridge, float(alpha))
    V, d = ridge.eigenvectors, ridge.eigenvalues
    B = V @ (ridge.projected / (d + alpha)[:, None])
    return RidgeSolution(coefficients=B, intercept=ridge.target_mean - B.T @ ridge.feature_mean,
                         alpha=alpha, score=score)
