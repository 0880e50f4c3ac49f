"""Where a subcommand computes, and what it checks before anything starts.

:func:`compute_context` runs a subcommand's computations in this process on
Dask's threaded scheduler, unless a cluster is asked for: a Dask client
(``--scheduler``, ``$DASK_SCHEDULER_ADDRESS``) or a local cluster of worker
processes (``--workers``, ``--threads-per-worker``, ``--memory-limit``,
``--scheduler local``). Threads start at once and share the process's memory
without a copy; worker processes take seconds to start and send every result
back, which pays only on data that outgrow one process. :class:`ProgressGet`
shows distributed's progress bar on stderr, and dask's ``ProgressBar`` does so
on threads. :func:`check_parameters` finds a wrong parameter before any worker
starts, through the same table ``fit`` checks them with
(:func:`kpca_dask.model.parameters.check_params`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Iterator

import dask

from ..blocks.kernels import canonical_kernel_name
from ..estimators.exact import ExactKernelPCA
from ..estimators.kernel_pca import KernelPCA
from ..model.parameters import CONSTRAINTS, EXACT_CONSTRAINTS, check_params, resolve_kernel_params
from .parser import LOCAL_CLUSTER_OPTIONS, LOCAL_SCHEDULERS, CommandError

__all__ = ["CommandError", "LOCAL_SCHEDULERS", "ProgressGet", "compute_context", "scheduler_of",
           "check_parameters"]


class ProgressGet:
    """A dask ``get`` that runs on the client and shows distributed's progress bar.

    The bar goes to stderr, so that stdout keeps only the command's results.

    Examples
    --------
    >>> from distributed import Client
    >>> with Client(processes=False, dashboard_address=None) as client:
    ...     with dask.config.set(scheduler=ProgressGet(client)):
    ...         int(dask.array.ones(10, chunks=5).sum().compute())
    10
    """

    #: How often the scheduler feeds a bar (distributed's ``progress`` default, 100 ms).
    FEED_INTERVAL_S = 0.1

    def __init__(self, client):
        self.client = client
        self.last_bar_end = -math.inf

    def __call__(self, dsk, keys, **kwargs):
        futures = self.client.get(dsk, keys, sync=False, **kwargs)
        self.show_progress(futures)
        return self.client.gather(futures)

    def show_progress(self, futures) -> None:
        """The bar of ``futures`` until they are done: also for results the library persists
        on the cluster itself (:func:`kpca_dask._parallel.persisted_on`)."""
        from distributed import progress

        with contextlib.redirect_stdout(sys.stderr):  # keep stdout for results
            progress(futures)
            sys.stdout.write("\n")
        self.last_bar_end = time.monotonic()

    def let_feeds_end(self) -> None:
        """Wait until the scheduler's feed of the last bar has ended.

        The scheduler writes to a bar every :attr:`FEED_INTERVAL_S` and learns that the
        bar is gone only at its next write; a scheduler closed in between cancels the
        feed, and distributed logs that as an ERROR with a traceback. Two intervals after
        the bar's end the feed is over (at most 0.2 s, only when a bar was shown).
        """
        wait = self.last_bar_end + 2 * self.FEED_INTERVAL_S - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def scheduler_of(args: argparse.Namespace) -> str:
    """Where a command computes: "threads" or "synchronous" (in this process), a scheduler's
    address, or "local" for a local cluster of worker processes.

    Examples
    --------
    >>> args = argparse.Namespace(scheduler=None, workers=2, threads_per_worker=None,
    ...                           memory_limit=None)
    >>> scheduler_of(args)
    'local'
    >>> scheduler_of(argparse.Namespace(**{**vars(args), "scheduler": "tcp://10.0.0.5:8786"}))
    'tcp://10.0.0.5:8786'
    """
    from ..dask_client import LOCAL_CLUSTER, scheduler_address

    address = scheduler_address(args.scheduler)
    if address is not None:
        return address
    asked = any(getattr(args, option, None) is not None for option in LOCAL_CLUSTER_OPTIONS)
    return LOCAL_CLUSTER if asked else "threads"


@contextlib.contextmanager
def compute_context(args: argparse.Namespace) -> Iterator[None]:
    """Where and how the command computes: a local scheduler or a distributed client.

    ``args`` holds the options of :func:`kpca_dask.cli.parser.build_parser`'s
    "where to compute" group (:func:`scheduler_of` reads them). A scheduler that
    cannot be reached is a :class:`CommandError`.

    Examples
    --------
    >>> import dask.array as da
    >>> args = argparse.Namespace(scheduler="synchronous", progress=False)
    >>> with compute_context(args):
    ...     int(da.ones(10, chunks=5).sum().compute())
    10
    """
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()
    address = scheduler_of(args)
    if address in LOCAL_SCHEDULERS:
        from dask.diagnostics import ProgressBar

        bar = ProgressBar(out=sys.stderr) if show_progress else contextlib.nullcontext()
        with dask.config.set(scheduler=address), bar:
            yield
        return
    from ..dask_client import describe_client, get_client

    try:
        client = get_client(address, n_workers=getattr(args, "workers", None),
                            threads_per_worker=getattr(args, "threads_per_worker", None),
                            memory_limit=getattr(args, "memory_limit", None))
    except (OSError, TimeoutError) as exc:
        raise CommandError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    with client:
        print(describe_client(client), file=sys.stderr, flush=True)
        scheduler = ProgressGet(client) if show_progress else client.get
        try:
            with dask.config.set(scheduler=scheduler):
                yield
        finally:
            if show_progress:
                scheduler.let_feeds_end()  # before the client (and a local cluster) closes


def check_parameters(kpca: KernelPCA | ExactKernelPCA, n_features: int) -> None:
    """Refuse bad estimator parameters now rather than after the cluster has started.

    The checks ``fit`` makes before it reads any data: every parameter
    against the table, then the kernel's parameters for ``n_features``
    columns (a ``kernel_params`` key the kernel does not take, say).

    Examples
    --------
    >>> check_parameters(KernelPCA(kernel="matern", kernel_params={"nu": 2.5}), 3)
    >>> check_parameters(KernelPCA(kernel_params={"nu": 2.5}), 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: kernel_params has 'nu', which the 'rbf' kernel ...
    """
    exact = isinstance(kpca, ExactKernelPCA)
    check_params(kpca.get_params(deep=False), constraints=EXACT_CONSTRAINTS if exact
                 else CONSTRAINTS, estimator=type(kpca).__name__)
    gamma = None if isinstance(kpca.gamma, str) else kpca.gamma  # a rule, checked above
    resolve_kernel_params(canonical_kernel_name(kpca.kernel), n_features, gamma=gamma,
                          degree=kpca.degree, coef0=kpca.coef0,
                          kernel_params=kpca.kernel_params)
