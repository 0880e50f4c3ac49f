"""How much memory a run takes: this process's peak, and every Dask worker's.

A fit's memory is O(block x m + m^2) whatever n is (docs/design.md §2); these
watches show it on a real run. :class:`MemoryWatch` samples one process's
resident memory on a thread and, on Linux, also reads the kernel's own
high-water mark, so that its peak is exact however late a sample comes (on a
busy machine, say); :func:`watch_workers` starts one in every worker of a
client and reports, per worker, its peak against its memory limit, whether it
paused, the most bytes of task results it held and the bytes it sent. The
tests of memory and the cluster benchmarks are written with them.

Examples
--------
>>> import numpy as np
>>> watch = MemoryWatch()
>>> block = np.ones((1000, 1000))  # 8 MB
>>> watch.stop().peak >= watch.start
True
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import psutil
from distributed import Client

__all__ = ["MemoryWatch", "WorkerMemory", "watch_workers"]

#: Seconds between two samples: a block's kernel lives for tens of milliseconds.
SAMPLE_SECONDS = 0.02


class MemoryWatch:
    """This process's resident memory, sampled on a thread until :meth:`stop`.

    ``start`` is the memory when the watch began and ``peak`` the largest
    sampled (bytes); ``peak - start`` is what the watched code held beyond what
    was there before. On Linux the peak is exact: the watch resets the kernel's
    high-water mark of the process's resident size when it begins (``VmHWM``,
    by writing 5 to ``/proc/self/clear_refs``) and reads it when it stops, so a
    peak between two samples is not missed. (A second watch begun meanwhile in
    the same process resets the mark again; the first then keeps its samples'
    peak from before that.) Given the ``worker`` it runs in, the watch also records
    whether the worker paused, the most bytes of task results it held, and the
    bytes it sent to other workers.

    Examples
    --------
    >>> watch = MemoryWatch()
    >>> watch.stop().above_start >= 0
    True
    """

    def __init__(self, every: float = SAMPLE_SECONDS, *, worker=None):
        self.process, self.worker = psutil.Process(), worker
        self._exact = _reset_high_water_mark()
        self.start = self.peak = self.process.memory_info().rss
        self.paused, self.most_held = False, 0
        self._sent = worker.transfer_outgoing_bytes_total if worker is not None else 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(every,), daemon=True,
                                        name="kpca-dask-memory-watch")
        self._thread.start()

    def _sample(self, every: float) -> None:
        while not self._done.wait(every):
            self._take()

    def _take(self) -> None:
        self.peak = max(self.peak, self.process.memory_info().rss)
        if self.worker is not None:
            self.paused = self.paused or self.worker.status.name == "paused"
            self.most_held = max(self.most_held, self.worker.state.nbytes)

    def stop(self) -> MemoryWatch:
        """Stop sampling (after one last sample) and return the watch."""
        self._done.set()
        self._thread.join()
        self._take()
        if self._exact:
            self.peak = max(self.peak, _high_water_mark())
        return self

    @property
    def above_start(self) -> int:
        """The peak above the memory at the start, in bytes."""
        return self.peak - self.start

    @property
    def sent(self) -> int:
        """Bytes the watched worker sent to other workers since the watch began."""
        return self.worker.transfer_outgoing_bytes_total - self._sent if self.worker else 0


#: Linux's per-process files: writing "5" to the first resets the ``VmHWM`` line of the
#: second (the peak resident size) to the current resident size (Linux 4.0 and later).
_CLEAR_REFS, _STATUS = "/proc/self/clear_refs", "/proc/self/status"


def _reset_high_water_mark() -> bool:
    """Reset this process's peak resident size to its current one; False where the
    system has no such mark or does not let it be reset (then only samples count)."""
    try:
        with open(_CLEAR_REFS, "w") as refs:
            refs.write("5")
        return _high_water_mark() > 0
    except OSError:
        return False


def _high_water_mark() -> int:
    """This process's peak resident size since the last reset, in bytes (0 if unknown)."""
    try:
        with open(_STATUS) as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        pass
    return 0


@dataclass(frozen=True)
class WorkerMemory:
    """What one worker's watch saw (bytes), and the worker's process and limit."""

    pid: int
    start: int
    peak: int
    limit: int
    paused: bool
    most_held: int
    sent: int


@contextlib.contextmanager
def watch_workers(client: Client, every: float = SAMPLE_SECONDS
                  ) -> Iterator[dict[str, WorkerMemory]]:
    """Watch the memory of every worker of ``client`` while the block runs.

    The dict it yields is filled when the block ends, one
    :class:`WorkerMemory` per worker address. A worker restarted meanwhile
    (killed for its memory, say) has another ``pid`` than when the block began,
    or no entry.

    Examples
    --------
    >>> from distributed import Client, LocalCluster
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \\
    ...         Client(cluster) as client:
    ...     with watch_workers(client) as workers:
    ...         _ = client.submit(sum, range(10)).result()
    >>> [w.peak >= w.start and not w.paused for w in workers.values()]
    [True]
    """
    client.run(_start_watch, every)
    seen: dict[str, WorkerMemory] = {}
    try:
        yield seen
    finally:
        seen.update(client.run(_stop_watch))


def _start_watch(every: float, dask_worker=None) -> None:
    """Run in each worker: a watch of it, replacing one left by an interrupted block."""
    old = getattr(dask_worker, "kpca_dask_memory_watch", None)
    if old is not None:
        old.stop()
    dask_worker.kpca_dask_memory_watch = MemoryWatch(every, worker=dask_worker)


def _stop_watch(dask_worker) -> WorkerMemory:
    watch = dask_worker.kpca_dask_memory_watch.stop()
    del dask_worker.kpca_dask_memory_watch
    return WorkerMemory(pid=os.getpid(), start=watch.start, peak=watch.peak,
                        limit=dask_worker.memory_manager.memory_limit or 0,
                        paused=watch.paused, most_held=watch.most_held, sent=watch.sent)
