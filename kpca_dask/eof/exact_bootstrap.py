"""The bootstrap of an exact model's modes, from its n x n kernel matrix.

An :class:`~kpca_dask.ExactKernelPCA`, or a :class:`~kpca_dask.HilbertKernelEOF` fitted
by the Gram way (its kernel matrix complex Hermitian, of the whole record's analytic
signal, whose rows are resampled), has no landmarks to sum replicates on: each
replicate is the weighted kernel PCA of the same kernel matrix, made once in one read
of the data (docs/design.md §18). With counts c (Σ c_i = n) the replicate's rows are
the rows drawn, row i c_i times; with μ = Σ c_i φ(x_i) / n and
K̃ = (I − 1 cᵀ / n) K (I − c 1ᵀ / n) the kernel centred on μ, its scatter operator
has the nonzero eigenvalues of M = C^½ K̃ C^½ on the rows drawn (C = diag c): n_d ≈
0.63 n of them, an eigenproblem of n_d³ per replicate. A mode's direction is
v = Σ α_i (φ(x_i) − μ), α = C^½ u / √λ for M u = λ u, of unit norm, and its
congruence with the fit's is the modulus of ⟨v, v₀⟩, a quadratic form of K.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..blocks.replicate_counts import DrawnCounts
from ..engine.exact.gram import inner_products
from ..engine.hilbert.complex_gram import hermitian_gram, hermitian_kernel
from ..engine.passes.replicates import check_replicate_memory
from ..errors import InsufficientMemoryError, InvalidInputError, InvalidParameterError
from ..exact.exact_fitting import DENSE_WORDS, dense_fits
from ..model.inputs import in_memory_input, method_input
from ..model.kernel_matrices import points_gram, symmetrise_in_place
from ..model.precomputed import PRECOMPUTED

__all__ = ["exact_replicates", "hilbert_replicates", "ExactReplicates", "check_fitted_shape",
           "check_replicate_memory"]


class ExactReplicates:
    """Each replicate's leading k + 1 eigenvalues (B, k + 1), its ratios, its total (the
    trace of M, B) and the congruence (B, k) of its k leading modes with the fit's; the
    bytes the largest array of the sums took and the landmarks (every sample for a kernel
    matrix)."""

    def __init__(self, eigenvalues, traces, congruence, memory_bytes: int, n_landmarks: int):
        self.eigenvalues, self.traces, self.congruence = eigenvalues, traces, congruence
        self.memory_bytes, self.n_landmarks = int(memory_bytes), int(n_landmarks)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.ratios = np.where(traces[:, None] > 0, eigenvalues / traces[:, None], 0.0)


def exact_replicates(estimator, X, counts, k: int) -> ExactReplicates:
    """The replicates of ``counts`` (DrawnCounts or a (B, n) array) of an exact model fitted
    on ``X``, solved from its kernel matrix, made in one read of ``X``.

    Examples
    --------
    >>> from kpca_dask import ExactKernelPCA
    >>> X = np.random.default_rng(0).normal(size=(40, 3)) * [3.0, 1.0, 0.5]
    >>> model = ExactKernelPCA(2, kernel="linear").fit(X)
    >>> same = exact_replicates(model, X, np.ones((1, 40), dtype=int), 2)
    >>> bool(np.allclose(same.eigenvalues[0, :2], model.eigenvalues_))
    True
    >>> same.congruence.round(12).tolist()
    [[1.0, 1.0]]
    """
    fit = estimator.model_
    if fit.kernel == PRECOMPUTED or callable(fit.kernel):
        raise InvalidParameterError(
            "bootstrap of an exact model needs its rows and a named kernel; a model of a "
            "precomputed kernel matrix or of a callable kernel cannot be bootstrapped.")
    rows = in_memory_input(fit.layout, X, keep_lazy=fit.lazy)  # as the fit read its rows
    n = check_fitted_shape(rows.data.shape, fit.n_samples, fit.n_features)
    if not dense_fits(n, rows.data):
        raise InsufficientMemoryError(
            f"The bootstrap of an exact model holds its {n} x {n} kernel matrix (about "
            f"{DENSE_WORDS * 8 * n * n / 2**30:.1f} GiB with its work), more than the memory "
            "available; bootstrap a KernelPCA with landmarks instead.")
    _, _, K = points_gram(rows.data, rows.is_lazy, fit.kernel, fit.kernel_params)
    symmetrise_in_place(K)
    lam = np.asarray(fit.eigenvalues)[:k]
    scaled = np.where(lam > 0, 1.0 / np.sqrt(np.where(lam > 0, lam, 1.0)), 0.0)
    return _replicates(K, np.asarray(fit.eigenvectors)[:, :k] * scaled, counts, k)


def hilbert_replicates(estimator, X, counts, k: int) -> ExactReplicates:
    """The replicates of ``counts`` of a Hilbert kernel EOF fitted by the Gram way on the
    record ``X``: the analytic signal of the whole record, its rows resampled, each
    replicate solved from the Hermitian kernel matrix, made again in one read of ``X``.

    Examples
    --------
    >>> from kpca_dask import HilbertKernelEOF
    >>> t, x = np.arange(60)[:, None], np.arange(80)[None, :]
    >>> X = np.cos(0.3 * x - 0.2 * t) + np.random.default_rng(0).normal(size=(60, 80))
    >>> model = HilbertKernelEOF(2, padding="none", solver="gram").fit(X)
    >>> same = hilbert_replicates(model, X, np.ones((1, 60), dtype=int), 2)
    >>> bool(np.allclose(same.eigenvalues[0, :2], model.eigenvalues_))
    True
    """
    fit = estimator.model_
    rows = method_input(estimator, fit.layout, X)
    check_fitted_shape(rows.data.shape, fit.n_samples, fit.n_features)
    H = hermitian_gram(inner_products(rows.data)[0], fit.analytic.padding,
                       fit.analytic.decay_factor)
    K = hermitian_kernel(H, fit.kernel_params)[0]
    del H
    return _replicates(K, np.asarray(fit.solution.projection)[:, :k], counts, k)


def check_fitted_shape(shape: tuple, n_samples: int, n_features: int) -> int:
    """The number of samples of rows of ``shape``, or InvalidInputError unless they are as
    many, of as many features, as the fit's: a bootstrap resamples the data fitted on."""
    n, p = (int(size) for size in shape)
    if n != n_samples or p != n_features:
        raise InvalidInputError(
            f"X has {n} samples of {p} features, but the model was fitted on {n_samples} of "
            f"{n_features}: bootstrap the data the model was fitted on.")
    return n


def _replicates(K: np.ndarray, directions: np.ndarray, counts, k: int) -> ExactReplicates:
    """Every replicate of ``counts`` solved from the kernel matrix ``K`` (real symmetric or
    complex Hermitian); ``directions`` the fit's unit modes as coefficients of the training
    rows (n x k), centred here: v₀ = Φᵀ ã, ã = a − mean(a)."""
    n = K.shape[0]
    all_counts = counts.block(0, n) if isinstance(counts, DrawnCounts) else np.asarray(counts)
    KF = K @ (directions - directions.mean(axis=0))
    B = all_counts.shape[0]
    eigenvalues, traces = np.zeros((B, k + 1)), np.zeros(B)
    congruence = np.zeros((B, k))
    for b, c in enumerate(all_counts):
        eigenvalues[b], traces[b], congruence[b] = _replicate(K, KF, c.astype(np.float64), k)
    return ExactReplicates(eigenvalues, traces, congruence, K.nbytes, n)


def _replicate(K: np.ndarray, KF: np.ndarray, c: np.ndarray, k: int) -> tuple:
    """One replicate's leading k + 1 eigenvalues, its total and its modes' congruence with
    the fit's (``KF`` = K times the fit's directions)."""
    n = c.size
    drawn = np.flatnonzero(c)
    w = c[drawn]
    Kd = K[np.ix_(drawn, drawn)]
    row_means = K[drawn] @ c / n  # ⟨φ_i, μ⟩ for the rows drawn
    grand = float((c @ (K @ c)).real) / n ** 2  # ‖μ‖²
    Kd -= row_means[:, None]
    Kd -= row_means.conj()[None, :]
    Kd += grand
    root = np.sqrt(w)
    M = Kd * root[:, None] * root[None, :]
    total = float(np.trace(M).real)
    size = M.shape[0]
    top = min(k + 1, size)
    lam, U = linalg.eigh(M, subset_by_index=[size - top, size - 1], overwrite_a=True,
                         check_finite=False)
    lam, U = lam[::-1], U[:, ::-1]
    values = np.zeros(k + 1)
    values[:top] = np.clip(lam, 0.0, None)
    # The replicate's directions as coefficients of every training row, centred on μ.
    alpha = np.zeros((n, top), dtype=U.dtype)
    positive = lam > 0
    alpha[drawn] = root[:, None] * U * np.where(positive, 1.0 / np.sqrt(np.where(
        positive, lam, 1.0)), 0.0)
    alpha -= np.outer(c / n, alpha.sum(axis=0))
    inner = (np.einsum("nk,nk->k", alpha[:, :k].conj(), KF[:, :k]) if top >= k
             else np.zeros(k))
    return values, total, np.clip(np.abs(inner), 0.0, 1.0)
