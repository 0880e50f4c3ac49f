"""The small problem of coupled fields: kernel MCA and kernel CCA from the coupled pass.

With each field's factor W (W W^T = K_mm^+, :mod:`kpca_dask.engine.solve.landmark_factor`)
and the sums of :mod:`kpca_dask.engine.passes.coupled` (docs/design.md §20)::

    mu_x = W_x^T (s_x / n + r_x)                         the mean feature
    C_xx = W_x^T (G_x - s_x s_x^T / n) W_x / (n - 1)     each field's covariance
    C_xy = W_x^T (S_xy - s_x s_y^T / n) W_y / (n - 1)    the cross-covariance

- **MCA**: C_xy = U S V^T; the scores a = A_x^T (z_x - mu_x) with A_x = U_q, b with
  A_y = V_q; squared covariance fractions s_k^2 / sum_j s_j^2 over every singular value.
- **CCA**: each field's leading d PCs of C_xx, whitened,
  T_x = E_d (Lambda_d + eps mean(Lambda_d))^{-1/2}; the canonical correlations are the
  singular values of T_x^T C_xy T_y = U R V^T and A_x = T_x U_q, A_y = T_y V_q, so that the
  canonical variates have unit variance (at eps = 0).

Every score is y(x) = P^T k_m(x) - c with P = W A and c = A^T mu: one kernel block
and one small product per row block, as a kernel PCA's projection. The signs are
fixed per pair of modes: the largest-magnitude entry of each column of P_x positive.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ...blocks.cross_sums import CoupledStatistics
from ...blocks.signs import fix_signs
from ...blocks.statistics import PassStatistics
from ...errors import CanonicalOverfitWarning, InvalidInputError, InvalidParameterError
from .landmark_factor import LandmarkFactor

__all__ = ["CoupledSolution", "solve_coupled", "pca_mode_count", "null_correlation",
           "relative_cutoff", "feature_covariance", "cross_covariance", "leading_pcs",
           "whitening", "METHODS"]

#: The coupled analyses.
METHODS = ("mca", "cca")


@dataclass(frozen=True)
class CoupledSolution:
    """Both fields' projections y(x) = P^T k_m(x) - c and the pairs' strengths."""

    projection_x: np.ndarray  # P_x = W_x A_x, (m_x, q)
    offset_x: np.ndarray  # c_x, (q,)
    projection_y: np.ndarray
    offset_y: np.ndarray
    singular_values: np.ndarray  # s_k (MCA: covariances; CCA: canonical correlations), (q,)
    total_squared: float  # sum of every squared singular value of the small matrix
    pca_modes: tuple[int, int] | None = None  # CCA: d_x, d_y kept per field
    field_variances: tuple[float, float] | None = None  # CCA: trace(C_xx), trace(C_yy)


def _mean_feature(stats: PassStatistics, factor: LandmarkFactor) -> np.ndarray:
    """mu = W^T (s / n + r), (r,)."""
    return factor.whiten((stats.column_sums / stats.n_samples + stats.reference)[:, None])[:, 0]


def feature_covariance(stats: PassStatistics, factor: LandmarkFactor) -> np.ndarray:
    """C = W^T S W / (n - 1) with S = G - s s^T / n, made exactly symmetric."""
    n, s = stats.n_samples, stats.column_sums
    whitened = factor.whiten(stats.gram - np.outer(s, s) / n)
    C = factor.whiten(np.ascontiguousarray(whitened.T)).T / (n - 1)
    return (C + C.T) / 2


def pca_mode_count(eigenvalues: np.ndarray, n_pca_modes: int | float | None,
                   cutoff: float = 1e-12) -> int:
    """How many leading PCs of a field a CCA keeps: all positive ones (above ``cutoff`` of
    the largest) for None, an int as given (at most those), a float in (0, 1] the fewest
    that explain that share of the field's feature variance.

    Examples
    --------
    >>> lam = np.array([6.0, 3.0, 1.0, 0.0])
    >>> pca_mode_count(lam, None), pca_mode_count(lam, 2), pca_mode_count(lam, 0.9)
    (3, 2, 2)
    """
    positive = int(np.sum(eigenvalues > eigenvalues[0] * cutoff)) if (
        eigenvalues.size and eigenvalues[0] > 0) else 0
    if positive == 0:
        return 0
    if n_pca_modes is None:
        return positive
    if isinstance(n_pca_modes, (int, np.integer)):
        return max(1, min(int(n_pca_modes), positive))
    shares = np.cumsum(eigenvalues[:positive]) / eigenvalues[:positive].sum()
    return max(1, min(positive, int(np.searchsorted(shares, n_pca_modes * (1 - 1e-12)) + 1)))


def relative_cutoff(dtype) -> float:
    """The smallest PC variance, relative to the largest, a CCA whitens. A float32 pass sums
    its products in float32 within a block, and whitening PCs at that rounding's level gave
    correlations that its own scores did not have (independent rbf fields, n = 3000, m = 200,
    every PC: 1.03 reported against 0.26 measured below 1e-5; 0.520 against 0.521 at 1e-3,
    float32's landmark cut-off, kept here).

    Examples
    --------
    >>> relative_cutoff(np.float64), relative_cutoff(np.float32)
    (1e-12, 0.001)
    """
    return 1e-12 if np.dtype(dtype) == np.float64 else 1e-3


def leading_pcs(C: np.ndarray, n_pca_modes, cutoff: float, field: str):
    """The variances and directions of the field's d leading PCs (``n_pca_modes``), or an
    error naming a field without variance."""
    eigenvalues, vectors = linalg.eigh(C)
    eigenvalues, vectors = eigenvalues[::-1], vectors[:, ::-1]
    d = pca_mode_count(eigenvalues, n_pca_modes, cutoff)
    if d == 0:
        raise InvalidInputError(
            f"Field {field} has no variance in its kernel features (a constant field, or a "
            "kernel constant on it): there is nothing to correlate. Check the field, or "
            "the kernel's gamma.")
    return eigenvalues[:d], vectors[:, :d]


def whitening(pcs, epsilon: float) -> np.ndarray:
    """T = E_d (Lambda_d + eps mean(Lambda_d))^{-1/2} of :func:`leading_pcs`' ``pcs``."""
    kept, vectors = pcs
    return vectors / np.sqrt(kept + epsilon * kept.mean())


def cross_covariance(stats: CoupledStatistics, factor_x: LandmarkFactor,
                     factor_y: LandmarkFactor) -> np.ndarray:
    """C_xy = W_x^T (S_xy - s_x s_y^T / n) W_y / (n - 1)."""
    n = stats.n_samples
    cross = stats.cross - np.outer(stats.x.column_sums, stats.y.column_sums) / n
    return factor_y.whiten(np.ascontiguousarray(factor_x.whiten(cross).T)).T / (n - 1)


def null_correlation(d_x: int, d_y: int, n: int) -> float:
    """Where the leading sample canonical correlation of d_x and d_y PCs of n samples of
    independent fields lies: sqrt(p (1 - q)) + sqrt(q (1 - p)), p = d_x / n, q = d_y / n
    (the upper edge of Wachter's law; :class:`~kpca_dask.errors.CanonicalOverfitWarning`).

    Examples
    --------
    >>> round(null_correlation(5, 5, 50), 3), round(null_correlation(10, 10, 1500), 3)
    (0.6, 0.163)
    """
    p, q = min(d_x / n, 1.0), min(d_y / n, 1.0)
    return float(min(1.0, np.sqrt(p * (1 - q)) + np.sqrt(q * (1 - p))))


#: A CCA warns when independent fields' leading canonical correlation would exceed this.
OVERFIT_CORRELATION = 0.5


def _warn_if_overfit(d_x: int, d_y: int, n: int, epsilon: float) -> None:
    level = null_correlation(d_x, d_y, n)
    if epsilon == 0 and level > OVERFIT_CORRELATION:
        warnings.warn(
            f"CCA on {d_x} and {d_y} PCs of {n} samples: independent fields would show a "
            f"leading canonical correlation near {level:.2f}, so these correlations are biased "
            "toward 1. Keep fewer PCs (n_pca_modes=int), add a ridge (epsilon > 0), or let "
            "the fit choose one on held-out samples (epsilon='auto').",
            CanonicalOverfitWarning, stacklevel=5)


def solve_coupled(stats: CoupledStatistics, factor_x: LandmarkFactor, factor_y: LandmarkFactor,
                  *, method: str, n_modes: int, n_pca_modes=(None, None),
                  epsilon: float = 0.0, warn: bool = True, dtype=np.float64) -> CoupledSolution:
    """The coupled modes of ``stats`` (see the module docstring); a CCA on many PCs for its
    samples warns (``warn``; :class:`~kpca_dask.errors.CanonicalOverfitWarning`).

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask.engine.passes.coupled import compute_coupled_pass, field_kernel
    >>> from kpca_dask.engine.solve.landmark_factor import factor_landmarks, reference_row
    >>> X = np.random.default_rng(0).normal(size=(30, 3))
    >>> side = field_kernel(da.from_array(X), X, "linear", {}, reference_row(X, "linear", {}),
    ...                     np.float64)
    >>> stats = compute_coupled_pass(da.from_array(X), da.from_array(X), side, side,
    ...                              within=False)  # MCA needs the cross sums alone
    >>> factor = factor_landmarks(X, "linear", {}, 1e-10)
    >>> solution = solve_coupled(stats, factor, factor, method="mca", n_modes=2)
    >>> Xc = X - X.mean(axis=0)
    >>> s = np.linalg.svd(Xc.T @ Xc / 29, compute_uv=False)[:2]
    >>> bool(np.allclose(solution.singular_values, s))
    True
    """
    if method not in METHODS:
        raise InvalidParameterError(f"method must be one of {METHODS}; got {method!r}.")
    n = stats.n_samples
    mean_x, mean_y = _mean_feature(stats.x, factor_x), _mean_feature(stats.y, factor_y)
    C_xy = cross_covariance(stats, factor_x, factor_y)
    pca_modes = variances = None
    if method == "cca":
        C_xx, C_yy = feature_covariance(stats.x, factor_x), feature_covariance(stats.y, factor_y)
        variances = (float(np.trace(C_xx)), float(np.trace(C_yy)))
        cutoff = relative_cutoff(dtype)
        T_x = whitening(leading_pcs(C_xx, n_pca_modes[0], cutoff, "X"), epsilon)
        T_y = whitening(leading_pcs(C_yy, n_pca_modes[1], cutoff, "Y"), epsilon)
        pca_modes = (T_x.shape[1], T_y.shape[1])
        if warn:
            _warn_if_overfit(*pca_modes, n, epsilon)
        U, values, Vt = linalg.svd(T_x.T @ C_xy @ T_y, full_matrices=False)
        A_x, A_y = T_x @ U, T_y @ Vt.T
    else:
        A_x, values, Vt = linalg.svd(C_xy, full_matrices=False)
        A_y = Vt.T
    if not np.sum(values**2) > 0:
        raise InvalidInputError(
            "The two fields have no covariance in their kernel features (a constant field, "
            "or a kernel constant on one): there are no coupled modes. Check the fields, or "
            "the kernels' gamma.")
    q = min(int(n_modes), len(values))
    A_x, A_y = A_x[:, :q], A_y[:, :q]
    P_x, P_y = factor_x.unwhiten(A_x), factor_y.unwhiten(A_y)
    signs = fix_signs(P_x)
    return CoupledSolution(
        projection_x=P_x * signs, offset_x=(A_x.T @ mean_x) * signs,
        projection_y=P_y * signs, offset_y=(A_y.T @ mean_y) * signs,
        singular_values=values[:q], total_squared=float(np.sum(values**2)),
        pca_modes=pca_modes, field_variances=variances)
