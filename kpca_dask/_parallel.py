"""Which scheduler computes a collection, and keeping BLAS threads from oversubscribing."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import dask
import dask.local
import dask.multiprocessing
import dask.threaded
from threadpoolctl import ThreadpoolController, threadpool_limits

#: dask's schedulers that run in this process or its own pool, never on a client.
_LOCAL_SCHEDULERS = (dask.threaded.get, dask.local.get_sync, dask.multiprocessing.get)


_THIS_THREAD = threading.local()


@contextlib.contextmanager
def reading_in_this_thread():
    """Within: the library's reads in this thread (:func:`read_scheduler`) compute by dask's
    synchronous scheduler, as a task that reads its own rows needs (docs/design.md §13:
    nothing submitted from a task, safe on a distributed worker). Other threads keep
    theirs: dask's configuration is the process's, so setting its scheduler would reach
    every thread, and two such tasks ending in turn could leave it set.

    Examples
    --------
    >>> with reading_in_this_thread():
    ...     read_scheduler()
    'sync'
    >>> read_scheduler() is None
    True
    """
    previous = getattr(_THIS_THREAD, "scheduler", None)
    _THIS_THREAD.scheduler = "sync"
    try:
        yield
    finally:
        _THIS_THREAD.scheduler = previous


def read_scheduler() -> str | None:
    """The scheduler the library's reads name in this thread: ``"sync"`` within
    :func:`reading_in_this_thread`, else None (dask's default)."""
    return getattr(_THIS_THREAD, "scheduler", None)


def scheduler_for(collection=None):
    """The scheduler that will compute ``collection`` (without one: the default now), as
    ``dask.base.get_scheduler`` says, but without importing distributed to learn that no
    client exists when it has never been imported (about 0.2 s of a process's first fit).

    Examples
    --------
    >>> import dask.array as da
    >>> with dask.config.set(scheduler="sync"):
    ...     scheduler_for(da.zeros(3)) is dask.local.get_sync
    True
    """
    if _no_client_possible():  # dask takes the collection's own scheduler
        return None if collection is None else collection.__dask_scheduler__
    return dask.base.get_scheduler(collections=None if collection is None else [collection])


def _no_client_possible() -> bool:
    """No scheduler is configured and distributed was never imported, so no client exists."""
    return ("distributed" not in sys.modules and dask.config.get("scheduler", None) is None
            and dask.config.get("get", None) is None)


def compute_options(collection) -> dict:
    """``dask.compute``'s keywords that name :func:`scheduler_for` ``collection``: none
    when dask finds it as cheaply (a client, a configured scheduler).

    Examples
    --------
    >>> import dask.array as da
    >>> with dask.config.set(scheduler="sync"):
    ...     compute_options(da.zeros(3))
    {}
    """
    return {"scheduler": scheduler_for(collection)} if _no_client_possible() else {}


def distributed_client(collection=None):
    """The ``distributed.Client`` that will compute ``collection``, or None for a local scheduler.

    Without a collection: the client that computes collections by default now.

    The scheduler in effect may be a client's ``get`` (the default once a
    client exists), or a wrapper around it set with
    ``dask.config.set(scheduler=...)``, such as the command line's progress
    bar. A wrapper is recognised by its ``client`` attribute; failing that,
    any scheduler that is not one of dask's local ones is taken to run on
    the current client, if there is one.

    Examples
    --------
    >>> import dask.array as da
    >>> with dask.config.set(scheduler="threads"):
    ...     distributed_client(da.zeros(3)) is None
    True
    """
    scheduler = scheduler_for(collection)
    if scheduler is None or scheduler in _LOCAL_SCHEDULERS:
        return None
    try:
        from distributed import Client, default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    for owner in (getattr(scheduler, "__self__", None), getattr(scheduler, "client", None),
                  scheduler):
        if isinstance(owner, Client):
            return owner
    try:
        return default_client()
    except ValueError:  # a scheduler of another kind, and no client
        return None


def with_own_inputs_locally(X):
    """``X`` with each chunk made inside one task from what only it uses, when a local
    scheduler will compute it (:func:`kpca_dask._compat.with_own_inputs` says why); as it
    is on a cluster, whose scheduler holds back ready work by itself.

    Examples
    --------
    >>> import dask.array as da
    >>> X = da.ones((4, 1), chunks=(2, 1)) @ da.ones((1, 6), chunks=(1, 3))
    >>> with dask.config.set(scheduler="threads"):
    ...     with_own_inputs_locally(X).sum().compute()
    np.float64(24.0)
    """
    from ._compat import with_own_inputs

    return X if distributed_client(X) is not None else with_own_inputs(X)


def held_client(collection):
    """The ``distributed.Client`` whose futures ``collection`` reads (a persisted result), or
    None when it reads none.

    Examples
    --------
    >>> import dask.array as da
    >>> held_client(da.zeros(3)) is None
    True
    """
    try:
        from distributed import futures_of
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    futures = futures_of(collection)
    return futures[0].client if futures else None


#: Times a computation on persisted results is sent again after they were lost with a worker.
HELD_RETRIES = 3


def compute_held(collection):
    """``collection`` computed by the client whose futures it reads, else by the default
    scheduler: the m x m arrays a fit left on a cluster are computed where they are, whatever
    the default is now.

    A computation sent while a lost worker's persisted results are being recomputed is
    cancelled by the scheduler ("lost dependencies"); it is sent again once they are back.
    """
    client = held_client(collection)
    if client is None:
        return collection.compute()
    from concurrent.futures import CancelledError

    from distributed import futures_of, wait

    for attempt in range(HELD_RETRIES + 1):
        try:
            return client.compute(collection).result()
        except CancelledError:
            if attempt == HELD_RETRIES:
                raise
            wait(futures_of(collection))


def persist_held(collection, client=None):
    """``collection`` persisted by ``client``, else by the client whose futures it reads,
    else by the default scheduler: the m x m arrays of a cluster fit stay on that cluster
    whatever the default is when they are re-solved or grown."""
    client = client or held_client(collection)
    if client is None:
        return dask.persist(collection)[0]
    return persisted_on(client, collection)[0]


def persisted_on(client, *collections, optimize_graph: bool = True) -> list:
    """``collections`` persisted by the distributed ``client`` itself: their results stay
    on its workers, each key with the recipe that made it.

    Never through ``dask.persist`` with a wrapper of the client's ``get`` as the
    scheduler (the command line's progress bar): that computes the results,
    brings them here and makes them new graphs under the keys that computed them,
    which the scheduler then sees twice with different recipes (docs/design.md
    §14). When the scheduler in effect shows progress (a ``show_progress``
    method, as :class:`kpca_dask.cli.compute.ProgressGet` has), it is shown for
    these futures too.
    """
    persisted = client.persist(list(collections), optimize_graph=optimize_graph)
    show = getattr(dask.base.get_scheduler(), "show_progress", None)
    if show is not None:
        from distributed import futures_of  # noqa: PLC0415 - a dependency, imported when used

        show(futures_of(persisted))
    return persisted


def local_threads() -> int:
    """Threads dask's local threaded scheduler runs at once (``num_workers``, else the cores).

    Examples
    --------
    >>> with dask.config.set(num_workers=3):
    ...     local_threads()
    3
    """
    return dask.config.get("num_workers", None) or os.cpu_count() or 1


def blas_threads_for(collection) -> int | None:
    """BLAS threads per task when ``collection`` is computed by the local thread pool.

    The threaded scheduler runs one block per core at once, and 2 dask threads
    x 2 BLAS threads measured 1.5x slower than x 1 (docs/design.md §2). Distributed
    workers need nothing: their nanny already starts them with one BLAS
    thread. Returns None when no cap is needed.
    """
    if scheduler_for(collection) is not dask.threaded.get:
        return None
    return max(1, (os.cpu_count() or 1) // local_threads())


@contextlib.contextmanager
def capped_blas(collection):
    """Context in which computing ``collection`` does not oversubscribe the cores."""
    limit = blas_threads_for(collection)
    if limit is None:
        yield
        return
    with threadpool_limits(limits=limit, user_api="blas"):
        yield


def computed(collection):
    """``collection`` computed in the client, with the BLAS threads capped as in the pass.

    Examples
    --------
    >>> import dask.array as da
    >>> computed(da.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """
    with capped_blas(collection):
        return collection.compute(**compute_options(collection))


@functools.lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    # Finding the loaded BLAS libraries takes milliseconds; setting a limit on
    # libraries already found takes microseconds.
    return ThreadpoolController()


class SharedBlasLimit:
    """A BLAS thread limit shared by the block functions running in this process.

    BLAS thread counts are process-wide, so two threads that each set a limit
    and restore the previous one on leaving race: the first to leave restores
    all threads while the other still runs. Here the limit is set when the
    first block function enters and restored when the last one leaves.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._inside = 0
        self._limiter = None

    @contextlib.contextmanager
    def __call__(self, limit: int | None):
        if limit is None:
            yield
            return
        with self._lock:
            if self._inside == 0:
                self._limiter = _controller().limit(limits=limit, user_api="blas")
            self._inside += 1
        try:
            yield
        finally:
            with self._lock:
                self._inside -= 1
                if self._inside == 0:
                    self._limiter.restore_original_limits()
                    self._limiter = None

    @property
    def active(self) -> int:
        """Block functions inside the limit now."""
        return self._inside


#: The one limit of this process (BLAS threads are per process, so is this).
_BLAS_LIMIT = SharedBlasLimit()


def task_blas_threads() -> int | None:
    """BLAS threads for a block function running in the current thread (None: no limit).

    In a pool thread (dask's threaded scheduler, or a distributed worker's
    threads) the pool runs one block per thread at once, so each gets
    cores // pool threads BLAS threads; the main thread (the synchronous
    scheduler, or a direct call) keeps every core.

    Examples
    --------
    >>> task_blas_threads() is None  # called directly, in the main thread
    True
    """
    if threading.current_thread() is threading.main_thread():
        return None
    return max(1, (os.cpu_count() or 1) // local_threads())


def blas_thread_count() -> int:
    """The BLAS threads this process runs now (its limit, as threadpoolctl reads it): the
    cores a computation here may take, 1 on a worker its nanny started with one.

    Examples
    --------
    >>> blas_thread_count() >= 1
    True
    """
    counts = [library["num_threads"] for library in _controller().select(user_api="blas").info()]
    return max(1, min(counts, default=1))


def in_ordered_threads(function, items, threads: int, window: int = 4):
    """``function(item)`` for each item on ``threads`` threads, yielded in the items' order;
    at most ``window`` results per thread wait to be taken, so what the results hold stays
    bounded however many items there are. BLAS runs one thread in each, unless a limit of
    the process's is already held (:class:`SharedBlasLimit` sets it at the first entry).

    Examples
    --------
    >>> list(in_ordered_threads(lambda i: i * i, range(5), threads=2))
    [0, 1, 4, 9, 16]
    """
    items = list(items)
    step = max(1, threads * window)
    with single_blas_thread():
        if threads <= 1:  # in this thread: no pool to start
            yield from map(function, items)
            return
        with ThreadPoolExecutor(threads) as pool:
            for start in range(0, len(items), step):
                yield from pool.map(function, items[start:start + step])


def single_blas_thread():
    """Context for many small products run by a pool of threads: one BLAS thread each.

    Small GEMMs (a few hundred rows) lose more to BLAS threads waking up than
    they gain, most of all on a loaded machine; threads over row blocks do better.
    """
    return _BLAS_LIMIT(1)


def blas_limit(threads: int | None):
    """Context for a block function given its share of the cores (None: as
    :func:`task_blas_limit`): a chain of the pass that runs alone in a process
    uses every core's BLAS thread (docs/design.md §8)."""
    return _BLAS_LIMIT(task_blas_threads() if threads is None else threads)


def task_blas_limit():
    """Context for the body of a block function: Dask threads x BLAS threads <= cores.

    A lazy ``transform`` computed by the user on the threaded scheduler is
    then capped as well as the library's own computes are (docs/design.md §2).
    """
    return _BLAS_LIMIT(task_blas_threads())
