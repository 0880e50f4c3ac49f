"""The small problem with G, K_mm and its factor as tiles over the workers.

docs/design.md §11. The same problem as :mod:`kpca_dask.engine.solve.nystrom`, its
m x m arrays never on one machine:

- K_mm is made tile by tile on the workers and factorised there
  (:func:`kpca_dask.engine.tiles.cholesky.cholesky_of_tiles`); only the factor's
  lower tiles are kept (the tiles above are zeros, a few bytes each). The
  tiled Cholesky is not pivoted: when a pivot L_jj^2 is at most
  tau = rcond max_j k(z_j, z_j) (or the factorisation fails, which makes its
  pivots NaN), it stops at that tile, and one process's pivoted factor is made
  by columns instead when it keeps at most m / 8 landmarks
  (:mod:`kpca_dask.engine.tiles.low_rank`): the problem is then r x r and
  solved here, the model one process's. Past that, ``rcond`` takes the meaning
  of a jitter: K_mm + tau I is factorised, every landmark kept. A direction
  of K_mm with eigenvalue kappa is then weighted kappa / (kappa + tau): those
  far above tau, which carry the leading components, as before; those within
  tau, which the pivoted factorisation of one process drops, damped to
  nothing.
- M = L^-1 (G - s s^T / n) L^-T is applied to a block of vectors by a
  triangular solve with L^T, a product with G and a solve with L, their tasks
  on the workers that hold the tiles they read (:mod:`kpca_dask.engine.tiles.triangular`,
  :mod:`kpca_dask.engine.tiles.products`); the block Krylov solver
  (:func:`kpca_dask.engine.solve.eigensolver.leading_eigenpairs`) keeps its basis
  here (m x (q + p) x depth words) and solves only the small Rayleigh-Ritz
  problem. L^-1 is formed as tiles (:func:`kpca_dask.engine.tiles.cholesky.tiled_inverse`,
  m^3 / 3 (1 + 3 / T) flops) where M itself is formed (the dense way and the
  exact trace, whose products are m columns), and where the solves' T steps a
  product would cost more than forming it (many small tiles against m:
  :mod:`kpca_dask.engine.tiles.product_way`); L's tiles go then, and the
  products take L^-1's.
- the tiles are G's own (the views of the pass's panels): K_mm and its factor
  are cut the same way, the last row and column of tiles narrower.

The solver has the dense way's cost as its budget (as on one machine,
:data:`kpca_dask.engine.solve.nystrom.DENSE_SOLVE_COLUMNS`): when a flat or
clustered spectrum would take more products, M = L^-1 S L^-T is formed on the
tiles (two tiled products, 2 m^3 flops on the workers), brought to the
client when it fits there (:data:`CLIENT_DENSE_WORDS` m^2 words) and its
leading pairs found by LAPACK; their trace is then exact.

On the tiled factor, trace(M) is the exact trace on the Krylov basis plus a Hutchinson estimate
of the rest (its standard error kept, as on one machine past
:data:`kpca_dask.engine.solve.nystrom.EXACT_TRACE_SHARE`); a float ``n_components``
takes the exact trace, <S, K^-1> = sum(L^-1 S * L^-1), in about 4 m^3 / 3
flops over the tiles. ``n_components=None`` (every eigenpair) needs the dense
eigendecomposition of one machine: it is served when K_mm has low rank (the r x r
problem is solved in the client) and refused otherwise, once the factor shows which.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
from dask.system import CPU_COUNT
from scipy import linalg

from ..._memory import process_room_bytes
from ..._parallel import compute_held, held_client, persist_held
from ...blocks.kernels import kernel_diagonal
from ...blocks.statistics import PassStatistics
from ...errors import InvalidParameterError
from ..graph_values import shared_values
from ..solve.eigensolver import estimate_trace, leading_eigenpairs
from ..solve.landmark_factor import NO_POSITIVE_DIRECTION, LandmarkFactor
from ..solve.nystrom import (
    DENSE_SOLVE_COLUMNS,
    FALLBACK,
    NoveltyTerms,
    SmallProblem,
    Spectrum,
    dense_fits,
    solution_of,
)
from .cholesky import cholesky_of_tiles, tiled_inverse
from .low_rank import landmark_block, most_kept, pivoted_by_columns, solve_low_rank
from .product_way import product_way
from .products import TiledMatrix, tiled_matrix
from .triangular import solve_lower

__all__ = ["solve_tiles", "TiledFactor", "TiledOperator", "landmark_tile", "CLIENT_DENSE_WORDS"]

#: m^2 float64 words the client holds for the dense way on tiles: M gathered from its
#: tiles (the tiles and the joined array at once) and LAPACK's workspace.
CLIENT_DENSE_WORDS = 2.25


@dataclass(frozen=True)
class TiledFactor:
    """L with L L^T = K_mm (+ tau I), or, ``inverted``, X = L^-1, as persisted lower tiles."""

    lower: da.Array  # (size, size), G's chunks; tiles above the diagonal are zeros
    jitter: float  # 0.0, or tau when K_mm + tau I was factorised
    size: int
    tiles: TiledMatrix  # the same tiles as futures, for solves (products) by tiles
    inverted: bool = False

    def whitening(self, V: list) -> list:
        """L^-1 V as a graph of partial results (:mod:`kpca_dask.engine.tiles.products`)."""
        if self.inverted:
            return self.tiles.product(V, lower=True)
        return solve_lower(self.tiles, V)

    def unwhitening(self, V: list) -> list:
        """L^-T V as a graph of partial results."""
        if self.inverted:
            return self.tiles.product(V, lower=True, transposed=True)
        return solve_lower(self.tiles, V, transposed=True)

    def whiten(self, Y: np.ndarray) -> np.ndarray:
        """L^-1 Y for Y (size, b), computed on the workers."""
        return self.tiles.run(lambda: self.whitening(self.tiles.split(Y)))

    def unwhiten(self, V: np.ndarray) -> np.ndarray:
        """L^-T V for V (size, b), computed on the workers."""
        return self.tiles.run(lambda: self.unwhitening(self.tiles.split(V)))

    def invert(self) -> TiledFactor:
        """This factor as X = L^-1's tiles, made now (m^3 / 3 (1 + 3 / T) flops on the
        workers); L's tiles go once nothing holds this one."""
        if self.inverted:
            return self
        X = persist_held(tiled_inverse(self.lower), self.tiles.client)
        return TiledFactor(X, self.jitter, self.size, tiled_matrix(X, self.tiles.client), True)


class TiledOperator:
    """v -> M v with M = L^-1 (G - s s^T / n) L^-T on the tiles: a solve with L^T (a product
    with X^T once inverted), a product with G and a solve with L, one graph a product.

    ``factor`` is replaced by its inverse where M itself is formed, or where its products
    pay (:mod:`kpca_dask.engine.tiles.product_way`; :meth:`inverted`), so
    that L's tiles go before X's are used: the workers then hold G and X, as the memory
    model counts (:data:`kpca_dask.engine.tiles.rows_pass.TILE_ARRAYS`).
    """

    def __init__(self, G: da.Array, stats: PassStatistics, factor: TiledFactor, client):
        self.G, self.tiles = G, tiled_matrix(G, client)
        self.column_sums, self.n_samples = stats.column_sums, stats.n_samples
        self.factor = factor

    def product(self, V: np.ndarray) -> list:
        factor = self.factor
        U = factor.unwhitening(factor.tiles.split(V))
        SU = self.tiles.product(U, column_sums=self.column_sums, n_samples=self.n_samples)
        return factor.whitening(SU)

    def __call__(self, V: np.ndarray) -> np.ndarray:
        return self.factor.tiles.run(self.product, V)

    def scatter(self) -> da.Array:
        """S = G - s s^T / n as a dask array of G's tiles."""
        s = da.from_array(self.column_sums, chunks=(self.G.chunks[0],))
        return self.G - s[:, None] * s[None, :] / self.n_samples

    def inverted(self) -> da.Array:
        """X = L^-1's tiles, the factor replaced by them (L let go)."""
        self.factor = self.factor.invert()
        return self.factor.lower


def solve_tiles(stats: PassStatistics, landmarks, kernel, params: dict, rcond: float,
                n_components, remove_zero_eig: bool = False, *, pass_dtype=np.float64
                ) -> SmallProblem:
    """The small problem of ``stats``, whose G is tiles on a cluster (module docstring)."""
    gram = stats.gram
    m = gram.shape[0]
    client = held_client(gram)
    # G's own tiles (the pass's panels); a G read from a file is cut as the pass cuts it.
    t = gram.chunks[0][0]
    G = persist_held(gram.rechunk((t, t)), client)
    client = held_client(G)
    factor = factor_tiles(landmarks, kernel, params, rcond, G.chunks[0], client)
    if isinstance(factor, LandmarkFactor):  # K_mm of low rank: r x r, solved here
        return solve_low_rank(dataclasses.replace(stats, gram=G), factor, n_components,
                              remove_zero_eig, pass_dtype)
    if n_components is None:
        raise InvalidParameterError(
            f"n_components=None asks for every eigenpair of the landmark problem, a dense "
            f"eigendecomposition on one machine, but the landmarks' kernel matrix keeps more "
            f"than {most_kept(m, process_room_bytes())} of its {m} landmarks here, so its "
            f"m x m arrays stay tiles over the workers (too large for one). Ask for a number "
            f"of components (an int) or a fraction of the variance (a float), or set dask's "
            f"'kpca-dask.landmark-solve' to 'worker' if one worker can hold them.")
    n = stats.n_samples
    apply = TiledOperator(G, stats, factor, client)
    del factor  # the operator's alone: replaced by its inverse, L's tiles go
    # No client: the tiles on a local scheduler, its threads one worker's (the model's
    # step costs are a cluster's round trips, so it leans to L^-1 there: fewer graphs).
    threads = client.nthreads() if client is not None else {"here": CPU_COUNT}
    if product_way(m, len(G.chunks[0]), len(threads), sum(threads.values())) == "inverse":
        apply.inverted()  # many short solve steps: X's products pay for forming it
    mean_feature = apply.factor.whiten((stats.column_sums / n + stats.reference)[:, None])[:, 0]
    budget = (DENSE_SOLVE_COLUMNS * m
              if dense_fits(m, process_room_bytes(), CLIENT_DENSE_WORDS) else None)
    way = "tiles"
    if isinstance(n_components, float):
        spectrum = _spectrum_for_fraction(apply, n_components, m)
    else:
        q = min(int(n_components), m)
        pairs = leading_eigenpairs(apply, m, q, budget=budget)
        if pairs.converged:
            trace, trace_std = estimate_trace(apply, pairs)
            spectrum = Spectrum(pairs.values, apply.factor.unwhiten(pairs.vectors)[:m],
                                pairs.vectors, pairs.residuals, trace, trace_std)
        else:
            spectrum, way = _dense_on_client(apply, q, m), f"tiles, {FALLBACK}"
    solution = solution_of(stats, spectrum, mean_feature, n_components, remove_zero_eig)
    weights = apply.factor.unwhiten(mean_feature[:, None])[:m, 0]
    return SmallProblem(solution, NoveltyTerms(weights, float(mean_feature @ mean_feature)),
                        m, way)


def _dense_on_client(apply: TiledOperator, q: int, m: int) -> Spectrum:
    """The q leading pairs of M = L^-1 S L^-T formed on the tiles and solved here."""
    X, scatter = apply.inverted(), apply.scatter()
    # M = X S X^T (its lower triangle is read: the rounding leaves it a little asymmetric).
    M = _computed((X @ scatter) @ X.T)
    size = M.shape[0]
    trace = float(np.trace(M))
    values, vectors = linalg.eigh(M, subset_by_index=[size - q, size - 1], overwrite_a=True,
                                  lower=True)
    del M
    values, vectors = values[::-1], np.ascontiguousarray(vectors[:, ::-1])
    residuals = np.linalg.norm(apply(vectors) - vectors * values, axis=0)
    return Spectrum(values, apply.factor.unwhiten(vectors)[:m], vectors, residuals, trace, 0.0)


def factor_tiles(landmarks, kernel, params: dict, rcond: float, sizes: tuple[int, ...],
                 client) -> TiledFactor | LandmarkFactor:
    """K_mm's Cholesky factor as tiles of ``sizes`` on ``client``'s cluster; when a pivot is
    at most tau, one process's pivoted factor made by columns if it keeps few landmarks
    (:mod:`kpca_dask.engine.tiles.low_rank`), else K_mm + tau I's as tiles (module
    docstring)."""
    Z = np.asarray(landmarks, dtype=np.float64)
    m = Z.shape[0]
    diagonal = kernel_diagonal(Z, kernel, **params)
    cutoff = rcond * float(diagonal.max(initial=0.0))
    if not cutoff > 0:
        raise InvalidParameterError(NO_POSITIVE_DIRECTION)
    (points,) = shared_values(client, Z)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    ranges = list(zip(offsets[:-1], offsets[1:]))
    for jitter in (0.0, cutoff):
        # Only the lower tiles: the factorisation reads no other.
        K = {(i, j): dask.delayed(landmark_tile, pure=True)(points, kernel, params, rows,
                                                           columns, jitter)
             for i, rows in enumerate(ranges) for j, columns in enumerate(ranges[:i + 1])}
        # Unjittered, every pivot above tau, as one process's potrf is accepted (a tile
        # with one at most tau is NaN from there on, so a factor of low rank fails at its
        # first tile); with the jitter every pivot is at least about sqrt(tau) by
        # construction. NaN pivots: the factor by columns' turn, then the jitter's.
        least = cutoff if jitter == 0.0 else 0.0
        lower = persist_held(cholesky_of_tiles(K, tuple(sizes), least_pivot=least), client)
        pivots = _computed(da.diagonal(lower))
        if np.all(np.isfinite(pivots)) and float(np.min(pivots)) ** 2 > least:
            return TiledFactor(lower, jitter, m, tiled_matrix(lower, client))
        del lower  # a failed factor's tiles go before the next one's are made
        if jitter == 0.0:
            low_rank = pivoted_by_columns(Z, kernel, params, cutoff,
                                          most_kept(m, process_room_bytes()))
            if low_rank is not None:
                return low_rank
    raise InvalidParameterError(
        "The kernel matrix of the landmarks is not positive semi-definite, even with the "
        f"jitter {cutoff:.3g} (rcond times its largest diagonal value), so its factor cannot be "
        "tiled. Use a positive semi-definite kernel, or fewer landmarks so that one worker "
        "solves the problem (which keeps the kernel's positive part).")


def landmark_tile(Z: np.ndarray, kernel, params: dict, rows: tuple[int, int],
                  columns: tuple[int, int], jitter: float = 0.0) -> np.ndarray:
    """The tile ``rows`` x ``columns`` (start, stop) of K_mm + jitter I.

    Examples
    --------
    >>> Z = np.array([[0.0], [1.0], [2.0]])
    >>> landmark_tile(Z, "linear", {}, (1, 3), (1, 3), 0.5).tolist()
    [[1.5, 2.0], [2.0, 4.5]]
    """
    tile = landmark_block(Z, kernel, params, rows, columns)
    if rows == columns and jitter:
        tile[np.diag_indices_from(tile)] += jitter
    return tile


def _spectrum_for_fraction(apply: TiledOperator, eta: float, m: int) -> Spectrum:
    """Leading pairs until their sum reaches ``eta`` of the exact trace, doubling how many."""
    X, S = apply.inverted(), apply.scatter()
    # trace(X S X^T) = <X S, X>: the sum of an elementwise product, tile by tile.
    trace = float(_computed(((X @ S) * X).sum()))
    del X, S
    count, start = 16, None
    while True:
        pairs = leading_eigenpairs(apply, m, min(count, m), start=start)
        if np.sum(pairs.values) >= eta * trace or count >= m:
            return Spectrum(pairs.values, apply.factor.unwhiten(pairs.vectors)[:m],
                            pairs.vectors, pairs.residuals, trace, 0.0)
        count, start = 2 * count, pairs.vectors


def _computed(collection):
    return compute_held(collection)
