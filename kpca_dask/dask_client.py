"""Getting a Dask client: a scheduler address, the environment, or a local cluster.

Library code never creates a client; the command line (and notebooks) call
:func:`get_client` and the library computes on whatever client is current.

TLS comes from Dask's own configuration, never from arguments here: set
``distributed.comm.tls.ca-file``, ``distributed.comm.tls.client.cert`` and
``distributed.comm.tls.client.key`` in a Dask config file or as environment
variables (``DASK_DISTRIBUTED__COMM__TLS__CA_FILE=...``,
``DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=...``,
``DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=...``), and use a ``tls://``
address; the client picks them up through ``distributed.Security()``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import dask

from .errors import InvalidParameterError

if TYPE_CHECKING:  # distributed is imported when a client is made: a threaded run needs none
    from distributed import Client

__all__ = ["get_client", "scheduler_address", "describe_client", "environment_kept",
           "LOCAL_CLUSTER"]

#: Environment variable naming the scheduler when no address is given
#: (the variable Dask itself reads as the ``scheduler-address`` setting).
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
#: The address that asks :func:`get_client` for a local cluster, whatever the environment says.
LOCAL_CLUSTER = "local"


def scheduler_address(address: str | None = None) -> str | None:
    """The scheduler to use: ``address``, else ``$DASK_SCHEDULER_ADDRESS``, else None.

    Examples
    --------
    >>> scheduler_address("tcp://10.0.0.5:8786")
    'tcp://10.0.0.5:8786'
    """
    return address or os.environ.get(SCHEDULER_ENV) or None


def get_client(
    address: str | None = None,
    *,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    memory_limit: str | float | None = None,
    processes: bool = True,
) -> Client:
    """Connect to a Dask scheduler, or start a local cluster sized to the machine.

    Parameters
    ----------
    address : str, optional
        Scheduler address (``tcp://host:8786``, ``tls://host:8786``). Default:
        the ``DASK_SCHEDULER_ADDRESS`` environment variable; when neither is
        set, or the address is ``"local"``, a ``distributed.LocalCluster`` is
        started.
    n_workers, threads_per_worker, memory_limit, processes
        Shape of the local cluster (ignored with an address). None leaves
        Dask's choice: one worker process per core (fewer, multi-threaded,
        above 4 cores) and the machine's memory shared between them.

    Returns
    -------
    distributed.Client
        Closing it (or leaving its ``with`` block) also stops a local cluster
        it started.

    Raises
    ------
    InvalidParameterError
        A ``tls://`` address without TLS credentials in the Dask configuration.
    OSError
        The scheduler cannot be reached.

    Examples
    --------
    >>> with get_client(n_workers=1, threads_per_worker=1, processes=False) as client:
    ...     len(client.scheduler_info()["workers"])
    1
    """
    from distributed import Client

    address = None if address == LOCAL_CLUSTER else scheduler_address(address)
    if address is not None:
        if address.startswith("tls://"):
            _require_tls_configuration(address)
        # The client reads TLS settings from the Dask configuration itself.
        return Client(address)
    with environment_kept():
        return Client(n_workers=n_workers, threads_per_worker=threads_per_worker,
                      memory_limit="auto" if memory_limit is None else memory_limit,
                      processes=processes)


@contextlib.contextmanager
def environment_kept() -> Iterator[None]:
    """Undo, on leaving, what starting worker processes writes into ``os.environ``.

    A ``distributed`` nanny sets ``distributed.nanny.pre-spawn-environ``
    (``OMP_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``, ``MKL_NUM_THREADS=1``,
    ``MALLOC_TRIM_THRESHOLD_``) and ``PYTHONHASHSEED`` in the *calling*
    process's environment before it spawns a worker, because a child inherits
    the environment at spawn, before its numpy loads. Left there, they follow
    every later subprocess of the caller (a command line run from a notebook
    would get one BLAS thread). The workers started inside the block keep
    their settings; the caller gets its own values back (or none). A worker
    restarted later by its nanny sets them again until the cluster is left.

    Examples
    --------
    >>> import os
    >>> before = os.environ.get("OMP_NUM_THREADS")
    >>> with environment_kept():
    ...     os.environ["OMP_NUM_THREADS"] = "1"
    >>> os.environ.get("OMP_NUM_THREADS") == before
    True
    """
    names = {*dask.config.get("distributed.nanny.pre-spawn-environ", default={}),
             "PYTHONHASHSEED"}
    before = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _require_tls_configuration(address: str) -> None:
    from distributed.security import Security

    if Security().get_connection_args("client").get("ssl_context") is None:
        raise InvalidParameterError(
            f"The scheduler address {address} needs TLS, but no TLS credentials are "
            "configured. Set distributed.comm.tls.ca-file, .client.cert and .client.key "
            "(e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__"
            "CERT and DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY).")


def describe_client(client: Client) -> str:
    """One line saying where work runs and where to watch it.

    Examples
    --------
    >>> with get_client(n_workers=1, threads_per_worker=2, processes=False) as client:
    ...     describe_client(client).startswith("Dask: 1 worker(s), 2 thread(s)")
    True
    """
    workers = client.scheduler_info()["workers"].values()
    threads = sum(w.get("nthreads", 0) for w in workers)
    line = (f"Dask: {len(workers)} worker(s), {threads} thread(s) at "
            f"{client.scheduler.address}; dashboard {client.dashboard_link}")
    if client.cluster is not None and not _have_bokeh():
        line += " (install bokeh to serve it)"
    return line


def _have_bokeh() -> bool:
    import importlib.util

    return importlib.util.find_spec("bokeh") is not None
