"""Real LocalClusters of worker processes on 127.0.0.1, as the distributed tests start them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from distributed import Client, LocalCluster

from kpca_dask.dask_client import environment_kept


@contextlib.contextmanager
def process_client(n_workers: int = 2, *, memory_limit: str | int = "auto",
                   threads_per_worker: int = 1, local_directory: str | None = None
                   ) -> Iterator[Client]:
    """A client of a fresh LocalCluster of worker processes, closed when the block ends.

    The environment is kept twice: once the workers are up, and again after the
    close, in case a nanny restarted a worker (and wrote its settings) in between.
    """
    with environment_kept():
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                               processes=True, host="127.0.0.1", dashboard_address=None,
                               memory_limit=memory_limit, local_directory=local_directory)
    with environment_kept(), cluster, Client(cluster) as client:
        yield client


def resident_bytes(dask_worker=None) -> int:
    """This process's resident memory (run on each worker with ``client.run``)."""
    import psutil

    return psutil.Process().memory_info().rss


def load_library(dask_worker=None) -> None:
    """Load what a task loads (numba's runtime and the compiled kernels, the readers of
    stored fields), so that a baseline measured after it includes a worker's code, which
    the memory model counts apart (run on each worker with ``client.run``)."""
    import xarray  # noqa: F401
    import zarr  # noqa: F401

    from kpca_dask.blocks import epilogue

    epilogue.compile_all()


def assert_within_model(what: str, workers: dict, baselines: dict) -> None:
    """Each watched worker's peak within the model of docs/design.md §14.

    ``workers`` are :func:`kpca_dask.diagnostics.watch_workers`' figures and
    ``baselines`` each worker's own resident size measured when its code was
    loaded (:func:`resident_bytes`): the growth over it, plus a worker's code as
    the library models it, must stay within 60 % of the worker's limit. The
    growth, unlike the resident size itself, does not move with the page cache.
    """
    from kpca_dask._memory import WORKER_CODE_BYTES, WORKER_PEAK_SHARE

    for address, watched in workers.items():
        growth = watched.peak - baselines[address]
        modelled = WORKER_CODE_BYTES + growth
        assert modelled <= WORKER_PEAK_SHARE * watched.limit, (
            f"{what}: worker {address} grew by {growth / 2**20:.0f} MiB over its own "
            f"baseline ({baselines[address] / 2**20:.0f} MiB): with its code "
            f"({WORKER_CODE_BYTES / 2**20:.0f} MiB) that is {modelled / watched.limit:.0%} of "
            f"its limit, past {WORKER_PEAK_SHARE:.0%}")
