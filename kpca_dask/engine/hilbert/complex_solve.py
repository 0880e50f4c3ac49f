"""The complex landmark pass and its Hermitian reduced problem (docs/design.md §16).

With m landmark rows W of the analytic signal, the pass reads each row block
Z_b once and accumulates, in complex128,

* g = Σ_b B_bᴴ1 and G = Σ_b B_bᴴB_b for B_b = k(Z_b, W) (n_b x m),
* C = Σ_b Z_bᴴB_b (p x m), from which the maps follow without a second pass,
* Σ_i k(z_i, z_i) and Σ_i ‖z_i‖² (the totals the variances are shares of).

With K_WW = Q diag(d) Qᴴ (d > rcond · max d kept) and T = Q d^{-1/2}, the
Nyström features F = B T have F Fᴴ = B K_WW⁺ Bᴴ, which is the kernel matrix
when every row is a landmark. The centred covariance of F is the Hermitian
r x r matrix Tᴴ(G − g gᴴ/n)T/(n − 1) = V Λ Vᴴ; the scores of rows are
Y = (B − 1 b̄) T V with b̄ = gᴴ/n, their variances Λ (xeofs' explained
variances with a linear kernel). The maps are the regression of the analytic
field on each score, Zᴴy/‖y‖², computed from C (the analytic signal has zero
mean, so Zᴴ1 = 0): with a linear kernel, xeofs' unit-norm components.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np

from ..._memory import SizedByFields
from ...blocks.complex_kernels import complex_kernel, kernel_diagonal
from ...errors import TooFewComponentsError

__all__ = ["ComplexMoments", "ComplexSolution", "moments_of", "solve_moments", "landmark_map",
           "complex_scores", "phase_turn"]


@dataclass(frozen=True)
class ComplexMoments(SizedByFields):
    """What the pass accumulates (see the module): n rows, g (m,), G (m x m), C (p x m),
    the kernel's diagonal sum and the analytic signal's squared norm."""

    n: int
    g: np.ndarray
    G: np.ndarray
    cross: np.ndarray
    diagonal: float
    squared_norm: float


@dataclass(frozen=True)
class ComplexSolution:
    """The Hermitian problem solved: the q leading modes.

    ``projection`` (m x q) and ``centre`` (m,) make scores (B − centre) @ projection;
    ``explained_variance`` (q,) their variances; ``loadings`` (q x p) the
    covariance of the analytic field with each score scaled to unit variance;
    ``total_variance`` the centred kernel's trace / (n − 1) (exact diagonal, the
    mean's norm from the landmarks), ``field_total_variance`` Σ‖z_i‖² / (n − 1).
    """

    projection: np.ndarray
    centre: np.ndarray
    explained_variance: np.ndarray
    loadings: np.ndarray
    total_variance: float
    field_total_variance: float
    n_samples: int

    @property
    def components(self) -> np.ndarray:
        """The maps of unit norm (q x p): for a linear kernel, xeofs' components."""
        norms = np.linalg.norm(self.loadings, axis=1)
        return self.loadings / np.where(norms > 0, norms, 1.0)[:, None]


def _block_moments(Z: np.ndarray, W: np.ndarray, params: dict) -> tuple:
    B = complex_kernel(Z, W, **params)
    return (Z.shape[0], B.sum(axis=0).conj(), B.conj().T @ B, Z.conj().T @ B,
            float(kernel_diagonal(Z, **params).sum()), float(np.sum(np.abs(Z) ** 2)))


def _summed(*parts: tuple) -> tuple:
    return tuple(sum(values) for values in zip(*parts))


def moments_of(Z: da.Array, W: np.ndarray, params: dict, split_every: int = 8):
    """The pass over the row blocks of ``Z`` (one feature chunk), lazily: a Delayed of the
    moments' tuple, summed as a tree.

    Examples
    --------
    >>> Z = da.from_array(np.exp(1j * np.arange(12.0)).reshape(6, 2), chunks=(3, 2))
    >>> moments = dask.compute(moments_of(Z, Z[:2].compute(), {"kernel": "linear"}))[0]
    >>> moments[0], moments[2].shape
    (6, (2, 2))
    """
    Z = Z.rechunk({1: -1})
    shared = dask.delayed(W, pure=True)  # one task holds the landmarks, not every block's
    parts = [dask.delayed(_block_moments, pure=True)(block, shared, params)
             for block in Z.to_delayed().ravel()]
    while len(parts) > 1:
        parts = [dask.delayed(_summed, pure=True)(*parts[i:i + split_every])
                 for i in range(0, len(parts), split_every)]
    return parts[0]


def landmark_map(K: np.ndarray, rcond: float | None) -> np.ndarray:
    """T = Q d^{-1/2} over the eigenvalues d of K_WW above rcond · max d."""
    d, Q = np.linalg.eigh((K + K.conj().T) / 2)
    if rcond is None:
        rcond = K.shape[0] * np.finfo(np.float64).eps * 10
    kept = d > rcond * max(float(d.max()), 0.0)
    return Q[:, kept] / np.sqrt(d[kept])


def solve_moments(K_WW: np.ndarray, moments: ComplexMoments, n_components: int,
                  rcond: float | None = None) -> ComplexSolution:
    """The q leading modes of the complex Nyström problem (see the module).

    Examples
    --------
    >>> Z = np.exp(1j * np.arange(12.0) ** 2).reshape(6, 2)
    >>> Z = Z - Z.mean(axis=0)
    >>> B = complex_kernel(Z, Z, "linear")
    >>> moments = ComplexMoments(6, B.sum(0).conj(), B.conj().T @ B, Z.conj().T @ B,
    ...                          float(np.sum(np.abs(Z) ** 2)), float(np.sum(np.abs(Z) ** 2)))
    >>> solution = solve_moments(B, moments, 2)
    >>> bool(np.isclose(solution.explained_variance.sum(), solution.total_variance))
    True
    """
    n = moments.n
    T = landmark_map(K_WW, rcond)
    g = moments.g
    covariance = T.conj().T @ (moments.G - np.outer(g, g.conj()) / n) @ T / (n - 1)
    values, vectors = np.linalg.eigh((covariance + covariance.conj().T) / 2)
    order = np.argsort(values)[::-1][:n_components]
    values, vectors = values[order], vectors[:, order]
    positive = values > max(float(values[0]) if values.size else 0.0, 0.0) * 1e-12
    if values.size < n_components or not positive.all():
        raise TooFewComponentsError(
            f"n_components={n_components} asks for more modes than the kernel has positive "
            f"eigenvalues ({int(positive.sum())}); ask for fewer or add landmarks.")
    projection = T @ vectors
    loadings = (moments.cross @ projection).T / ((n - 1) * np.sqrt(values))[:, None]
    turn = phase_turn(loadings)
    mean_norm = float(np.real(g.conj() @ T @ T.conj().T @ g)) / n
    return ComplexSolution(projection * turn, g.conj() / n, values, loadings * turn[:, None],
                           (moments.diagonal - mean_norm) / (n - 1),
                           moments.squared_norm / (n - 1), n)


def phase_turn(loadings: np.ndarray) -> np.ndarray:
    """The unit phase of each mode (row of ``loadings``) that makes its map's largest entry
    real and positive: a mode's phase is free, this fixes it.

    Examples
    --------
    >>> turn = phase_turn(np.array([[0.1, -2.0j]]))
    >>> bool(np.isclose(turn[0] * -2.0j, 2.0))
    True
    """
    peak = loadings[np.arange(loadings.shape[0]), np.argmax(np.abs(loadings), axis=1)]
    return np.where(np.abs(peak) > 0, np.abs(peak) / np.where(peak == 0, 1, peak), 1.0)


def _score_block(Z: np.ndarray, W: np.ndarray, centre: np.ndarray, projection: np.ndarray,
                 params: dict) -> np.ndarray:
    return (complex_kernel(Z, W, **params) - centre) @ projection


def complex_scores(Z: da.Array, W: np.ndarray, solution: ComplexSolution,
                   params: dict) -> da.Array:
    """The complex scores of the rows ``Z`` (n x q), lazily, block by block of rows.

    Examples
    --------
    >>> Z = np.exp(1j * np.arange(12.0)).reshape(6, 2)
    >>> Z = Z - Z.mean(axis=0)
    >>> B = complex_kernel(Z, Z, "linear")
    >>> moments = ComplexMoments(6, B.sum(0).conj(), B.conj().T @ B, Z.conj().T @ B, 1.0, 1.0)
    >>> solution = solve_moments(B, moments, 1)
    >>> complex_scores(da.from_array(Z, chunks=3), Z, solution, {"kernel": "linear"}).shape
    (6, 1)
    """
    q = solution.projection.shape[1]
    # One chunk each, broadcast to every row block: the graph holds them once.
    W, centre, projection = (da.from_array(np.atleast_2d(a), chunks=-1, name=False)
                             for a in (W, solution.centre, solution.projection))
    return Z.rechunk({1: -1}).map_blocks(
        _score_block, W, centre, projection, params,
        chunks=(Z.chunks[0], (q,)), dtype=np.complex128, name="kpca-complex-scores")
