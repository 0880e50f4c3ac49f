"""Small arrays that every task of a graph reads, shared once and recomputable.

The landmarks, a projection, the reference row: every task over the row
blocks reads them, so each goes to the workers once, not inside every task.
On a local scheduler each is one key of the graph. On a cluster each becomes
a task of its own, computed once (``client.compute`` of a literal), and the
graph reads its future, so the graphs the user computes stay small.

Why a computed literal and not ``client.scatter``: a worker lost
mid-computation (an OOM-killed pod, a node gone) must cost only its own
results. The scheduler keeps a literal task's value and reruns it on another
worker; scattered data has no such way back. Distributed's memory manager
keeps one replica of data that no pending task needs yet
(``ReduceReplicas``), so even data broadcast to every worker may live on the
one that is lost, and every task that reads it is then cancelled. The price
is the scheduler's copy of each array for as long as its future is held (by
the fit, or by a lazy result that reads it): m p words for the landmarks.
That copy is bounded by dask's configuration key ``kpca-dask.scheduler-copy``
(bytes, or a string such as ``"1 GiB"``; default 256 MiB a call): arrays
beyond it, such as the landmarks of very wide data, are scattered to every
worker as before, and a worker lost while it holds their last replica then
fails the computation.
"""

from __future__ import annotations

import contextlib

import dask
import numpy as np
from dask.utils import parse_bytes

from .._parallel import distributed_client

__all__ = ["shared_values", "carrying", "scheduler_copy_bytes", "LARGE_GRAPH_THRESHOLD",
           "SCHEDULER_COPY_KEY"]

#: distributed's configuration key for the size past which it warns of a large graph.
LARGE_GRAPH_THRESHOLD = "distributed.admin.large-graph-warning-threshold"

#: dask configuration key: the most bytes of arrays one call shares as tasks, of which
#: the scheduler keeps a copy (the module docstring); beyond it they are scattered.
SCHEDULER_COPY_KEY = "kpca-dask.scheduler-copy"

#: The default of ``kpca-dask.scheduler-copy``: a small share of the 2 GiB that the
#: deployment's scheduler pod is given (deploy/kustomize/scheduler-deployment.yaml).
SCHEDULER_COPY_BYTES = 256 * 2**20


def shared_values(like, *values) -> list:
    """Each array of ``values`` shared once with the tasks over ``like``; others as they are.

    ``like`` is the collection the values go with, or the ``distributed.Client``
    to share them on (None: the scheduler in effect now). Returns a list like
    ``values``: on a cluster a future per array, else a ``Delayed`` literal
    (equal arrays, equal keys).

    Examples
    --------
    >>> import dask.array as da
    >>> with dask.config.set(scheduler="threads"):
    ...     a, b = shared_values(da.zeros(2), np.ones(3), None)
    >>> a.compute().tolist(), b
    ([1.0, 1.0, 1.0], None)
    """
    from distributed import Client  # noqa: PLC0415 - a dependency, imported when used

    client = like if isinstance(like, Client) else distributed_client(like)
    if client is None:
        return [dask.delayed(value, pure=True) if isinstance(value, np.ndarray) else value
                for value in values]
    arrays = [value for value in values if isinstance(value, np.ndarray)]
    nbytes = sum(array.nbytes for array in arrays)
    if nbytes > scheduler_copy_bytes():
        # hash=False: a key of its own per call, as below.
        return [client.scatter(value, broadcast=True, hash=False)
                if isinstance(value, np.ndarray) else value for value in values]
    # pure=False: a key of its own per call, so that futures released by an earlier
    # computation can never free the value of this one (same content, same key).
    literals = [dask.delayed(value, pure=False) for value in arrays]
    with carrying(nbytes):
        futures = iter(client.compute(literals))
    return [next(futures) if isinstance(value, np.ndarray) else value for value in values]


def scheduler_copy_bytes() -> int:
    """The most bytes one call shares as tasks the scheduler keeps (``kpca-dask.scheduler-copy``).

    Examples
    --------
    >>> with dask.config.set({SCHEDULER_COPY_KEY: "1 MiB"}):
    ...     scheduler_copy_bytes()
    1048576
    """
    value = dask.config.get(SCHEDULER_COPY_KEY, SCHEDULER_COPY_BYTES)
    return parse_bytes(value) if isinstance(value, str) else int(value)


@contextlib.contextmanager
def carrying(nbytes: int):
    """Raise distributed's large-graph warning threshold by ``nbytes`` while inside.

    For the graph that carries the shared arrays themselves (the module
    docstring): they have no cheaper way to the cluster, and the warning is
    kept for anything else.

    Examples
    --------
    >>> with dask.config.set({LARGE_GRAPH_THRESHOLD: "1MB"}), carrying(1000):
    ...     dask.config.get(LARGE_GRAPH_THRESHOLD)
    '1001000B'
    """
    current = parse_bytes(dask.config.get(LARGE_GRAPH_THRESHOLD, "10MB"))
    with dask.config.set({LARGE_GRAPH_THRESHOLD: f"{current + int(nbytes)}B"}):
        yield
