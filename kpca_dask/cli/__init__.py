"""The ``kpca-dask`` command: generate, fit, transform, invert, score, inspect and grow models.

A thin layer over the library: each subcommand opens its inputs with
:mod:`kpca_dask.io` (Zarr, or a ``.npy``, Parquet, CSV, HDF5 or netCDF file),
runs the estimator (on threads, or on a Dask client from
:mod:`kpca_dask.dask_client`) and writes its output atomically. Mistakes a
user can make (bad parameters, missing or unreadable input, an output that
exists) print one line,
``kpca-dask: error: ...``, and exit with status 2; they are found before any
Dask worker starts. A command computes on Dask's threaded scheduler in its
own process unless a cluster is asked for (``--scheduler``,
``$DASK_SCHEDULER_ADDRESS``, or a local-cluster option such as ``--workers``).
``fit``'s options default to
:class:`~kpca_dask.KernelPCA`'s own defaults: without ``--n-components`` it
keeps every component with a positive eigenvalue, without ``--seed`` it
draws its landmarks afresh.

The parser is :mod:`kpca_dask.cli.parser`, where and how a command computes
:mod:`kpca_dask.cli.compute`, the subcommands :mod:`kpca_dask.cli.commands`,
the data and weights they read :mod:`kpca_dask.cli.inputs` and the model
summary they print :mod:`kpca_dask.cli.summary`. Only the parser is imported
before the arguments are parsed, and it imports nothing heavy: ``--help``
answers before scikit-learn, dask.array or xarray load, and the commands'
modules are imported when a command runs.

Examples
--------
::

    kpca-dask generate two-shells --n-samples 1000000 --out data.zarr
    kpca-dask fit data.zarr --model model.zarr --n-components 10 --gamma 0.5 --seed 0
    kpca-dask transform model.zarr data.zarr --out embedding.zarr
    kpca-dask inverse-transform model.zarr embedding.zarr --out reconstruction.zarr
    kpca-dask score model.zarr data.zarr --out errors.zarr
    kpca-dask info model.zarr
    kpca-dask info model.zarr --n-components 0.95
    kpca-dask resolve model.zarr --n-components 0.95 --out model-95.zarr
    kpca-dask update model.zarr data.zarr --rows 1000000:1100000
    kpca-dask merge shard-1.zarr shard-2.zarr --out model.zarr
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .parser import PROG, CommandError, build_parser

__all__ = ["main", "build_parser"]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kpca-dask``; returns the exit status (0, or 2 for a user error).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program's name; default ``sys.argv[1:]``.

    Examples
    --------
    A user error prints one line on stderr and returns 2:

    >>> main(["info", "no-such-model.zarr"])
    2
    """
    args = build_parser().parse_args(argv)
    # Imported now, not with the package: --help and argument errors need none of it.
    from ..errors import KPCAError
    from .commands import COMMANDS

    try:
        COMMANDS[args.command](args)
    except (KPCAError, FileNotFoundError, FileExistsError, CommandError) as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return 0
