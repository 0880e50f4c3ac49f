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
"""

from __future__ import annotations

import contextlib

import dask
import numpy as np
from dask.utils import parse_bytes

from .._parallel import distributed_client

__all__ = ["shared_values", "carrying", "LARGE_GRAPH_THRESHOLD"]

#: distributed's configuration key for the size past which it warns of a large graph.
LARGE_GRAPH_THRESHOLD = "distributed.admin.large-graph-warning-threshold"


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
    # pure=False: a key of its own per call, so that futures released by an earlier
    # computation can never free the value of this one (same content, same key).
    literals = [dask.delayed(value, pure=False) for value in arrays]
    with carrying(sum(array.nbytes for array in arrays)):
        futures = iter(client.compute(literals))
    return [next(futures) if isinstance(value, np.ndarray) else value for value in values]


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
