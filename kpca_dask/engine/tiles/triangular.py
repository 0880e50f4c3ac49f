"""Triangular solves with a tiled lower factor on the workers, step by step.

docs/design.md §11: the tiled solve applies M = L^-1 S L^-T to a block of b
vectors by two solves with the factor L of K_mm and one product with G.
Forming L^-1 first would make each solve one step of products, but costs
m^3 / 3 (1 + 3 / T) multiply-adds on the workers: 20 s of an 84 s fit at
m = 16 000 on two one-thread workers, where a product was no faster with it
(0.81 s against 0.79 s with the steps below, a few dozen products a fit). The
inverse is made only where the products are m columns (the dense way's M, the
exact trace).

Forward, L y = v, the tile rows top down (transposed, L^T x = u, bottom up):

    y_k = L_kk^-1 (v_k - sum_{j<k} L_kj y_j)         x_k = L_kk^-T (u_k - sum_{i>k} L_ik^T x_i)

Step k is one task on the worker holding L_kk (its diagonal solve), then one
task per worker holding tiles of column k below it (of row k left of it,
transposed): each adds its tiles' products with y_k into that worker's own
running sums, a chain per worker. Only blocks of t x b vectors move between
workers; the tiles stay where they are, as in
:mod:`kpca_dask.engine.tiles.products`, whose partial results these steps take and
give.
"""

from __future__ import annotations

import dask
import numpy as np
from scipy import linalg

from .products import TiledMatrix, added_parts, tile_times

__all__ = ["solve_lower", "solved_block", "added_products"]


def solve_lower(factor: TiledMatrix, V: list, *, transposed: bool = False) -> list:
    """L^-1 V (L^-T V when ``transposed``) for the lower triangular tiled ``factor``; V and
    the result as lists of partial results (module docstring).

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask.engine.tiles.products import tiled_matrix
    >>> L = np.array([[2.0, 0.0, 0.0], [1.0, 1.0, 0.0], [4.0, 2.0, 4.0]])
    >>> tiles = tiled_matrix(da.from_array(L, chunks=2), None)
    >>> V = tiles.split(L @ np.ones((3, 1)))
    >>> tiles.run(lambda: solve_lower(tiles, V)).ravel().tolist()
    [1.0, 1.0, 1.0]
    >>> V = tiles.split(L.T @ np.ones((3, 1)))
    >>> tiles.run(lambda: solve_lower(tiles, V, transposed=True)).ravel().tolist()
    [1.0, 1.0, 1.0]
    """
    T = len(factor.sizes)
    held = {}  # (i, j) of each lower tile -> (its worker's group, its future)
    for number, (positions, tiles) in enumerate(factor.groups):
        for (i, j), tile in zip(positions, tiles):
            if j <= i:
                held[i, j] = (number, tile)
    given = dask.delayed(added_parts, pure=False)(V)
    sums: dict[int, object] = {}  # a worker's group -> its chain's running sums
    solved = []
    for k in (range(T - 1, -1, -1) if transposed else range(T)):
        block = dask.delayed(solved_block, pure=False)(k, transposed, given, held[k, k][1],
                                                       *sums.values())
        solved.append(block)
        # Forward: the tiles of column k below the diagonal; transposed: row k's left of it.
        below = [(i, j) for (i, j) in held if (j == k and i > k if not transposed
                                                else i == k and j < k)]
        for number in sorted({held[position][0] for position in below}):
            mine = [position for position in below if held[position][0] == number]
            sums[number] = dask.delayed(added_products, pure=False)(
                sums.get(number), block, mine, transposed, *(held[p][1] for p in mine))
    return solved


def solved_block(k: int, transposed: bool, given: dict, diagonal: np.ndarray,
                 *sums: dict) -> dict:
    """{k: the solved row block k}: L_kk^-1 (or L_kk^-T) times row block k of the
    right-hand side less every worker's running sums of it."""
    rest = np.array(given[k], dtype=np.float64)
    for running in sums:
        if k in running:
            rest -= running[k]
    solution = linalg.solve_triangular(diagonal, rest, lower=True, trans=1 if transposed else 0,
                                       check_finite=False)
    return {k: solution}


def added_products(sums: dict | None, block: dict, positions: list, transposed: bool,
                   *tiles: np.ndarray) -> dict:
    """A worker's running sums with its tiles' products with the solved block added: L_ij y_j
    into row block i (L_ij^T x_i into j when ``transposed``). A new dict of new arrays, so
    that a task run again after a lost worker finds its input as it was."""
    result = dict(sums or {})
    for (i, j), tile in zip(positions, tiles):
        row, product = ((j, tile_times(tile, block[i], transposed=True)) if transposed
                        else (i, tile_times(tile, block[j])))
        result[row] = result[row] + product if row in result else product
    return result
