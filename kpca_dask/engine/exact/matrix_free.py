"""The centred kernel matrix as an operator: J K J V in one pass over pairs of row panels.

docs/design.md §13. With J = I - 1 1^T / n and k = K 1,

    J K J V = K V - k (1^T V) / n - 1 (k^T V) / n + 1 (1^T k)(1^T V) / n^2,

so a product needs K V alone, and k once (the first product appends a column
of ones to V). The rows are cut into B panels of whole rows; K V is a sum over
the B (B + 1) / 2 pairs of panels a <= b, one task each
(:func:`~kpca_dask.blocks.kernel_tiles.pair_products`): the task makes the
pair's kernel tiles one at a time, adds K_ab V_b to panel a's part and
K_ab^T V_a to panel b's, and drops them. Each panel's parts are added by a
tree of tasks, in float64, in a fixed order. Nothing n x n exists anywhere: a
task holds two panels, their blocks of V and one tile; the client holds V
and K V (n x b).

The panels are persisted where the tasks run (a cluster's workers, or this
process) when they take at most :data:`PERSIST_SHARE` of its memory;
otherwise every product reads its panels again, each inside the pair task
that uses it (dask's configuration key ``kpca-dask.exact-rows``: ``"auto"``,
``"persist"`` or ``"read"``). The blocks of V are shared as literal tasks
(:func:`~kpca_dask.engine.graph_values.shared_values`), so that a worker lost
between or during products costs only its own results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np

from ..._memory import memory_budget
from ..._parallel import capped_blas, distributed_client, task_blas_limit
from ...blocks.kernel_tiles import TILE_ROWS, cross_products, pair_products, rows_summary
from ...errors import InvalidParameterError, NonFiniteInputError
from ...validation import configured_choice
from ..graph_values import shared_values
from ..solve.landmark_factor import OVERFLOW_MESSAGE

__all__ = ["RowPanels", "row_panels", "CentredKernel", "kernel_products", "cross_kernel",
           "centred", "product_traffic", "PERSIST_SHARE", "ROWS_KEY", "PAIRS_PER_THREAD"]

#: dask configuration key: keep the panels where the tasks run ("persist"), read them
#: again in every product ("read"), or persist them when they fit ("auto", the default).
ROWS_KEY = "kpca-dask.exact-rows"

#: The panels are persisted when they take at most this share of the memory of the
#: processes that run the tasks (all the workers of a cluster together).
PERSIST_SHARE = 0.25

#: At least this many pairs of panels per thread that runs tasks, so that the last
#: wave of a pass keeps most threads busy.
PAIRS_PER_THREAD = 4

#: Columns of V a panel's share of memory is sized for (a block of the Krylov basis).
_SIZED_COLUMNS = 64

#: Parts of K V added by one task of the tree.
_ADDED_AT_ONCE = 8

#: Panels of rows a pair task holds: a and b.
_PANELS_PER_TASK = 2

#: float64 blocks of columns a pair task holds beside them: V_a, V_b, and its two parts
#: of K V (K_ab V_b and K_ab^T V_a).
_COLUMN_BLOCKS_PER_TASK = 4
_FLOAT64_BYTES = 8

#: The fewest rows of a panel, whatever the memory: a quarter of a kernel tile, so
#: that a small working block (a small memory limit, many threads) still gives tiles
#: that GEMM works at its rate, and pair tasks that do more than schedule.
_LEAST_PANEL_ROWS = TILE_ROWS // 4


@dataclass(frozen=True)
class RowPanels:
    """The training rows cut into panels of whole rows, and the kernel their tiles take.

    ``rows`` is (n, p), chunked into panels along the rows and whole along the
    features; ``held`` whether they are persisted where the tasks run (else
    each product reads them again); ``dtype`` the kernel tiles' dtype.
    """

    rows: da.Array
    kernel: Any
    params: dict
    dtype: np.dtype
    held: bool

    @property
    def bounds(self) -> list[tuple[int, int]]:
        """The (start, stop) rows of each panel."""
        stops = np.cumsum(self.rows.chunks[0])
        return [(int(stop - size), int(stop)) for stop, size in zip(stops, self.rows.chunks[0])]

    def sources(self) -> list:
        """One argument per panel for the pair tasks: its persisted block, or a reader."""
        if self.held:
            return list(self.rows.to_delayed().ravel())
        return [PanelReader(self.rows[start:stop]) for start, stop in self.bounds]


class PanelReader:
    """A panel read inside the task that uses it (panels that are not persisted).

    As a task of its own a read would run as soon as a thread is free and its
    result would wait, in memory, for the pair tasks that use it; inside the
    pair task it is read when needed and dropped after.
    """

    def __init__(self, rows: da.Array) -> None:
        self.rows = rows

    def read(self) -> np.ndarray:
        return np.asarray(self.rows.compute(scheduler="sync"))

    def __dask_tokenize__(self):
        return ("panel-reader", self.rows.name)


def panel_rows(n: int, n_features: int, itemsize: int, budget, tile_itemsize: int = 8) -> int:
    """Rows per panel: enough panels for :data:`PAIRS_PER_THREAD` pairs per thread, and a
    pair task's two panels (stored, and in the tiles' dtype) with their blocks of V and
    K V within a task's working block.

    Examples
    --------
    >>> from kpca_dask._memory import MemoryBudget
    >>> budget = MemoryBudget(2**34, 2, False, "here")
    >>> panel_rows(100_000, 32, 8, budget), panel_rows(60_000, 784, 1, budget)
    (25000, 8305)
    """
    threads = max(1, budget.threads) * max(1, budget.workers)
    # The fewest panels B with B (B + 1) / 2 pairs a <= b at least PAIRS_PER_THREAD per
    # thread: the positive root of B^2 + B - 2 pairs, rounded up.
    count = math.ceil((math.sqrt(1 + 8 * PAIRS_PER_THREAD * threads) - 1) / 2)
    # A pair task's bytes per row of its panels: the two panels, stored and in the
    # tiles' dtype, and their float64 blocks of V and of K V (two of each).
    row_bytes = (_PANELS_PER_TASK * n_features * (itemsize + tile_itemsize)
                 + _COLUMN_BLOCKS_PER_TASK * _FLOAT64_BYTES * _SIZED_COLUMNS)
    by_memory = budget.block_bytes // row_bytes
    return max(1, min(math.ceil(n / count), max(_LEAST_PANEL_ROWS, by_memory)))


def row_panels(X: da.Array, kernel, params: dict, dtype) -> RowPanels:
    """``X``'s rows cut into panels (:func:`panel_rows`), persisted where the tasks run when
    they fit (module docstring)."""
    budget = memory_budget(X)
    n, p = X.shape
    rows = X.rechunk({0: panel_rows(n, p, X.dtype.itemsize, budget, np.dtype(dtype).itemsize),
                      1: -1})
    mode = configured_choice(ROWS_KEY, ("auto", "persist", "read"))
    room = budget.free_bytes * (budget.workers if budget.on_cluster else 1)
    held = mode == "persist" or (mode == "auto" and rows.nbytes <= PERSIST_SHARE * room)
    if held:
        client = distributed_client(rows)
        rows = client.persist(rows) if client is not None else dask.persist(rows)[0]
    return RowPanels(rows, kernel, dict(params), np.dtype(dtype), held)


def kernel_products(panels: RowPanels, V: np.ndarray, *, summaries: bool = False):
    """K V (n x b, float64), one pass over the pairs of panels; with ``summaries``, also
    each panel's :func:`~kpca_dask.blocks.kernel_tiles.rows_summary`, in the same pass."""
    sources = panels.sources()
    bounds = panels.bounds
    shared = shared_values(panels.rows, *[np.ascontiguousarray(V[a:b]) for a, b in bounds])
    pair = dask.delayed(tile_pair_products, pure=True)
    pairs = {(a, b): pair(sources[a], sources[b], shared[a], shared[b], panels.kernel,
                          panels.params, panels.dtype, a == b)
             for a in range(len(bounds)) for b in range(a, len(bounds))}
    parts = [_added([(pairs[a, b], 0) for b in range(a, len(bounds))]
                    + [(pairs[b, a], 1) for b in range(a)]) for a in range(len(bounds))]
    if summaries:
        summary = dask.delayed(panel_summary, pure=True)
        parts += [summary(source, panels.kernel, panels.params) for source in sources]
    with capped_blas(panels.rows):
        computed = dask.compute(*parts)
    product = np.vstack(computed[:len(bounds)])
    if summaries:
        return product, np.vstack(computed[len(bounds):])
    return product


def _added(parts: list) -> Any:
    """The sum of ``(pair, side)`` parts as a tree of tasks, in a fixed order."""
    add = dask.delayed(added_parts, pure=True)
    level = [add(tuple(side for _, side in parts[i:i + _ADDED_AT_ONCE]),
                 *[pair for pair, _ in parts[i:i + _ADDED_AT_ONCE]])
             for i in range(0, len(parts), _ADDED_AT_ONCE)]
    while len(level) > 1:
        level = [add((None,) * len(level[i:i + _ADDED_AT_ONCE]),
                     *level[i:i + _ADDED_AT_ONCE])
                 for i in range(0, len(level), _ADDED_AT_ONCE)]
    return level[0]


def tile_pair_products(x_a, x_b, v_a, v_b, kernel, params, dtype, same):
    """A task of a product: ``(K_ab V_b, K_ab^T V_a)`` of one pair of panels."""
    # Kernel values that overflow are one clear error once the product is back (_check).
    with task_blas_limit(), np.errstate(over="ignore", invalid="ignore"):
        return pair_products(_read(x_a), None if same else _read(x_b), v_a, v_b, kernel,
                             params, dtype, same)


def added_parts(sides: tuple, *parts) -> np.ndarray:
    """A task of a product: the float64 sum of parts (a pair's side 0 or 1, or a sum)."""
    total = None
    for side, part in zip(sides, parts):
        value = part if side is None else part[side]
        if total is None:
            total = value.copy()
        else:
            total += value
    return total


def panel_summary(x, kernel, params) -> np.ndarray:
    """A task of the first product: a panel's diagonal sum and non-finite values."""
    with np.errstate(over="ignore", invalid="ignore"):
        return rows_summary(_read(x), kernel, params)


def _read(x):
    return x.read() if isinstance(x, PanelReader) else x


def centred(KV: np.ndarray, V: np.ndarray, row_sums: np.ndarray) -> np.ndarray:
    """J K J V from K V, V and k = K 1, in place of ``KV`` (docs/design.md §13).

    Examples
    --------
    >>> K = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    >>> J = np.eye(3) - 1 / 3
    >>> V = np.arange(6.0).reshape(3, 2)
    >>> bool(np.allclose(centred(K @ V, V, K.sum(axis=1)), J @ K @ J @ V))
    True
    """
    n = V.shape[0]
    ones_V = V.sum(axis=0)
    KV -= np.outer(row_sums, ones_V / n)
    KV -= (row_sums @ V - row_sums.sum() * ones_V / n) / n
    return KV


class CentredKernel:
    """J K J as an operator on blocks of vectors, k = K 1 from its first product.

    ``row_sums`` and ``diagonal_sum`` (trace K) are known after the first call,
    or given (a resumed solve). ``passes`` counts the products made here.
    """

    def __init__(self, panels: RowPanels, row_sums: np.ndarray | None = None,
                 diagonal_sum: float | None = None) -> None:
        self.panels = panels
        self.row_sums = row_sums
        self.diagonal_sum = diagonal_sum
        self.passes = 0

    @property
    def size(self) -> int:
        return self.panels.rows.shape[0]

    @property
    def trace(self) -> float:
        """trace(J K J) = trace K - 1^T k / n."""
        return float(self.diagonal_sum - self.row_sums.sum() / self.size)

    def __call__(self, V: np.ndarray) -> np.ndarray:
        if self.row_sums is None:
            KW, summaries = kernel_products(
                self.panels, np.column_stack([V, np.ones(self.size)]), summaries=True)
            _check(summaries, [start for start, _ in self.panels.bounds], KW)
            self.row_sums, KV = KW[:, -1].copy(), KW[:, :-1]
            self.diagonal_sum = float(summaries[:, 0].sum())
        else:
            KV = kernel_products(self.panels, V)
            _check(None, None, KV)
        self.passes += 1
        return centred(KV, V, self.row_sums)


def _check(summaries, starts, product) -> None:
    """NaN or infinite rows, named by their first; kernel values that overflowed."""
    if summaries is not None and summaries[:, 1].any():
        first = next(int(start + row) for start, (_, count, row) in zip(starts, summaries)
                     if count)
        raise NonFiniteInputError(
            f"X contains {int(summaries[:, 1].sum())} NaN or infinite value(s), the first in "
            f"row {first}. Remove or impute them first, e.g. X[~da.isfinite(X).all(axis=1)] "
            "to find the rows.")
    if not np.isfinite(product).all():
        raise InvalidParameterError(OVERFLOW_MESSAGE.format(where="X"))


def cross_kernel(X: da.Array, panels: RowPanels, weights: da.Array) -> da.Array:
    """``k(X, X_train) [W, 1]``, lazily: (rows of X, columns of W + 1), chunked like X's rows.

    One task per (row block of X, training panel) makes their tiles
    (:func:`~kpca_dask.blocks.kernel_tiles.cross_products`); the panels' parts
    are added by dask's tree reduction, in float64.
    """
    X = X.rechunk({1: -1})
    weights = weights.rechunk({0: panels.rows.chunks[0], 1: -1})
    parts = da.blockwise(cross_panel_products, "ijk", X, "if", panels.rows, "jf", weights, "jk",
                         kernel=panels.kernel, params=panels.params, tile_dtype=panels.dtype,
                         adjust_chunks={"j": 1, "k": weights.shape[1] + 1}, concatenate=True,
                         dtype=np.float64, meta=np.empty((0, 0, 0), np.float64))
    return parts.sum(axis=1, dtype=np.float64)


def cross_panel_products(x, rows, weights, kernel, params, tile_dtype) -> np.ndarray:
    """A task of :func:`cross_kernel`: one row block's products with one training panel."""
    with task_blas_limit():
        return cross_products(x, rows, weights, kernel, params, tile_dtype)[:, None, :]


def product_traffic(n: int, n_features: int, columns: int, n_panels: int,
                    itemsize: int = 8) -> dict:
    """Bytes one product moves at most between the processes of a cluster.

    Every pair task fetches both its panels and both blocks of V and sends both
    parts of K V; the client sends V and receives K V. A pair whose panels
    live where it runs moves less, so this bounds what is measured.

    Examples
    --------
    >>> traffic = product_traffic(10**6, 32, 20, 25)
    >>> traffic["pairs"], round(traffic["bytes"] / 1e9, 1)
    (325, 15.3)
    """
    rows = math.ceil(n / n_panels)
    pairs = n_panels * (n_panels + 1) // 2
    per_pair = 2 * rows * n_features * itemsize + 4 * rows * columns * 8
    client = 2 * n * columns * 8
    return {"pairs": pairs, "rows_per_panel": rows, "per_pair": per_pair,
            "bytes": pairs * per_pair + client}
