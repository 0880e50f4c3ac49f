"""The arrays a chain of the pass writes its kernel blocks into, kept from one task to the next.

A task of the pass makes each kernel block in a buffer of rows x m values and,
for float32 blocks of at least m rows, takes its product D^T D in an m x m
float32 scratch (:func:`kpca_dask.blocks.statistics.add_gram`). Made afresh
in every task, both are new pages each time: at m = 10^4 the 0.4 GB scratch
took 3.7 s to fill by ``syrk`` against 3.1-3.3 s when held (Intel Xeon, a
KVM guest, where a page the process has not touched costs the host's work
too). The chain's accumulator (:class:`~kpca_dask.blocks.statistics.RunningStatistics`)
therefore carries a :class:`BlockWorkspace` to its next task, which runs after
this one: the chain holds what one task held, for its length rather than one
task's (docs/guide/memory.md). It is dropped when the accumulator is pickled
(a chain moved to another worker makes its own) and when chains are merged,
and kept only on dask's local pool, where each chain has a thread of its own.
The other passes (wide rows, tiles, coupled fields, replicates) still make
their buffers in each task.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BlockWorkspace", "gram_scratch"]


class BlockWorkspace:
    """A kernel block buffer and, for float32 blocks, an m x m product scratch, reused.

    Examples
    --------
    >>> workspace = BlockWorkspace()
    >>> buffer, scratch = workspace.arrays(4, 3, np.float32)
    >>> buffer.shape, scratch.shape, scratch.flags.f_contiguous
    ((4, 3), (3, 3), True)
    >>> again, _ = workspace.arrays(2, 3, np.float32)  # fewer rows: a view of the same memory
    >>> bool(np.shares_memory(again, buffer)), again.shape
    (True, (2, 3))
    >>> workspace.arrays(2, 3, np.float32)[1] is None  # m > rows: add_gram's panels, no product
    True
    """

    def __init__(self) -> None:
        self._buffer: np.ndarray | None = None
        self._scratch: np.ndarray | None = None

    def arrays(self, rows: int, m: int, dtype) -> tuple[np.ndarray, np.ndarray | None]:
        """A C-ordered (rows, m) buffer of ``dtype``, and the Fortran-ordered float32 m x m
        scratch :func:`~kpca_dask.blocks.statistics.add_gram` takes for a float32 block of
        ``rows >= m`` rows (None otherwise, and for float64 blocks: ``dsyrk`` adds into G).

        Arrays held from an earlier block are reused when they are as large and of the same
        m and dtype, else replaced; their content is overwritten before it is read.
        """
        dtype = np.dtype(dtype)
        held = self._buffer
        same_kind = held is not None and held.dtype == dtype and held.shape[1] == m
        if not same_kind:
            self._scratch = None  # m x m of another m, or a float64 chain's (none)
        if not same_kind or held.shape[0] < rows:
            del held
            self._buffer = None  # freed before the new one is made
            self._buffer = np.empty((rows, m), dtype)
        buffer = self._buffer[:rows]
        if self._scratch is None:
            self._scratch = gram_scratch(buffer)
        wanted = self._scratch is not None and m <= rows and dtype == np.float32
        return buffer, self._scratch if wanted else None


def gram_scratch(buffer: np.ndarray) -> np.ndarray | None:
    """The float32 m x m product :func:`~kpca_dask.blocks.statistics.add_gram` takes for the
    kernel blocks of ``buffer`` (rows x m), when it is no larger than the buffer itself; None
    otherwise (and for float64 blocks, which need none). A task then holds at most twice its
    kernel block.

    Examples
    --------
    >>> gram_scratch(np.empty((4, 3), np.float32)).shape, gram_scratch(np.empty((2, 3), np.float32))
    ((3, 3), None)
    """
    rows, m = buffer.shape
    if buffer.dtype != np.float32 or m > rows:
        return None
    return np.empty((m, m), np.float32, order="F")  # syrk writes it before it is read
