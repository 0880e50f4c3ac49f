"""Counters for tests of how often a path reads its data or computes: one of each, for every
test that counts.

:class:`CountingRows` is a stored array as dask reads it (Zarr, HDF5, netCDF): every read
recorded. Dask's threaded scheduler reads chunks from several threads at once, so the
records are kept under a lock. :class:`CountComputes` records every graph handed to a local
scheduler and every task it runs.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable

import dask.callbacks
import numpy as np


def _rows(key) -> slice | np.ndarray:
    return key[0] if isinstance(key, tuple) else key


def _start(key) -> int:
    rows = _rows(key)
    return (rows.start or 0) if isinstance(rows, slice) else int(np.min(rows))


class CountingRows:
    """An array (numpy, or anything with ``__getitem__``, ``shape`` and ``dtype``) whose
    reads are recorded; ``da.from_array(CountingRows(a), chunks=...)`` reads through it.

    ``keys`` are the keys of the reads, in order; ``reads`` counts them by their first row;
    :meth:`count` by any function of the key. A read of no element (dask's probe of the
    dtype) is no read.

    Examples
    --------
    >>> rows = CountingRows(np.zeros((4, 2)))
    >>> _ = rows[2:4, :], rows[0:0, :]
    >>> dict(rows.reads), rows.total()
    ({2: 1}, 1)
    >>> dict(rows.count(lambda key: (key[0].start, key[0].stop)))
    {(2, 4): 1}
    """

    def __init__(self, values: Any):
        self.values = values
        self.shape, self.dtype, self.ndim = values.shape, values.dtype, len(values.shape)
        self.keys: list = []
        self._lock = threading.Lock()

    def __getitem__(self, key):
        block = self.values[key]
        if np.size(block):
            with self._lock:
                self.keys.append(key)
        return block

    def count(self, by: Callable[[Any], Any]) -> collections.Counter:
        """The reads counted by ``by(key)``."""
        with self._lock:
            return collections.Counter(by(key) for key in self.keys)

    @property
    def reads(self) -> collections.Counter:
        """The reads counted by the first row they read."""
        return self.count(_start)

    def row_ranges(self) -> collections.Counter:
        """The reads counted by the (start, stop) of the rows they read."""
        return self.count(lambda key: (_rows(key).start, _rows(key).stop))

    def total(self) -> int:
        """Reads of all rows."""
        with self._lock:
            return len(self.keys)

    def clear(self) -> None:
        """Forget the reads so far."""
        with self._lock:
            self.keys.clear()


class CountComputes(dask.callbacks.Callback):
    """Every graph handed to a local scheduler (its number of tasks, in ``graphs``) and every
    task run, by key (``tasks``), while the callback is active.

    Examples
    --------
    >>> import dask.array as da
    >>> with CountComputes() as counted:
    ...     _ = da.ones(4, chunks=2).sum().compute()
    >>> counted.computes
    1
    """

    def __init__(self):
        super().__init__()
        self.graphs: list[int] = []
        self.tasks: collections.Counter = collections.Counter()

    @property
    def computes(self) -> int:
        """The graphs computed."""
        return len(self.graphs)

    def _start(self, dsk):
        self.graphs.append(len(dsk))

    def _pretask(self, key, dsk, state):
        self.tasks[key] += 1
