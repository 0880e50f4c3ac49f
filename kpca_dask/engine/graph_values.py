"""Small arrays that every task of a graph reads, shared once and recomputable.

The landmarks, a projection, the reference row: every task over the row
blocks reads them, so each goes to the workers once, not inside every task.
On a local scheduler each is one key of the graph. On a cluster each becomes
a task of its own, computed once (``client.compute`` of a literal), and the
graph reads its future, so the graphs the user computes stay small.

Why a computed literal and never ``client.scatter`` (docs/design.md §14): a
worker lost mid-computation (an OOM-killed pod, a node gone) must cost only
its own results. The scheduler keeps a literal task's recipe and reruns it on
another worker; scattered data has no recipe. Distributed's memory manager
keeps one replica of data that no pending task needs yet (``ReduceReplicas``),
so even data broadcast to every worker may live on the one that is lost, and
every task that reads it is then cancelled. The price is the scheduler's copy
of each array for as long as its future is held (by the fit, or by a lazy
result that reads it): m p words for the landmarks. That copy is bounded by
dask's configuration key ``kpca-dask.scheduler-copy`` (bytes, or a string
such as ``"1 GiB"``; default 256 MiB a call): a call that would share more,
such as the landmarks of very wide data, is refused before anything is sent,
with the key to raise (and the scheduler's memory to give it).
"""

from __future__ import annotations

import contextlib
import sys

import dask
import numpy as np
from dask.utils import format_bytes, parse_bytes

from .._parallel import distributed_client
from ..errors import InsufficientMemoryError

__all__ = ["shared_values", "carrying", "scheduler_copy_bytes", "refuse_beyond_scheduler_copy",
           "LARGE_GRAPH_THRESHOLD", "SCHEDULER_COPY_KEY"]

#: distributed's configuration key for the size past which it warns of a large graph.
LARGE_GRAPH_THRESHOLD = "distributed.admin.large-graph-warning-threshold"

#: dask configuration key: the most bytes of arrays one call shares as tasks, of which
#: the scheduler keeps a copy (the module docstring); a call that would share more is refused.
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
    client = like if _is_client(like) else distributed_client(like)
    if client is None:
        return [dask.delayed(value, pure=True) if isinstance(value, np.ndarray) else value
                for value in values]
    arrays = [value for value in values if isinstance(value, np.ndarray)]
    nbytes = sum(array.nbytes for array in arrays)
    refuse_beyond_scheduler_copy(nbytes)
    # Keys from the values' contents: deterministic, and one key names one value
    # (docs/design.md §14). A second call with the same array takes the same key and the
    # same recipe; the client counts its futures per key, so releasing the first call's
    # never frees the second's.
    literals = [dask.delayed(value, pure=True) for value in arrays]
    with carrying(nbytes):
        futures = iter(client.compute(literals))
    return [next(futures) if isinstance(value, np.ndarray) else value for value in values]


def _is_client(like) -> bool:
    """Whether ``like`` is a ``distributed.Client`` (none can be before distributed is
    imported, and importing it takes about 0.2 s of a process's first fit)."""
    if "distributed" not in sys.modules:
        return False
    from distributed import Client  # noqa: PLC0415 - imported already

    return isinstance(like, Client)


def refuse_beyond_scheduler_copy(nbytes: int) -> None:
    """Raise :class:`~kpca_dask.errors.InsufficientMemoryError` if one call would give the
    scheduler more than ``kpca-dask.scheduler-copy`` bytes to keep.

    Examples
    --------
    >>> with dask.config.set({SCHEDULER_COPY_KEY: "1 MiB"}):
    ...     refuse_beyond_scheduler_copy(2**21)
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InsufficientMemoryError: The arrays every task reads (2.00 MiB: ...
    """
    most = scheduler_copy_bytes()
    if nbytes <= most:
        return
    raise InsufficientMemoryError(
        f"The arrays every task reads ({format_bytes(nbytes)}: the landmarks and the "
        f"model's small arrays) would be kept by the Dask scheduler, which may keep at most "
        f"{format_bytes(most)} of them (dask's configuration key {SCHEDULER_COPY_KEY!r}). "
        f"Give the scheduler that memory and raise the key, e.g. "
        f"dask.config.set({{{SCHEDULER_COPY_KEY!r}: '{format_bytes(2 * nbytes)}'}}) or the "
        "environment variable DASK_KPCA_DASK__SCHEDULER_COPY; or use fewer landmarks "
        "(n_landmarks) or fewer features.")


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
