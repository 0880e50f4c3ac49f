"""The bootstrap of a Hilbert kernel EOF fitted with landmarks, in one read of the record.

As the real landmark bootstrap (docs/design.md §18): the analytic signal of the
whole record is read once, and each row block's complex kernel rows B = k(Z_b, W)
against the fit's landmarks are added, for every replicate at once, weighted by
how often the replicate drew each row: g_r = Bᴴ c_r, G_r = Bᴴ diag(c_r) B and the
kernel diagonal's weighted sum. Each replicate is then the fit's Hermitian
problem (docs/design.md §16) on its sums; its modes' congruence with the fit's
is the modulus of p_rᴴ K_WW p over ‖p_r‖ ‖p‖ in the kernel's feature space, blind to
the phase.
"""

from __future__ import annotations

import dask
import numpy as np

from .._parallel import capped_blas
from ..blocks.complex_kernels import complex_kernel, kernel_diagonal
from ..blocks.replicate_counts import DrawnCounts
from ..engine.hilbert.complex_solve import landmark_map
from ..model.inputs import method_input
from .exact_bootstrap import ExactReplicates, check_fitted_shape, check_replicate_memory

__all__ = ["hilbert_landmark_replicates"]

#: Replicate sums merged at once in the pass's tree.
_SPLIT_EVERY = 4


def hilbert_landmark_replicates(estimator, X, counts, k: int) -> ExactReplicates:
    """The replicates of ``counts`` (DrawnCounts or a (B, n) array) of a Hilbert kernel EOF
    fitted with landmarks on the record ``X``, summed in one read of it.

    Examples
    --------
    >>> from kpca_dask import HilbertKernelEOF
    >>> t, x = np.arange(80)[:, None], np.arange(6)[None, :]
    >>> X = np.cos(0.3 * x - 0.2 * t) + np.random.default_rng(0).normal(size=(80, 6))
    >>> model = HilbertKernelEOF(2, padding="none", solver="nystrom", n_landmarks=80).fit(X)
    >>> same = hilbert_landmark_replicates(model, X, np.ones((1, 80), dtype=int), 2)
    >>> bool(np.allclose(same.eigenvalues[0, :2], model.eigenvalues_))
    True
    """
    fit = estimator.model_
    rows = method_input(estimator, fit.layout, X)
    n = check_fitted_shape(rows.data.shape, fit.n_samples, fit.n_features)
    W, params = fit.landmarks, fit.kernel_params
    m = W.shape[0]
    n_replicates = counts.n_replicates if isinstance(counts, DrawnCounts) else len(counts)
    need = check_replicate_memory(rows.data, n_replicates, m, word_bytes=16)  # complex128
    # The training record through the fit's own step, centred by the fit's means.
    Z = fit.analytic.rows(rows.data).rechunk({1: -1})
    starts = np.concatenate([[0], np.cumsum(Z.chunks[0])])
    shared = dask.delayed(W, pure=True)
    # Drawn counts travel as their seed; given ones as each block's own columns, so that no
    # task holds the B x n array.
    parts = [dask.delayed(_block_sums, pure=True)(block, shared, params,
                                                  _counts_of(counts, int(a), int(b)))
             for block, a, b in zip(Z.to_delayed().ravel(), starts[:-1], starts[1:])]
    while len(parts) > 1:
        parts = [dask.delayed(_added, pure=True)(*parts[i:i + _SPLIT_EVERY])
                 for i in range(0, len(parts), _SPLIT_EVERY)]
    with capped_blas(Z):
        g, G, diagonal = dask.compute(parts[0])[0]
    K_WW = complex_kernel(W, W, **params)
    T = landmark_map(K_WW, estimator.rcond)
    fitted = np.asarray(fit.solution.projection)[:, :k]
    KP = K_WW @ fitted
    fit_norms = np.sqrt(np.clip(np.einsum("mk,mk->k", fitted.conj(), KP).real, 0, None))
    eigenvalues, traces = np.zeros((n_replicates, k + 1)), np.zeros(n_replicates)
    congruence = np.zeros((n_replicates, k))
    for r in range(n_replicates):
        covariance = T.conj().T @ (G[r] - np.outer(g[r], g[r].conj()) / n) @ T / (n - 1)
        values, vectors = np.linalg.eigh((covariance + covariance.conj().T) / 2)
        values, vectors = values[::-1][:k + 1], vectors[:, ::-1][:, :k + 1]
        eigenvalues[r, :values.size] = np.clip(values, 0.0, None) * (n - 1)
        mean_norm = float(np.real(g[r].conj() @ T @ T.conj().T @ g[r])) / n
        traces[r] = diagonal[r] - mean_norm
        P = T @ vectors[:, :k]
        own = np.sqrt(np.clip(np.einsum("mk,mk->k", P.conj(), K_WW @ P).real, 0, None))
        with np.errstate(divide="ignore", invalid="ignore"):
            cosine = np.abs(np.einsum("mk,mk->k", P.conj(), KP)) / (own * fit_norms)
        congruence[r] = np.clip(np.nan_to_num(cosine), 0.0, 1.0)
    return ExactReplicates(eigenvalues, traces, congruence, need, m)


def _counts_of(counts, start: int, stop: int):
    """What a block's task is given of the counts: the drawn counts' seed and its rows, or
    the block's own columns of given counts."""
    if isinstance(counts, DrawnCounts):
        return counts, start, stop
    return np.ascontiguousarray(np.asarray(counts)[:, start:stop]), None, None


def _block_sums(Z: np.ndarray, W: np.ndarray, params: dict, block_counts: tuple):
    """One row block's weighted sums for every replicate: g (R, m), G (R, m, m) and the
    kernel diagonal's sum (R,)."""
    counts, start, stop = block_counts
    c = (counts.block(start, stop) if start is not None else counts).astype(np.float64)
    B = complex_kernel(Z, W, **params)
    g = c @ B.conj()  # Bᴴ c_r for every replicate
    G = np.einsum("ri,im,il->rml", c, B.conj(), B, optimize=True)
    diagonal = c @ np.real(kernel_diagonal(Z, **params))
    return g, G, diagonal


def _added(*parts):
    return tuple(sum(values) for values in zip(*parts))
