"""Which scheduler computes a collection, and keeping BLAS threads from oversubscribing."""

from __future__ import annotations

import contextlib
import os

import dask
import dask.local
import dask.multiprocessing
import dask.threaded
from threadpoolctl import threadpool_limits

#: dask's schedulers that run in this process or its own pool, never on a client.
_LOCAL_SCHEDULERS = (dask.threaded.get, dask.local.get_sync, dask.multiprocessing.get)


def distributed_client(collection):
    """The ``distributed.Client`` that will compute ``collection``, or None for a local scheduler.

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
    scheduler = dask.base.get_scheduler(collections=[collection])
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
    x 2 BLAS threads measured 1.5x slower than x 1 (DESIGN §2). Distributed
    workers need nothing: their nanny already starts them with one BLAS
    thread. Returns None when no cap is needed.
    """
    scheduler = dask.base.get_scheduler(collections=[collection])
    if scheduler is not dask.threaded.get:
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
