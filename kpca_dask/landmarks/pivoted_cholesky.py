"""Randomly pivoted Cholesky (RPCholesky) on an in-memory pool of rows.

RPCholesky (Chen, Epperly, Tropp & Webber, arXiv 2207.06503) builds a
partial Cholesky factor F (N x k) of the kernel matrix A of N points,
K ~= F F^T, choosing each pivot at random in proportion to the diagonal of
the residual A - F F^T. The Nyström approximation on the pivots has an
expected trace error within a small factor of the best rank-k one, at
O(N k^2) cost and N + N k kernel evaluations.

Pivots are drawn in blocks as in accelerated RPCholesky (Epperly, Tropp &
Webber, arXiv 2410.03969): b candidates are drawn i.i.d. from the residual
diagonal d, and candidate j is kept with probability r_j / d_j, where r_j is
its residual diagonal after eliminating the candidates kept before it in the
block. This rejection step makes every kept pivot follow the sequential
RPCholesky distribution exactly (duplicates and near-duplicates are rejected
for free), while the expensive update of F is one N x k x b GEMM per block.

Maintenance note: the residual diagonal is updated by subtraction,
d <- d - rowsum(F_new^2), which can drift below zero by rounding; it is
clipped at 0 and the pivots' own entries are set to 0 exactly. When the
residual trace falls below ``rtol`` times the initial trace the kernel
matrix of the pool is numerically exhausted (its rank is reached) and the
factorisation stops with fewer pivots than asked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ..blocks.kernels import kernel_diagonal, pairwise_kernel
from ..blocks.sparse_rows import is_sparse

__all__ = ["PivotedCholesky", "rpcholesky"]

#: Candidates drawn per block of pivots.
PIVOT_BLOCK = 100
#: Relative residual trace at which the pool counts as exhausted.
RESIDUAL_RTOL = 1e-12


@dataclass(frozen=True)
class PivotedCholesky:
    """Pivots in the order chosen and the relative trace error on the pool."""

    pivots: np.ndarray  # row numbers in the pool, in pivot order
    factor: np.ndarray  # F (N x k), A ~= F F^T on the pool
    trace_error: float  # trace(A - F F^T) / trace(A)


def rpcholesky(
    pool: np.ndarray, n_pivots: int, *, rng: np.random.Generator, kernel="rbf",
    params: dict | None = None, block_size: int = PIVOT_BLOCK, rtol: float = RESIDUAL_RTOL,
) -> PivotedCholesky:
    """Block RPCholesky with rejection sampling on the kernel matrix of ``pool``.

    Parameters
    ----------
    pool : ndarray of shape (N, p)
    n_pivots : int
        Pivots wanted; fewer come back when the residual vanishes first.
    rng : numpy Generator
    kernel, params
        A kernel of :mod:`kpca_dask.blocks.kernels` and its resolved parameters.
    block_size : int, default=100
        Candidates drawn per block; 1 gives plain sequential RPCholesky.
    rtol : float, default=1e-12
        Stop when the residual trace is at most ``rtol`` times the initial trace.

    Examples
    --------
    >>> pool = np.random.default_rng(0).normal(size=(200, 2))
    >>> result = rpcholesky(pool, 20, rng=np.random.default_rng(0), params={"gamma": 0.5})
    >>> result.pivots.shape, bool(result.trace_error < 0.05)
    ((20,), True)
    """
    params = params or {}
    pool = pool.tocsr().astype(np.float64) if is_sparse(pool) else np.asarray(pool, np.float64)
    N = pool.shape[0]
    n_pivots = min(n_pivots, N)
    residual = np.maximum(kernel_diagonal(pool, kernel, **params).astype(np.float64), 0.0)
    initial_trace = float(residual.sum())
    factor = np.zeros((N, n_pivots))
    pivots: list[int] = []
    fruitless_blocks = 0
    while len(pivots) < n_pivots and fruitless_blocks < 3:
        remaining = float(residual.sum())
        if not remaining > rtol * initial_trace:
            break
        k = len(pivots)
        want = min(block_size, n_pivots - k)
        candidates = _draw(residual, want, rng)
        kept = candidates[_accept(pool, candidates, factor[:, :k], residual, rng, kernel, params)]
        if kept.size == 0:  # only when the residual left is rounding noise
            fruitless_blocks += 1
            continue
        fruitless_blocks = 0
        # Residual kernel columns of the kept pivots: A(:, T) - F F(T, :)^T.
        panel = pairwise_kernel(pool, pool[kept], kernel, **params).astype(np.float64)
        panel -= factor[:, :k] @ factor[kept, :k].T
        new_columns = _panel_factor(panel, kept)
        kept = kept[: new_columns.shape[1]]
        _add_pivots(factor, residual, k, kept, new_columns)
        pivots.extend(kept.tolist())
    k = len(pivots)
    trace_error = float(residual.sum()) / initial_trace if initial_trace > 0 else 0.0
    return PivotedCholesky(np.asarray(pivots, dtype=np.intp), factor[:, :k], trace_error)


def _add_pivots(factor: np.ndarray, residual: np.ndarray, k: int, kept: np.ndarray,
                new_columns: np.ndarray) -> None:
    """Put the kept pivots' columns after the first ``k`` and take them off the residual."""
    factor[:, k : k + kept.size] = new_columns
    residual -= np.einsum("ij,ij->i", new_columns, new_columns)
    np.maximum(residual, 0.0, out=residual)  # rounding must not make a residual negative
    residual[kept] = 0.0


def _draw(weights, size, rng):
    """``size`` i.i.d. indices with probability proportional to ``weights``."""
    cumulative = np.cumsum(weights)
    draws = np.searchsorted(cumulative, rng.random(size) * cumulative[-1], side="right")
    return np.minimum(draws, weights.size - 1)


def _accept(pool, candidates, factor, residual, rng, kernel, params):
    """Rejection step: positions of the candidates kept, in the order drawn."""
    block = pairwise_kernel(pool[candidates], pool[candidates], kernel, **params)
    block = block.astype(np.float64) - factor[candidates] @ factor[candidates].T
    stale = residual[candidates]
    uniforms = rng.random(candidates.size)
    # A pivot whose residual is at rounding level would make the Cholesky of
    # the block singular: demand a residual clearly above float64 noise.
    floor = 1e3 * np.finfo(np.float64).eps * max(float(residual.max()), 0.0)
    kept = []
    for j in range(candidates.size):
        r = block[j, j]
        if r > floor and uniforms[j] * stale[j] < r:
            kept.append(j)
            # Eliminate pivot j from the rest of the block (one Schur complement step).
            column = block[j + 1 :, j] / np.sqrt(r)
            block[j + 1 :, j + 1 :] -= np.outer(column, column)
    return np.asarray(kept, dtype=np.intp)


def _panel_factor(panel, kept):
    """New columns F_new = panel L^{-T} with L L^T = panel[kept] (the pivots' block).

    If rounding makes the pivots' block fail to factor, fall back to the
    leading pivot alone (its residual is positive by construction).
    """
    pivot_block = panel[kept]
    pivot_block = 0.5 * (pivot_block + pivot_block.T)
    try:
        lower = linalg.cholesky(pivot_block, lower=True)
    except linalg.LinAlgError:
        lower = np.sqrt(pivot_block[:1, :1])
        panel = panel[:, :1]
    return linalg.solve_triangular(lower, panel.T, lower=True).T
