"""The small m x m problem of the Nyström method, on the client (docs/design.md §2).

The pass (:mod:`kpca_dask.engine.passes`) returns, summed over the row blocks,

    n,  s = D^T 1,  G = D^T D,  t = sum_i k(x_i, x_i)

with B = k(X, Z) and D = B - 1 r^T. ``solve`` turns these statistics into the
model, in O(m^3):

    K_mm = U diag(s) U^T,  W = U_r diag(s_r^{-1/2})  (W = L^{-T} if nothing is dropped)
    mu = W^T (s / n + r),  C = W^T (G - s s^T / n) W = V diag(lambda) V^T
    y(x) = P^T k_m(x) - c,  P = W V_q,  c = V_q^T mu

Maintenance note on the reference row r: the centred covariance C does not
depend on r (G - s s^T / n is the scatter matrix of the rows of B, which a
common shift leaves unchanged), but its rounding error does. Kernel values
are dominated by a common part (an rbf value is 1 - gamma d^2 + ... for
small gamma d^2), so the uncentred G = sum B^T B is ~n and C, its small
difference, loses every digit that W = U s^{-1/2} amplifies: with r = 0 the
eigenvalues of an rbf fit with gamma = 1e-9 came out 85 % wrong (1e-7: 6e-5;
1e-5: 2e-9). Shifting by r = the mean landmark kernel row K_mm 1 / m, a cheap
estimate of the mean of k_m(x), brought the same three cases to 2e-9,
3e-11 and 1e-13 of the exact eigenvalues. It is the textbook shifted-data
trick for variances, applied to kernel features.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from .._parallel import single_blas_thread
from ..blocks.kernels import pairwise_kernel
from ..blocks.signs import fix_signs
from ..blocks.statistics import PassStatistics
from ..errors import InvalidParameterError, TooFewComponentsError, ZeroEigenvalueWarning
from ..validation import is_integer

__all__ = ["NystromSolution", "LandmarkBasis", "landmark_kernel_matrix", "reference_row",
           "landmark_basis", "n_components_for", "solve", "ZERO_EIGENVALUE_RTOL",
           "OVERFLOW_MESSAGE"]

#: Eigenvalues of C below this fraction of the largest count as zero; the same
#: ratio scikit-learn uses to decide that an eigenvalue is numerically zero.
ZERO_EIGENVALUE_RTOL = 1e-12

OVERFLOW_MESSAGE = (
    "The kernel values of {where} are not finite: they overflowed (or a callable kernel "
    "returned NaN/inf). Scale the data down (e.g. standardize the features) or use a "
    "smaller gamma, degree or coef0; with dtype='float32', values above 3e38 overflow, "
    "so use dtype='float64'."
)


def landmark_kernel_matrix(landmarks: np.ndarray, kernel, params: dict) -> np.ndarray:
    """K_mm = k(Z, Z) in float64, computed with one BLAS thread.

    It comes just before LAPACK (scipy's BLAS, a library apart from numpy's)
    and the pass: numpy's BLAS threads, woken by a threaded product, would spin
    for ~0.1 s and take a core from both. At m = 1000 the product is 64 Mflop.

    Examples
    --------
    >>> landmark_kernel_matrix(np.array([[0.0], [1.0]]), "linear", {})
    array([[0., 0.],
           [0., 1.]])
    """
    Z = np.asarray(landmarks, dtype=np.float64)
    with single_blas_thread():
        return pairwise_kernel(Z, landmarks, kernel, **params)


def reference_row(landmarks: np.ndarray, kernel, params: dict,
                  kmm: np.ndarray | None = None) -> np.ndarray:
    """The shift r = K_mm 1 / m of the accumulated kernel rows (module docstring)."""
    if kmm is None:
        Z = np.asarray(landmarks, dtype=np.float64)
        kmm = pairwise_kernel(Z, Z, kernel, **params)
    return np.asarray(kmm, dtype=np.float64).mean(axis=0)


@dataclass(frozen=True)
class LandmarkBasis:
    """A whitening basis W of the landmark kernel matrix: W W^T = K_mm^+ on its kept part.

    Any such W gives the same model: another one is W Q with Q orthogonal,
    which turns C into Q^T C Q and V into Q^T V, so P = W V, mu^T mu and
    trace(W^T G W) do not change.
    """

    W: np.ndarray  # (m, r)
    cholesky: np.ndarray | None = None  # L, K_mm = L L^T, when W = L^{-T}

    def whiten(self, M: np.ndarray) -> np.ndarray:
        """W^T M W for a symmetric m x m ``M`` (symmetric to the last bit).

        With a Cholesky factor this is LAPACK's sygst, L^{-1} M L^{-T}: 17 ms
        at m = 1000 against 50 ms for the two products.
        """
        if self.cholesky is not None:
            # M.T: the same symmetric matrix, already in the Fortran order LAPACK reads.
            C, info = lapack.dsygst(np.asarray(M, dtype=np.float64).T, self.cholesky,
                                    itype=1, lower=1)
            if info == 0:
                lower = np.tril(C)  # sygst writes the lower triangle only
                return lower + np.tril(lower, -1).T
        with single_blas_thread():
            C = self.W.T @ M @ self.W
        return 0.5 * (C + C.T)


#: Safety factor on LAPACK's condition estimate before the Cholesky route is
#: taken: the estimate of ||K^-1||_1 is a lower bound, in practice within a
#: factor of 3 of the truth.
CONDITION_MARGIN = 10.0


def landmark_basis(kmm: np.ndarray, rcond: float) -> LandmarkBasis:
    """Whitening basis W of the landmark kernel matrix, dropping its noise.

    Eigenvalues at or below ``rcond * max(s)`` are dropped rather than
    inverted; significantly negative ones (a kernel that is not positive
    semi-definite, such as sigmoid) trigger a warning.

    When every eigenvalue of K_mm is above that cut-off (shown by its
    Cholesky factor and LAPACK's condition estimate, or by a Cholesky
    factorisation of K_mm shifted down by the cut-off, see
    :func:`_cholesky_whitening`), no eigenvalue would be dropped, and
    W = L^{-T} from K_mm = L L^T gives the same model as U diag(s^{-1/2})
    (see :class:`LandmarkBasis`) in a fraction of the time: 20-50 ms against
    100-150 ms at m = 1000 on two cores.

    Examples
    --------
    >>> landmark_basis(np.diag([4.0, 1.0, 0.0]), rcond=1e-10).W
    array([[0.5, 0. ],
           [0. , 1. ],
           [0. , 0. ]])
    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])  # well conditioned: the Cholesky route
    >>> W = landmark_basis(K, rcond=1e-10).W
    >>> bool(np.allclose(W @ W.T, np.linalg.inv(K)))
    True
    """
    if not np.isfinite(kmm).all():
        raise InvalidParameterError(OVERFLOW_MESSAGE.format(where="the landmarks"))
    kmm = 0.5 * (kmm + kmm.T)
    basis = _cholesky_whitening(kmm, rcond)
    if basis is not None:
        return basis
    s, U = linalg.eigh(kmm, driver="evd")  # divide and conquer: the fastest for all pairs
    s, U = s[::-1], U[:, ::-1]
    if not s[0] > 0:
        raise InvalidParameterError(
            "The kernel matrix of the landmarks has no positive eigenvalue, so the kernel "
            "gives no features here. Check the kernel and its parameters (e.g. a gamma "
            "that is not so large that every kernel value underflows)."
        )
    keep = s > rcond * s[0]
    n_negative = int(np.sum(s < -rcond * s[0]))
    if n_negative:
        warnings.warn(
            f"The kernel is not positive semi-definite on the landmarks: {n_negative} of "
            f"{s.size} eigenvalues of K_mm are negative (smallest {s[-1]:.3g}). They are "
            "excluded; the model uses the kernel's positive semi-definite part.",
            UserWarning,
            stacklevel=3,
        )
    return LandmarkBasis(W=U[:, keep] / np.sqrt(s[keep]))


def _cholesky_whitening(kmm: np.ndarray, rcond: float) -> LandmarkBasis | None:
    """W = L^{-T} (K_mm = L L^T) when every eigenvalue is above ``rcond * max(s)``, else None.

    Two tests, the cheap one first. 1 / cond_2(K) >= rcond_1 / f, where
    rcond_1 is LAPACK's estimate of 1 / cond_1(K) and f >= 1 how far its
    estimate of ||K^-1||_1 falls short: rcond_1 > CONDITION_MARGIN * rcond
    settles it unless f > CONDITION_MARGIN. When it does not (cond_1 can
    exceed cond_2 by a factor of m; k-means landmarks in float32 often land
    there), a Cholesky factorisation of K - tau I decides: it exists only if
    every eigenvalue exceeds tau, and tau = rcond * ||K||_F, with
    ||K||_F >= max(s), plus the factorisation's own rounding, is above the
    cut-off. 10-20 ms at m = 1000, against 100 ms for the eigendecomposition.
    Rank-deficient and indefinite K_mm, and those with an eigenvalue at or
    below the cut-off, take the eigendecomposition.
    """
    L, info = lapack.dpotrf(kmm, lower=1, clean=1)
    if info != 0:  # not positive definite to working precision
        return None
    if not _every_eigenvalue_above(kmm, L, rcond):
        return None
    L_inverse, info = lapack.dtrtri(L, lower=1)
    if info != 0:
        return None
    return LandmarkBasis(W=np.ascontiguousarray(L_inverse.T), cholesky=L)


def _every_eigenvalue_above(kmm: np.ndarray, L: np.ndarray, rcond: float) -> bool:
    """Whether every eigenvalue of ``kmm`` (Cholesky factor ``L``) exceeds ``rcond * max(s)``."""
    estimate, info = lapack.dpocon(L, float(np.abs(kmm).sum(axis=0).max()), uplo="L")
    if info == 0 and estimate > CONDITION_MARGIN * rcond:
        return True
    m = kmm.shape[0]
    # A computed Cholesky factor is exact for K - tau I + E with
    # ||E||_2 <= m (m + 1) eps ||K||_2 (Higham, Accuracy and Stability of
    # Numerical Algorithms, 2nd ed., Thm 10.3 and 10.5): that much more shift
    # keeps the test on the safe side.
    tau = (rcond + m * (m + 1) * np.finfo(np.float64).eps) * float(np.linalg.norm(kmm))
    shifted = np.array(kmm, order="F")  # LAPACK's order: factorised in place, no copy
    shifted.flat[:: m + 1] -= tau
    _, info = lapack.dpotrf(shifted, lower=1, overwrite_a=1)
    return info == 0


@dataclass(frozen=True)
class NystromSolution:
    """The fitted model: a projection y(x) = P^T k_m(x) - c plus diagnostics."""

    projection: np.ndarray  # P = W V_q, (m, q)
    offset: np.ndarray  # c = V_q^T mu, (q,)
    eigenvalues: np.ndarray  # lambda_1..q of J K_nys J
    explained_variance_ratio: np.ndarray  # lambda_j / trace(C), (q,)
    trace_error: float  # (t - trace(W^T G W)) / t


def n_components_for(
    n_components, eigenvalues: np.ndarray, n_positive: int, total: float,
    remove_zero_eig: bool = False, n_samples: int | None = None,
) -> int:
    """Number of components q for an int, a ratio eta in (0, 1), or None.

    As in scikit-learn's KernelPCA: None keeps the positive eigenvalues; an
    int above their number keeps that many components (at most ``n_samples``),
    the extra ones with eigenvalue 0 and zero embedding columns, with a
    warning, unless ``remove_zero_eig`` drops them. Components q past
    ``n_positive`` are those zero ones.

    Examples
    --------
    >>> lam = np.array([2.0, 1.0, 0.0])
    >>> n_components_for(2, lam, 2, 3.0), n_components_for(None, lam, 2, 3.0)
    (2, 2)
    >>> n_components_for(3, lam, 2, 3.0, remove_zero_eig=True)
    2
    """
    if n_positive == 0 and not (is_integer(n_components) and not remove_zero_eig):
        if isinstance(n_components, float):  # no variance: no fraction of it to explain
            raise TooFewComponentsError(
                f"n_components={n_components} asks for a fraction of the variance, but the "
                f"centred kernel matrix has no positive eigenvalue: {_NO_VARIANCE} Check the "
                "data, or increase gamma.")
        # scikit-learn's KernelPCA returns an (n, 0) embedding here, silently; the
        # warning says why the embedding is empty.
        warnings.warn(
            f"The centred kernel matrix has no positive eigenvalue, so the model has 0 "
            f"components and transform returns an (n, 0) embedding, as scikit-learn's "
            f"KernelPCA does with n_components=None or remove_zero_eig=True: {_NO_VARIANCE} "
            "Check the data, or increase gamma.",
            ZeroEigenvalueWarning,
            stacklevel=4,
        )
        return 0
    if n_components is None:
        return n_positive
    if isinstance(n_components, float) and 0 < n_components < 1:
        ratios = np.cumsum(eigenvalues[:n_positive]) / total
        # Smallest q with cumulative ratio >= eta (a hair of slack for rounding).
        return int(min(np.searchsorted(ratios, n_components - 1e-12) + 1, n_positive))
    q = int(n_components) if n_samples is None else min(int(n_components), n_samples)
    if q > n_positive:
        if remove_zero_eig:
            return n_positive
        warnings.warn(
            f"n_components={n_components}, but only {n_positive} eigenvalue(s) of the "
            f"centred kernel matrix are positive: the last {q - n_positive} component(s) "
            "have eigenvalue 0 and are zero columns of the embedding, as in scikit-learn. "
            "The data span fewer directions in the kernel's feature space (e.g. a linear "
            "kernel on low-dimensional data, duplicated rows, or too few landmarks). Pass "
            "remove_zero_eig=True to drop them, or ask for fewer components.",
            ZeroEigenvalueWarning,
            stacklevel=4,
        )
    return q


_NO_VARIANCE = (
    "in the kernel's feature space the data have no variance. Either every row of X is "
    "the same (constant data), or the kernel is constant on them, e.g. an rbf gamma so "
    "small that every kernel value rounds to 1.")


def _leading_eigenpairs(C: np.ndarray, n_components, feature_gram_trace: float):
    """Eigenvalues (descending), eigenvectors and the number of positive eigenvalues of C.

    C is a difference of terms of size trace(W^T G W) = trace(C) + n |mu|^2, so
    that, not lambda_1, sets the rounding floor: a kernel constant to within
    rounding (tiny gamma) must give no component, not one made of noise.

    Maintenance note: an int ``n_components`` q needs only the q leading
    eigenpairs (the explained-variance ratios divide by trace(C)), and LAPACK
    computes those in a third of the time of the whole spectrum (0.04 s
    against 0.13 s at r = 1000). The whole spectrum is computed only when a
    fraction or None asks for it, or when the q-th eigenvalue is not positive
    (zero components, where the count of positive ones matters).
    """
    r = C.shape[0]
    if is_integer(n_components) and 0 < n_components < r // 2:
        q = int(n_components)
        lam, V = linalg.eigh(C, subset_by_index=[r - q, r - 1])
        lam, V = lam[::-1], V[:, ::-1]
        if lam[-1] > ZERO_EIGENVALUE_RTOL * max(lam[0], feature_gram_trace):
            return lam, V, q
    lam, V = linalg.eigh(C, driver="evd")
    lam, V = lam[::-1], V[:, ::-1]
    zero_floor = ZERO_EIGENVALUE_RTOL * max(lam[0], feature_gram_trace)
    n_positive = int(np.sum(lam > zero_floor)) if lam[0] > 0 else 0
    return lam, V, n_positive


def solve(stats: PassStatistics, basis: LandmarkBasis, n_components,
          remove_zero_eig: bool = False) -> NystromSolution:
    """The small problem on the client: from the pass statistics to the model.

    Components past the positive eigenvalues (an int ``n_components`` above
    their number, see :func:`n_components_for`) get eigenvalue 0 and a zero
    column of P and c, so their embedding column is 0, as in scikit-learn.

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask.engine.passes import pass_statistics
    >>> X = da.from_array(np.array([[0.0], [1.0], [2.0], [3.0]]), chunks=2)
    >>> Z = X.compute()
    >>> basis = landmark_basis(Z @ Z.T + 1.0, rcond=1e-10)  # polynomial, degree 1
    >>> stats = pass_statistics(X, Z, "polynomial", {"gamma": 1.0, "degree": 1, "coef0": 1.0})
    >>> solve(stats.compute(), basis, None).eigenvalues.round(6)  # sum of squares about the mean
    array([5.])
    """
    n = stats.n_samples
    s, r = stats.column_sums, stats.reference
    W = basis.W
    # The scatter matrix of the kernel rows, from the shifted sums (module docstring).
    scatter = stats.gram - np.outer(s / n, s)
    # One BLAS thread for numpy's products here (and in basis.whiten): numpy and
    # scipy ship separate BLAS libraries, and numpy's threads, once woken by a
    # threaded product, spin for ~0.1 s, taking a core from scipy's eigh just
    # after (42 ms alone, 70-140 ms then).
    with single_blas_thread():
        mean_feature = W.T @ (s / n + r)  # mu
    C = basis.whiten(0.5 * (scatter + scatter.T))
    # trace(W^T G_unshifted W) = trace(C) + n |mu|^2, for the trace certificate.
    feature_gram_trace = float(np.trace(C)) + n * float(mean_feature @ mean_feature)
    total = float(np.trace(C))
    lam, V, n_positive = _leading_eigenpairs(C, n_components, feature_gram_trace)
    q = n_components_for(n_components, lam, n_positive, total, remove_zero_eig, n)
    kept = min(q, n_positive)
    P = W @ V[:, :kept]
    signs = fix_signs(P)  # deterministic: each column's largest entry positive
    P = P * signs
    offset = (V[:, :kept] * signs).T @ mean_feature
    eigenvalues = np.zeros(q)
    eigenvalues[:kept] = lam[:kept]
    t = stats.diagonal_sum
    trace_error = (t - feature_gram_trace) / t if t > 0 else 0.0
    return NystromSolution(
        projection=np.pad(P, ((0, 0), (0, q - kept))),
        offset=np.pad(offset, (0, q - kept)),
        eigenvalues=eigenvalues,
        explained_variance_ratio=eigenvalues / total if total > 0 else np.zeros(q),
        trace_error=trace_error,
    )
