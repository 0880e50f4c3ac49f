"""Where a subcommand computes, and what it checks before anything starts.

:func:`compute_context` runs a subcommand's computations on a Dask client
(``--scheduler``, ``$DASK_SCHEDULER_ADDRESS`` or a local cluster), or in this
process; :class:`ProgressGet` shows distributed's progress bar on stderr.
:func:`open_data` and :func:`check_parameters` find a wrong path or parameter
before any worker starts: the parameters through the same table ``fit``
checks them with (:func:`kpca_dask.model.parameters.check_params`).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator

import dask

from ..blocks.kernels import canonical_kernel_name
from ..estimators.exact import ExactKernelPCA
from ..estimators.kernel_pca import KernelPCA
from ..model.parameters import CONSTRAINTS, EXACT_CONSTRAINTS, check_params, resolve_kernel_params

__all__ = ["CommandError", "LOCAL_SCHEDULERS", "ProgressGet", "compute_context", "open_data",
           "check_parameters"]

#: Scheduler names that run in this process instead of on a distributed client.
LOCAL_SCHEDULERS = ("threads", "synchronous")


class CommandError(Exception):
    """A problem the user can fix, found by the command line itself."""


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

    def __init__(self, client):
        self.client = client

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


@contextlib.contextmanager
def compute_context(args: argparse.Namespace) -> Iterator[None]:
    """Where and how the command computes: a distributed client or a local scheduler.

    ``args`` holds the options of :func:`kpca_dask.cli.parser.build_parser`'s
    "where to compute" group. A scheduler that cannot be reached is a
    :class:`CommandError`.

    Examples
    --------
    >>> import dask.array as da
    >>> args = argparse.Namespace(scheduler="synchronous", progress=False)
    >>> with compute_context(args):
    ...     int(da.ones(10, chunks=5).sum().compute())
    10
    """
    from ..dask_client import describe_client, get_client, scheduler_address

    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()
    address = scheduler_address(args.scheduler)
    if address in LOCAL_SCHEDULERS:
        from dask.diagnostics import ProgressBar

        bar = ProgressBar(out=sys.stderr) if show_progress else contextlib.nullcontext()
        with dask.config.set(scheduler=address), bar:
            yield
        return
    try:
        client = get_client(address, n_workers=args.workers,
                            threads_per_worker=args.threads_per_worker,
                            memory_limit=args.memory_limit)
    except (OSError, TimeoutError) as exc:
        raise CommandError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    with client:
        print(describe_client(client), file=sys.stderr, flush=True)
        scheduler = ProgressGet(client) if show_progress else client.get
        with dask.config.set(scheduler=scheduler):
            yield


def open_data(args: argparse.Namespace):
    """The data, opened lazily before any worker starts: a bad path fails here, at once.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> path = tempfile.mkdtemp() + "/x.npy"
    >>> np.save(path, np.ones((4, 2)))
    >>> args = argparse.Namespace(data=path, array=None, format=None, columns=None,
    ...                           header=None)
    >>> open_data(args).shape
    (4, 2)
    """
    from ..io import open_array

    return open_array(args.data, array=args.array, format=args.format, columns=args.columns,
                      header=args.header, sample_dim=getattr(args, "sample_dim", None))


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
