"""New rows against the training rows of an exact model, run by run (docs/design.md §13).

A transform of lazy rows against lazy training rows reads the training rows
once for every run of new rows it holds. As a dask graph of one task per
(block of new rows, training panel) it would hold the panels, as dask keys,
until every block has used them, and make each panel's kernel tiles once per
block (on a 2000 x 50 000 field: twice the time of a transform in memory and
+0.9 GiB). Here each run of new rows is one task that reads its rows and the
training rows inside itself, by dask's synchronous scheduler (safe on a
distributed worker: nothing is submitted from a task; the scheduler is named
for this thread's reads only, :func:`~kpca_dask._parallel.reading_in_this_thread`), and the runs are
chained, each task taking the previous one's result, so one run's working
memory is held at a time.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import dask
import dask.array as da
import numpy as np

from ..._parallel import reading_in_this_thread
from ...blocks.kernel_tiles import cross_products
from ...blocks.kernels import kernel_diagonal
from ..sampling import read_rows
from .matrix_free import PanelReader, RowPanels

__all__ = ["Held", "chained_runs", "run_rows", "panel_terms"]


class Held:
    """A value handed to tasks as it is: dask would read the dask arrays of a dataclass
    given to a task (the training rows) into the task's arguments."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def run_rows(X: da.Array, most_bytes: int, itemsize: int | None = None) -> int:
    """Rows of ``X`` in a run of at most ``most_bytes`` (in ``itemsize``, else X's dtype).

    Examples
    --------
    >>> run_rows(da.zeros((100, 10)), 800), run_rows(da.zeros((100, 10)), 800, 4)
    (10, 20)
    """
    size = itemsize or X.dtype.itemsize
    return max(1, min(int(most_bytes) // max(1, X.shape[1] * size), X.shape[0]))


def chained_runs(X: da.Array, rows: int, of_run: Callable, columns: int | None,
                 state: Any) -> da.Array:
    """``of_run(state, run)`` of each run of ``rows`` rows of ``X`` (the run a lazy slice, read
    inside its task), lazily: one task per run, each after the one before; chunked like X's
    rows, with ``columns`` columns (None: a vector).

    Examples
    --------
    >>> X = da.arange(10.0, chunks=3)[:, None]
    >>> chained_runs(X, 4, lambda k, run: k * run.compute()[:, 0], None, 2).compute().tolist()
    [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0]
    """
    task = dask.delayed(_run, pure=False)
    held, previous, parts = Held(state), None, []
    for start in range(0, X.shape[0], rows):
        stop = min(start + rows, X.shape[0])
        previous = task(PanelReader(X[start:stop]), held, of_run, previous)
        shape = (stop - start,) if columns is None else (stop - start, columns)
        parts.append(da.from_delayed(previous, shape, dtype=np.float64,
                                     meta=np.empty((0,) * len(shape), np.float64)))
    return da.concatenate(parts, axis=0).rechunk({0: X.chunks[0]})


def _run(rows: PanelReader, held: Held, of_run: Callable, after) -> np.ndarray:
    """A task of :func:`chained_runs` (``after``, the previous run's result, orders them)."""
    with reading_in_this_thread():
        result = of_run(held.value, rows.rows)
    if dask.is_dask_collection(result):  # an of_run that is lazy for lazy rows
        raise TypeError(f"{getattr(of_run, '__name__', of_run)} gave a dask collection; "
                        "chained_runs needs a function that computes the rows it is given.")
    return np.asarray(result, dtype=np.float64)


def panel_terms(panels: RowPanels, weights: da.Array, rows: da.Array,
                diagonal: bool = False) -> np.ndarray:
    """``k(rows, X_train) [W, 1]`` (float64) of lazy ``rows``, read here with each training
    panel in turn (a task of :func:`chained_runs`): what
    :func:`~kpca_dask.engine.exact.matrix_free.cross_kernel` gives, for one run; with
    ``diagonal``, k(x, x) of each row as one more column, from the rows read here."""
    x = np.ascontiguousarray(read_rows(rows), dtype=panels.dtype)
    W = np.asarray(weights)
    terms = np.zeros((x.shape[0], W.shape[1] + 1))
    bounds = panels.bounds
    # The next panel is read (decompressed) in a thread while this one's products are
    # made: the reads are done one at a time, so they overlap the BLAS work instead.
    with ThreadPoolExecutor(1) as reader:
        coming = reader.submit(_read_here, panels.rows[bounds[0][0]:bounds[0][1]])
        for k, (start, stop) in enumerate(bounds):
            panel = coming.result()
            if k + 1 < len(bounds):
                coming = reader.submit(_read_here, panels.rows[bounds[k + 1][0]:bounds[k + 1][1]])
            terms += cross_products(x, panel, W[start:stop], panels.kernel, panels.params,
                                    panels.dtype)
            del panel
    if diagonal:
        own = np.asarray(kernel_diagonal(x, panels.kernel, **panels.params), np.float64)
        terms = np.column_stack([terms, own])
    return terms


def _read_here(rows: da.Array) -> np.ndarray:
    """``rows`` read by dask's synchronous scheduler in this (the reading) thread."""
    with reading_in_this_thread():
        return read_rows(rows)
