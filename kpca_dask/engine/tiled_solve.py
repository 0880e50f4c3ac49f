"""The small problem with G, K_mm and its factor as tiles over the workers.

docs/design.md §11. The same problem as :mod:`kpca_dask.engine.solve`, its
m x m arrays never on one machine:

- K_mm is made tile by tile on the workers and factorised there
  (:func:`kpca_dask.engine.tiled_cholesky.tiled_cholesky`); only the factor's
  lower tiles are kept (the tiles above are zeros, a few bytes each). The
  tiled Cholesky is not pivoted, so ``rcond`` takes the meaning of a jitter
  here: when a pivot L_jj^2 is at most tau = rcond max_j k(z_j, z_j) (or the
  factorisation fails, which makes its pivots NaN), K_mm + tau I is
  factorised instead, every landmark kept. A direction
  of K_mm with eigenvalue kappa is then weighted kappa / (kappa + tau): those
  far above tau, which carry the leading components, as before; those within
  tau, which the pivoted factorisation of one process drops, damped to
  nothing.
- M = L^-1 (G - s s^T / n) L^-T is applied to a block of vectors by two
  ``dask.array.linalg.solve_triangular`` and a dask matmul with G's tiles;
  the block Krylov solver (:func:`kpca_dask.engine.eigensolver.leading_eigenpairs`)
  keeps its basis here (m x (q + p) x depth words) and solves only the
  small Rayleigh-Ritz problem.
- the tiled Cholesky needs tiles of one size: the arrays are padded to T t with
  an identity block in K_mm and zeros in G, which adds eigenvalues 0 and
  changes nothing else.

trace(M) is the exact trace on the Krylov basis plus a Hutchinson estimate
of the rest (its standard error kept, as on one machine past
:data:`kpca_dask.engine.solve.EXACT_TRACE_SHARE`); a float ``n_components``
takes the exact trace, <S, K^-1> = sum(L^-1 S * L^-1), in about 4 m^3 / 3
flops over the tiles. ``n_components=None`` (every eigenpair) is refused: it
needs the dense eigendecomposition of one machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np

from .._parallel import compute_held, held_client, persist_held
from ..blocks.kernels import kernel_diagonal, pairwise_kernel
from ..blocks.statistics import PassStatistics
from ..errors import InvalidParameterError
from .eigensolver import estimate_trace, leading_eigenpairs
from .graph_values import shared_values
from .landmark_factor import NO_POSITIVE_DIRECTION
from .solve import NoveltyTerms, SmallProblem, Spectrum, solution_of
from .tiled_cholesky import tiled_cholesky

__all__ = ["solve_tiles", "TiledFactor", "landmark_tile"]


@dataclass(frozen=True)
class TiledFactor:
    """L with L L^T = K_mm (+ tau I), padded to ``size``, as persisted lower tiles."""

    lower: da.Array  # (size, size), chunks t; tiles above the diagonal are zeros
    jitter: float  # 0.0, or tau when K_mm + tau I was factorised
    size: int

    def whiten(self, Y: np.ndarray) -> np.ndarray:
        """L^-1 Y for Y (size, b), computed on the workers."""
        return _computed(da.linalg.solve_triangular(self.lower, _tiled(Y, self.lower),
                                                    lower=True))

    def unwhiten(self, V: np.ndarray) -> np.ndarray:
        """L^-T V for V (size, b), computed on the workers."""
        return _computed(da.linalg.solve_triangular(self.lower.T, _tiled(V, self.lower),
                                                    lower=False))


def solve_tiles(stats: PassStatistics, landmarks, kernel, params: dict, rcond: float,
                n_components, remove_zero_eig: bool = False, *, pass_dtype=np.float64
                ) -> SmallProblem:
    """The small problem of ``stats``, whose G is tiles on a cluster (module docstring)."""
    if n_components is None:
        raise InvalidParameterError(
            "n_components=None asks for every eigenpair of the landmark problem, a dense "
            "eigendecomposition on one machine, but its m x m arrays are tiles over the "
            "workers here (too large for one). Ask for a number of components (an int) or a "
            "fraction of the variance (a float), or set dask's 'kpca-dask.landmark-solve' to "
            "'worker' if one worker can hold them.")
    gram = stats.gram
    t, m = gram.chunks[0][0], gram.shape[0]
    size = math.ceil(m / t) * t
    client = held_client(gram)
    G = persist_held(da.pad(gram, ((0, size - m), (0, size - m))).rechunk(t), client)
    factor = factor_tiles(landmarks, kernel, params, rcond, t, size, client)
    n = stats.n_samples
    s = np.pad(stats.column_sums, (0, size - m))
    s_tiled = da.from_array(s, chunks=t)

    def apply(V: np.ndarray) -> np.ndarray:
        U = da.linalg.solve_triangular(factor.lower.T, _tiled(V, G), lower=False)
        SU = G @ U - s_tiled[:, None] * (s_tiled @ U)[None, :] / n
        return _computed(da.linalg.solve_triangular(factor.lower, SU, lower=True))

    mean = np.pad(stats.column_sums / n + stats.reference, (0, size - m))
    mean_feature = factor.whiten(mean[:, None])[:, 0]
    if isinstance(n_components, float):
        spectrum = _spectrum_for_fraction(apply, factor, G, s_tiled, n, n_components, m)
    else:
        pairs = leading_eigenpairs(apply, size, min(int(n_components), m))
        trace, trace_std = estimate_trace(apply, pairs)
        spectrum = Spectrum(pairs.values, factor.unwhiten(pairs.vectors)[:m], pairs.vectors,
                            pairs.residuals, trace, trace_std)
    solution = solution_of(stats, spectrum, mean_feature, n_components, remove_zero_eig)
    weights = factor.unwhiten(mean_feature[:, None])[:m, 0]
    return SmallProblem(solution, NoveltyTerms(weights, float(mean_feature @ mean_feature)),
                        m, "tiles")


def factor_tiles(landmarks, kernel, params: dict, rcond: float, t: int, size: int,
                 client=None) -> TiledFactor:
    """K_mm's Cholesky factor as tiles on ``client``'s cluster (None: the default
    scheduler); K_mm + tau I when a pivot is at most tau (module docstring)."""
    Z = np.asarray(landmarks, dtype=np.float64)
    m = Z.shape[0]
    diagonal = kernel_diagonal(Z, kernel, **params)
    cutoff = rcond * float(diagonal.max(initial=0.0))
    if not cutoff > 0:
        raise InvalidParameterError(NO_POSITIVE_DIRECTION)
    (points,) = shared_values(client, Z)
    T = size // t
    tiles = [[da.from_delayed(dask.delayed(landmark_tile, pure=True)(
        points, kernel, params, i * t, j * t, t, m), (t, t), np.float64,
        meta=np.empty((0, 0), np.float64)) for j in range(T)] for i in range(T)]
    K = da.block(tiles)
    for jitter in (0.0, cutoff):
        lower = persist_held(tiled_cholesky(
            K if jitter == 0.0 else K + jitter * _unpadded_eye(size, m, t)), client)
        pivots = _computed(da.diagonal(lower))[:m]
        # NaN pivots: not positive definite to rounding, the jitter's turn. Unjittered,
        # every pivot above tau, as one process's potrf is accepted; with the jitter every
        # pivot is at least about sqrt(tau) by construction.
        least = cutoff if jitter == 0.0 else 0.0
        if np.all(np.isfinite(pivots)) and float(np.min(pivots)) ** 2 > least:
            return TiledFactor(lower, jitter, size)
    raise InvalidParameterError(
        "The kernel matrix of the landmarks is not positive semi-definite, even with the "
        f"jitter {cutoff:.3g} (rcond times its largest diagonal value), so its factor cannot be "
        "tiled. Use a positive semi-definite kernel, or fewer landmarks so that one worker "
        "solves the problem (which keeps the kernel's positive part).")


def landmark_tile(Z: np.ndarray, kernel, params: dict, row: int, column: int, t: int,
                  m: int) -> np.ndarray:
    """Tile (row, column) of K_mm padded to a multiple of t: the identity past m."""
    tile = np.zeros((t, t))
    rows, columns = slice(row, min(m, row + t)), slice(column, min(m, column + t))
    if rows.start < m and columns.start < m:
        tile[: rows.stop - row, : columns.stop - column] = pairwise_kernel(
            Z[rows], Z[columns], kernel, **params)
    if row == column:
        padded = np.arange(max(0, m - row), t)
        tile[padded, padded] = 1.0
    return tile


def _spectrum_for_fraction(apply, factor: TiledFactor, G, s_tiled, n: int, eta: float,
                           m: int) -> Spectrum:
    """Leading pairs until their sum reaches ``eta`` of the exact trace, doubling how many."""
    L = factor.lower
    S = G - s_tiled[:, None] * s_tiled[None, :] / n
    inverse = da.linalg.solve_triangular(L, da.eye(factor.size, chunks=L.chunks[0][0]),
                                         lower=True)
    trace = float(_computed((da.linalg.solve_triangular(L, S, lower=True) * inverse).sum()))
    count, start = 16, None
    while True:
        pairs = leading_eigenpairs(apply, factor.size, min(count, m), start=start)
        if np.sum(pairs.values) >= eta * trace or count >= m:
            return Spectrum(pairs.values, factor.unwhiten(pairs.vectors)[:m], pairs.vectors,
                            pairs.residuals, trace, 0.0)
        count, start = 2 * count, pairs.vectors


def _unpadded_eye(size: int, m: int, t: int) -> da.Array:
    return da.from_array(np.pad(np.ones(m), (0, size - m)), chunks=t)[:, None] * da.eye(
        size, chunks=t)


def _tiled(V: np.ndarray, like: da.Array) -> da.Array:
    """A block of vectors (size, b) cut into the row tiles of ``like``."""
    return da.from_array(np.asarray(V, dtype=np.float64), chunks=(like.chunks[0], V.shape[1]))


def _computed(collection):
    return compute_held(collection)
