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
