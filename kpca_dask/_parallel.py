"""Keeping BLAS threads and dask threads from oversubscribing the cores."""

from __future__ import annotations

import contextlib
import os

import dask
import dask.threaded
from threadpoolctl import threadpool_limits


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
    cores = os.cpu_count() or 1
    dask_threads = dask.config.get("num_workers", None) or cores
    return max(1, cores // dask_threads)


@contextlib.contextmanager
def capped_blas(collection):
    """Context in which computing ``collection`` does not oversubscribe the cores."""
    limit = blas_threads_for(collection)
    if limit is None:
        yield
        return
    with threadpool_limits(limits=limit, user_api="blas"):
        yield
