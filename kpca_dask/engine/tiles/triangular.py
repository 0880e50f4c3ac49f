"""Triangular solves with a tiled lower factor on the workers, step by step.

docs/design.md §11: the tiled solve applies M = L^-1 S L^-T to a block of b
vectors by two solves with the factor L of K_mm and one product with G.
Forming L^-1 first would make each solve one step of products, but costs
m^3 / 3 (1 + 3 / T) flops on the workers: 20 s of an 84 s fit (its phases
timed) at m = 16 000 on two one-thread workers, where a product was no faster with it
(0.81 s against 0.79 s with the steps below, a few dozen products a fit). The
inverse is made only where the products are m columns (the dense way's M, the
exact trace).

Forward, L y = v, the tile rows top down (transposed, L^T x = u, bottom up):

    y_k = L_kk^-1 (v_k - sum_{j<k} L_kj y_j)         x_k = L_kk^-T (u_k - sum_{i>k} L_ik^T x_i)

Step k is one task on the worker holding L_kk (its diagonal solve), then, on
each worker holding tiles of column k below it (of row k left of it,
transposed), two tasks: one makes that worker's part of the next step's row
block (its running sums of it and its tile's product with y_k), which is all
the next diagonal task waits for and takes; the other adds the products of
its other tiles into the worker's running sums, a chain per worker. Only
blocks of t x b vectors move between workers; the tiles and the running sums
stay where they are, as in :mod:`kpca_dask.engine.tiles.products`, whose
partial results these steps take and give.
"""

from __future__ import annotations

import dask
import numpy as np
from scipy import linalg

from .products import TiledMatrix, tile_times

__all__ = ["solve_lower"]


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
    order = list(range(T - 1, -1, -1) if transposed else range(T))

    def target(position: tuple[int, int]) -> int:  # the row block a tile's product adds into
        return position[1] if transposed else position[0]

    row = dask.delayed(_row_block, pure=False)
    sums: dict[int, object] = {}  # a worker's group -> its chain's running sums
    touched: dict[int, set] = {}  # a worker's group -> the row blocks its sums hold
    solved, ahead = [], []
    for step, k in enumerate(order):
        # Row block k of each input part, cut where the part is: t x b values move.
        block = dask.delayed(_solved_block, pure=False)(
            k, transposed, held[k, k][1], [row(part, k) for part in V], *ahead)
        solved.append(block)
        if step + 1 == T:
            break
        following = order[step + 1]
        # Forward: the tiles of column k below the diagonal; transposed: row k's left of it.
        mine: dict[int, list] = {}
        for i, j in held:
            if (i == k and j < k) if transposed else (j == k and i > k):
                mine.setdefault(held[i, j][0], []).append((i, j))
        ahead = []
        for number in sorted(set(mine) | {n for n, rows in touched.items() if following in rows}):
            now = [p for p in mine.get(number, []) if target(p) == following]
            later = [p for p in mine.get(number, []) if target(p) != following]
            if now or following in touched.get(number, ()):
                # The next step's row block first, alone: the next diagonal task waits for
                # one tile's product, not for all of this worker's.
                ahead.append(dask.delayed(_next_row_block, pure=False)(
                    sums.get(number), following, block, now, transposed,
                    *(held[p][1] for p in now)))
            if later:
                sums[number] = dask.delayed(_added_products, pure=False)(
                    sums.get(number), block, later, transposed, *(held[p][1] for p in later))
                touched.setdefault(number, set()).update(target(p) for p in later)
    return solved


def _row_block(blocks: dict, k: int) -> np.ndarray | None:
    """Row block k of a partial result (a dict from row block to array), None if it has none.

    Examples
    --------
    >>> _row_block({0: np.zeros(1), 1: np.ones(2)}, 1).tolist()
    [1.0, 1.0]
    """
    return blocks.get(k)


def _solved_block(k: int, transposed: bool, diagonal: np.ndarray, given: list,
                  *sums: np.ndarray) -> dict:
    """{k: the solved row block k}: L_kk^-1 (or L_kk^-T) times row block k of the
    right-hand side (the sum of ``given``, its parts' row blocks) less the workers' sums."""
    parts = [part for part in given if part is not None]
    rest = np.array(parts[0], dtype=np.float64)
    for part in parts[1:]:
        rest += part
    for running in sums:
        rest -= running
    solution = linalg.solve_triangular(diagonal, rest, lower=True, trans=1 if transposed else 0,
                                       check_finite=False)
    return {k: solution}


def _next_row_block(sums: dict | None, row: int, block: dict, positions: list,
                   transposed: bool, *tiles: np.ndarray) -> np.ndarray:
    """A worker's part of row block ``row`` of the next diagonal step: its running sums'
    and its tiles' products with the solved block, the tiles that add into that row."""
    parts = [sums[row]] if sums and row in sums else []
    parts += [tile_times(tile, block[i], transposed=True) if transposed
              else tile_times(tile, block[j]) for (i, j), tile in zip(positions, tiles)]
    total = np.array(parts[0], dtype=np.float64)
    for part in parts[1:]:
        total += part
    return total


def _added_products(sums: dict | None, block: dict, positions: list, transposed: bool,
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
