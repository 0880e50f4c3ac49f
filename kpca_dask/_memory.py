"""How much memory the work on a collection may use: a worker's limit, or this machine's.

On a ``distributed`` cluster each worker process has a ``memory_limit`` (and
pauses at 80 % of it, restarts at 95 %); its threads run tasks at once and
share it. The model of a worker's peak (docs/design.md §14) is its own code
(:data:`WORKER_CODE_BYTES`) plus what its tasks hold, and block sizes, tiles
and the choice of one worker or tiles keep that peak within
:data:`WORKER_PEAK_SHARE` of the limit: well below the pause threshold, with
room for the ~0.1 GiB a worker's resident size moves with the page cache.
With a local scheduler the process shares the machine's memory.
:func:`memory_budget` says which applies to a collection, so that the block
sizes, the landmark problem's refusal and the choice of where the m x m work
runs all read one answer.

The local figure can be fixed with dask's configuration, key
``kpca-dask.memory-limit`` (a number of bytes or a string such as
``"4 GiB"``; environment variable ``DASK_KPCA_DASK__MEMORY_LIMIT``), for a
machine whose other tenants the operating system does not show.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, fields

import dask
import psutil
from dask.sizeof import sizeof
from dask.utils import format_bytes, parse_bytes

from ._parallel import distributed_client, local_threads

__all__ = ["MemoryBudget", "memory_budget", "CONFIG_KEY", "release_freed_memory",
           "SizedByFields", "WORKER_PEAK_SHARE", "WORKER_CODE_BYTES", "process_room_bytes"]

#: dask configuration key of a fixed local memory figure (bytes or a string).
CONFIG_KEY = "kpca-dask.memory-limit"


@dataclass(frozen=True)
class MemoryBudget:
    """The memory of the place where tasks over a collection run.

    ``process_bytes`` is what one process may hold (the smallest worker's
    ``memory_limit`` on a cluster; the memory available on this machine, or
    the configured figure, otherwise); ``threads`` how many tasks run there at
    once; ``where`` words it for messages. ``headroom_bytes`` is what a worker
    has free now (for refusals: up to its pause threshold, less what it holds);
    ``sizing_bytes`` the fixed figure block sizes are cut
    from (:data:`WORKER_PEAK_SHARE` of a worker's limit less its code; this
    machine's total memory), so that blocks do not change from run to run.
    """

    process_bytes: int
    threads: int
    on_cluster: bool
    where: str
    headroom_bytes: int | None = None  # None: all of process_bytes
    sizing_bytes: int | None = None  # None: process_bytes
    workers: int = 1  # processes of that kind: a cluster's workers, or this one
    measured_room_bytes: int | None = None  # None: sizing_bytes (see measured_room)

    @property
    def measured_room(self) -> int:
        """A worker's modelled peak (:data:`WORKER_PEAK_SHARE` of its limit) less what it
        holds now besides its data, measured (its code and runtime: 194-380 MiB, against
        :data:`WORKER_CODE_BYTES` assumed); the smallest over the workers. What the tiles of
        the m x m work are cut from (docs/design.md §11): they are few and large, so their
        size is worth the measurement. Elsewhere :attr:`sizing_bytes`.
        """
        if self.measured_room_bytes is not None:
            return self.measured_room_bytes
        return self.process_bytes if self.sizing_bytes is None else self.sizing_bytes

    @property
    def free_bytes(self) -> int:
        """What one more array may take in that process: on a worker, its memory_limit up to
        the pause threshold less what the worker holds already; here, process_bytes."""
        return self.process_bytes if self.headroom_bytes is None else self.headroom_bytes

    @property
    def task_bytes(self) -> int:
        """A fair share of the process for one task: the process's bytes over its threads."""
        return self.process_bytes // max(1, self.threads)

    @property
    def block_bytes(self) -> int:
        """The most one task's working block (a kernel block) may take: a quarter of a
        thread's share of :attr:`sizing_bytes`, between 4 MiB and 128 MiB.

        The model of a task (docs/guide/memory.md): at most four arrays of a block's
        size at once (a pass task's kernel block beside its input chunk, its float
        copy and its m x m sums; a score's or a pre-image's kernel block beside the
        temporaries of its distances and its product), so that T tasks at once stay
        within the worker's share.
        """
        return self.block_bytes_of(self.threads, BLOCK_BYTES_MOST)

    def block_bytes_of(self, tasks: int, most: int) -> int:
        """:attr:`block_bytes` when ``tasks`` tasks run at once, each block at most ``most``.

        Examples
        --------
        >>> budget = MemoryBudget(2**30, 2, False, "1 GiB")
        >>> budget.block_bytes_of(2, 2**30) // 2**20, budget.block_bytes_of(1, 2**30) // 2**20
        (128, 256)
        """
        basis = self.process_bytes if self.sizing_bytes is None else self.sizing_bytes
        share = basis // (4 * max(1, tasks))
        return int(min(most, max(BLOCK_BYTES_LEAST, share)))

    def describe(self) -> str:
        """``"4.00 GiB (the smallest worker's memory_limit)"``, for messages."""
        return f"{format_bytes(self.process_bytes)} ({self.where})"


def memory_budget(collection=None) -> MemoryBudget:
    """The :class:`MemoryBudget` of whatever will compute ``collection``.

    Examples
    --------
    >>> import dask.array as da
    >>> with dask.config.set({"kpca-dask.memory-limit": "2 GiB", "scheduler": "threads",
    ...                       "num_workers": 2}):
    ...     budget = memory_budget(da.zeros(3))
    >>> budget.process_bytes, budget.threads, budget.on_cluster
    (2147483648, 2, False)
    """
    client = distributed_client(collection)
    if client is not None:
        workers = list(client.scheduler_info(n_workers=-1)["workers"].values())
        if workers:
            total = psutil.virtual_memory().total
            limits = [w.get("memory_limit") or total for w in workers]
            return MemoryBudget(int(min(limits)), int(max(w.get("nthreads", 1) for w in workers)),
                                True, "the smallest worker's memory_limit",
                                int(min(_worker_headroom(w, total) for w in workers)),
                                int(min(_worker_room(w, total) for w in workers)),
                                len(workers),
                                int(min(_measured_room(w, total) for w in workers)))
    configured = dask.config.get(CONFIG_KEY, None)
    if configured is not None:
        return MemoryBudget(int(parse_bytes(configured) if isinstance(configured, str)
                                else configured), local_threads(), False,
                            f"the configured {CONFIG_KEY}")
    memory = psutil.virtual_memory()
    return MemoryBudget(int(memory.available), local_threads(), False,
                        "the memory available on this machine", None, int(memory.total))


#: Bounds of :attr:`MemoryBudget.block_bytes`: below 4 MiB BLAS is slow; above
#: 128 MiB a block gains nothing (it is far beyond the caches already).
BLOCK_BYTES_LEAST, BLOCK_BYTES_MOST = 2**22, 2**27

#: What a worker holds once it has imported kpca-dask and its dependencies and run a
#: first pass task, as its resident size (which dask's pause threshold reads). Measured
#: on Linux x86-64 with numpy 2.4, scipy, numba and distributed: 260-280 MiB idle, but
#: 374-380 MiB right after the packages were installed (260 MiB again once the page
#: cache was dropped: the figure follows the page cache's state; a new container is
#: such an install), and about 50 MiB more once the compiled kernels are loaded (a
#: fit at m = 200 grows a worker by 53 MiB).
WORKER_CODE_BYTES = 450 * 2**20

#: What a worker that has not reported its memory yet is taken to hold: the least of
#: the figures above. Headroom reads what a worker holds now, which carries its own
#: page-cache share; this is only its floor.
WORKER_IDLE_BYTES = 260 * 2**20

#: The share of a worker's memory_limit its modelled peak may reach (docs/design.md §14):
#: distributed pauses a worker at 80 %, and a worker's resident size moves by ~0.1 GiB with
#: the page cache (WORKER_CODE_BYTES), so 60 % leaves a fifth of the limit for what the
#: model does not see.
WORKER_PEAK_SHARE = 0.6


def _worker_headroom(worker: dict, total: int) -> int:
    """A worker's memory_limit up to its pause threshold, less what it holds now (at least
    an idle worker's): what a refusal asks of it. Work is sized to the modelled peak
    (:func:`_worker_room`); only what cannot fit below the pause threshold is refused."""
    metrics = worker.get("metrics", {})
    held = int(metrics.get("memory", 0))
    if dask.config.get("distributed.worker.memory.spill", 0.7):
        # Data the worker holds in memory and may spill (persisted blocks, say) makes room
        # as the fit's arrays grow: only the rest is held. Without this, a worker already
        # spilling under a small limit read as full, and a fit it can finish was refused.
        held -= int(metrics.get("managed_bytes", 0))
    held = max(held, WORKER_IDLE_BYTES)
    return max(0, int(_pause_fraction() * (worker.get("memory_limit") or total)) - held)


def _worker_room(worker: dict, total: int) -> int:
    """A worker's memory_limit up to its modelled peak, less its code: what block sizes
    are cut from. Fixed for a given cluster, unlike what the worker holds at the moment, so
    that the same data are cut into the same blocks and a float32 fit's sums (rounded per
    block) do not depend on when it ran."""
    return max(0, _peak_allowed(worker, total) - WORKER_CODE_BYTES)


def _measured_room(worker: dict, total: int) -> int:
    """A worker's memory_limit up to its modelled peak, less what it holds now besides the
    data it manages (its code, runtime and buffers: unmanaged memory, at least an idle
    worker's)."""
    metrics = worker.get("metrics", {})
    unmanaged = int(metrics.get("memory", 0)) - int(metrics.get("managed_bytes", 0))
    return max(0, _peak_allowed(worker, total) - max(unmanaged, WORKER_IDLE_BYTES))


def _peak_allowed(worker: dict, total: int) -> int:
    """:data:`WORKER_PEAK_SHARE` of a worker's memory_limit, and never past its pause
    threshold (when one is configured lower)."""
    limit = worker.get("memory_limit") or total
    return int(min(WORKER_PEAK_SHARE, _pause_fraction()) * limit)


def _pause_fraction() -> float:
    """The share of its limit at which distributed pauses a worker (1: never)."""
    return dask.config.get("distributed.worker.memory.pause", 0.8) or 1.0


def process_room_bytes() -> int:
    """What this process may still take now: on a distributed worker, its modelled peak
    (:data:`WORKER_PEAK_SHARE` of its memory_limit) less its resident size; elsewhere the
    configured :data:`CONFIG_KEY` less the resident size, or the machine's available memory.

    For a choice between two ways to the same result, one of which holds more (the
    dense eigendecomposition after an iterative solve that would not converge).

    Examples
    --------
    >>> process_room_bytes() > 0
    True
    """
    resident = psutil.Process().memory_info().rss
    try:
        from distributed import get_worker  # noqa: PLC0415 - a dependency, imported when used

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):
        limit = None
    if limit:
        return max(0, int(min(WORKER_PEAK_SHARE, _pause_fraction()) * limit) - resident)
    configured = dask.config.get(CONFIG_KEY, None)
    if configured is not None:
        fixed = parse_bytes(configured) if isinstance(configured, str) else configured
        return max(0, int(fixed) - resident)
    return int(psutil.virtual_memory().available)


def release_freed_memory() -> None:
    """Hand memory freed by this process's threads back to the operating system (glibc only).

    glibc keeps blocks below its mmap threshold (which grows to 32 MiB) in
    per-thread arenas after they are freed, so the row blocks of a pass stay
    resident after it and add to the peak of the m x m work that follows;
    ``malloc_trim`` returns them (dask.distributed's documented remedy for
    the same effect on workers). Elsewhere this does nothing.

    Examples
    --------
    >>> release_freed_memory()
    """
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM = None


class SizedByFields:
    """A dataclass whose size, as dask counts it (``dask.sizeof``), is what its fields hold.

    For the results of a pass that tasks hand on (its statistics hold m^2 float64 words):
    without it dask sees the object's own ~50 bytes, so distributed would leave them out of a
    worker's managed memory, never spill them, and move them between workers as if they cost
    nothing. Not for a chain's running sums, which each task adds to in place and hands on
    as the same object: a worker holds it under the task's input key and its output key
    until the scheduler frees the first, and would count it twice, or three times at a
    merge, and spill it for nothing.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> import numpy as np
    >>> @dataclass
    ... class Sums(SizedByFields):
    ...     gram: np.ndarray
    >>> sizeof(Sums(np.zeros((100, 100)))) >= 80_000
    True
    """

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + sum(sizeof(getattr(self, kept.name))
                                             for kept in fields(self))
