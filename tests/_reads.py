"""An array that counts the reads of its rows, for tests of how often a path reads its data.

Dask's threaded scheduler reads chunks from several threads at once: the counts are
kept under a lock.
"""

from __future__ import annotations

import collections
import threading

import numpy as np


class CountingRows:
    """A numpy array behind ``__getitem__`` that counts, per first row of a read, how many
    times rows were read; ``da.from_array(CountingRows(a), chunks=...)`` reads through it.

    Examples
    --------
    >>> rows = CountingRows(np.zeros((4, 2)))
    >>> _ = rows[2:4, :]
    >>> dict(rows.reads)
    {2: 1}
    """

    def __init__(self, values: np.ndarray):
        self.values = values
        self.shape, self.dtype, self.ndim = values.shape, values.dtype, values.ndim
        self.reads: collections.Counter = collections.Counter()
        self._lock = threading.Lock()

    def __getitem__(self, key):
        rows = key[0] if isinstance(key, tuple) else key
        start = rows.start or 0 if isinstance(rows, slice) else int(np.min(rows))
        with self._lock:
            self.reads[start] += 1
        return self.values[key]

    def total(self) -> int:
        """Reads of all rows, counted by the chunk they began in."""
        with self._lock:
            return sum(self.reads.values())
