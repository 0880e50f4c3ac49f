"""Products of tiled m x m matrices on the workers with a block of vectors from here.

docs/design.md §11: the tiled solve applies M = L^-1 S L^-T to a block of b
vectors a dozen times or more, each product a round trip to the cluster and a
read of every tile. Here each product is one graph, sent at once, with one
task per worker and step: the task takes the tiles that worker holds (so the
scheduler runs it there, where most of its input bytes are) and the vector
blocks it needs, and returns its partial sums of the result's row blocks.
Only blocks of t x b vectors move between workers; the next step's tasks add
the partial sums they need themselves.

``dask.array``'s graphs for the same products (``linalg.solve_triangular``
and ``@``) read a whole tile row in one task, which moves tiles between workers
on every product (0.23 s a product at m = 5000 in tiles of 1667 on two
workers); a task per tile costs the scheduler and the workers a few ms each,
tens of them a product. Which worker holds which tile is read once, when the
matrix is wrapped: after a lost worker the tiles are made again elsewhere,
and the tasks then fetch them (slower, still right).
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import CancelledError
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np

from ..._parallel import HELD_RETRIES

__all__ = ["TiledMatrix", "tiled_matrix", "tile_times"]


@dataclass(frozen=True)
class TiledMatrix:
    """A persisted, tiled square matrix as its tiles' futures, grouped by worker.

    ``groups`` holds, for each worker, the (i, j) of the tiles it holds and their
    futures. A product's result is a list of partial results (one per group, a
    dict from row block to its partial sum), which :meth:`run` adds up here and the
    methods here take as their input.
    """

    client: object
    groups: tuple  # ((positions, futures), ...): a worker's tiles
    sizes: tuple[int, ...]

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)

    def split(self, V: np.ndarray) -> list:
        """V (m, b) as a product's result: one part holding all its row blocks."""
        offsets = self.offsets
        return [{i: np.ascontiguousarray(V[offsets[i]:offsets[i + 1]])
                 for i in range(len(self.sizes))}]

    def product(self, V: list, *, lower: bool = False, transposed: bool = False,
                column_sums: np.ndarray | None = None, n_samples: int = 1) -> list:
        """A V (or A^T V; with ``lower``, A's lower triangle only), V and the result as
        lists of partial results; less ``s (s^T V) / n`` when ``column_sums`` s is given:
        the centred scatter's product, S = G - s s^T / n.

        (A symmetric A read from its lower tiles alone, each for A_ij V_j and A_ij^T V_i,
        reads half the bytes but was no faster: 1.3-1.6 s against 1.2-1.5 s a product at
        m = 16 000 in tiles of 1600 on four workers.)"""
        correction = None if column_sums is None else (column_sums, n_samples, self.offsets)
        parts = []
        for number, (positions, tiles) in enumerate(self.groups):
            kept = [(i, j) for i, j in positions if not lower or j <= i]
            chosen = [tile for (i, j), tile in zip(positions, tiles) if not lower or j <= i]
            if not kept and not (correction is not None and number == 0):
                continue
            parts.append(dask.delayed(_group_product, pure=False)(
                kept, transposed, correction if number == 0 else None, V, *chosen))
        return parts

    def run(self, product, *args) -> np.ndarray:
        """``product(*args)`` (a chain of this module's products), its partial results
        added up here and joined; sent again when a lost worker's tiles were being
        recomputed (as :func:`kpca_dask._parallel.compute_held`)."""
        if self.client is None:  # the default scheduler (tiles in this process)
            return self._joined(dask.compute(product(*args))[0])
        from distributed import futures_of, wait

        for attempt in range(HELD_RETRIES + 1):
            try:
                return self._joined(self.client.gather(self.client.compute(product(*args))))
            except CancelledError:
                if attempt == HELD_RETRIES:
                    raise
                wait(futures_of([tiles for _, tiles in self.groups]))
        raise AssertionError("unreachable")  # pragma: no cover

    def _joined(self, parts: list) -> np.ndarray:
        blocks = _added_parts(parts)
        return np.concatenate([blocks[i] for i in range(len(self.sizes))], axis=0)


def tiled_matrix(array: da.Array, client) -> TiledMatrix:
    """The tiles of a persisted square dask ``array`` on ``client``, as futures grouped by
    the worker that holds them (``client`` None: the array's tiles as one group, computed
    by the default scheduler).

    Examples
    --------
    >>> from distributed import Client
    >>> with Client(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     A = client.persist(da.from_array(np.tril(np.ones((3, 3))), chunks=2))
    ...     L = tiled_matrix(A, client)
    ...     V = L.split(np.ones((3, 1)))
    ...     L.run(lambda: L.product(V, lower=True, transposed=True)).ravel().tolist()
    [3.0, 2.0, 1.0]
    """
    if client is None:
        tiles = array.to_delayed()
        positions = tuple((i, j) for i in range(tiles.shape[0]) for j in range(tiles.shape[1]))
        return TiledMatrix(None, ((positions, tuple(tiles[i, j] for i, j in positions)),),
                           tuple(array.chunks[0]))
    from distributed import futures_of, wait

    futures = {future.key: future for future in futures_of(array)}
    wait(list(futures.values()))
    holders = client.who_has(list(futures.values()))
    grouped: dict[str, list] = defaultdict(list)
    for i, row in enumerate(array.__dask_keys__()):
        for j, key in enumerate(row):
            where = holders.get(key) or ("",)
            grouped[sorted(where)[0]].append(((i, j), futures[key]))
    groups = tuple((tuple(position for position, _ in entries),
                    tuple(future for _, future in entries))
                   for _, entries in sorted(grouped.items()))
    return TiledMatrix(client, groups, tuple(array.chunks[0]))


def _added_parts(parts: list) -> dict:
    """Partial results (dicts from row block to array) added up into one.

    Examples
    --------
    >>> _added_parts([{0: np.ones(2)}, {0: np.ones(2), 1: np.zeros(1)}])
    {0: array([2., 2.]), 1: array([0.])}
    """
    total: dict = {}
    for part in parts:
        for block, value in part.items():
            if block in total:
                total[block] = total[block] + value
            else:
                total[block] = np.array(value, dtype=np.float64)
    return total


def tile_times(tile: np.ndarray, V: np.ndarray, *, transposed: bool = False) -> np.ndarray:
    """``tile @ V`` (``tile.T @ V`` when ``transposed``) for a block V of a few columns, as
    the transpose of V^T tile^T (of V^T tile).

    OpenBLAS streams a large tile faster with the few vectors on the left: a 3200 x 3200
    float64 tile times 20 vectors took 11-12 ms against 18-21 ms as ``tile @ V``, on one
    thread (its read alone: 5 ms).

    Examples
    --------
    >>> A, V = np.arange(6.0).reshape(2, 3), np.ones((3, 1))
    >>> tile_times(A, V).ravel().tolist(), tile_times(A.T, V, transposed=True).ravel().tolist()
    ([3.0, 12.0], [3.0, 12.0])
    """
    return (V.T @ tile).T if transposed else (V.T @ tile.T).T


def _group_product(positions: list, transposed: bool, correction, V: list, *tiles) -> dict:
    """One worker's part of a product: for its tiles (i, j), A_ij V_j into row block i
    (A_ij^T V_i into j when ``transposed``); with ``correction`` (s, n, offsets), less
    s_I (s^T V) / n for every row block I."""
    blocks = _added_parts(V)
    result: dict = {}

    def add(row: int, value: np.ndarray) -> None:
        if row in result:
            result[row] += value
        else:
            result[row] = value

    for (i, j), tile in zip(positions, tiles):
        if transposed:
            add(j, tile_times(tile, blocks[i], transposed=True))
        else:
            add(i, tile_times(tile, blocks[j]))
    if correction is not None:
        s, n_samples, offsets = correction
        parts = [s[offsets[k]:offsets[k + 1]] for k in range(len(offsets) - 1)]
        inner = sum(part @ blocks[k] for k, part in enumerate(parts)) / n_samples
        for k, part in enumerate(parts):
            add(k, -np.outer(part, inner))
    return result
