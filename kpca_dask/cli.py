"""The ``kpca-dask`` command: generate, fit, transform, invert, score, inspect and grow models.

A thin layer over the library: each subcommand opens its inputs with
:mod:`kpca_dask.io` (Zarr, or a ``.npy``, Parquet, CSV, HDF5 or netCDF file),
runs the estimator on a Dask client from :mod:`kpca_dask.dask_client` and
writes its output atomically. Mistakes a user can make (bad parameters,
missing or unreadable input, an output that exists) print one line,
``kpca-dask: error: ...``, and exit with status 2; they are found before any
Dask worker starts.

Examples
--------
::

    kpca-dask generate two-shells --n-samples 1000000 --out data.zarr
    kpca-dask fit data.zarr --model model.zarr --n-components 10 --gamma 0.5
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

import argparse
import contextlib
import json
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence

import dask
import numpy as np

from .blocks.kernels import KERNEL_NAMES
from .datasets import DATASETS, make_dataset
from .errors import InvalidParameterError, KPCAError
from .io.formats import FORMATS
from .model.estimator import KernelPCA

#: The estimator's own defaults, so the command line never disagrees with it.
_LIBRARY_DEFAULTS = KernelPCA().get_params()

__all__ = ["main", "build_parser"]

PROG = "kpca-dask"
#: An option not given (None means "all components" for --n-components).
_UNSET = object()
#: Scheduler names that run in this process instead of on a distributed client.
LOCAL_SCHEDULERS = ("threads", "synchronous")


class _CommandError(Exception):
    """A problem the user can fix, found by the command line itself."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage dump
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# -- argument types ----------------------------------------------------------


def _n_components(text: str) -> int | float | None:
    if text.lower() in ("all", "none"):
        return None
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    raise argparse.ArgumentTypeError(
        f"{text!r} is not an int, a fraction in (0, 1) or 'all'")


def _number_or_name(text: str) -> float | str:
    with contextlib.suppress(ValueError):
        return float(text)
    return text


def _column_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of columns")
    return names


def _landmark_count(text: str) -> int | str:
    return "auto" if text == "auto" else _positive_int(text)


def _row_range(text: str) -> tuple[int | None, int | None]:
    start, colon, stop = text.partition(":")
    try:
        if not colon:
            raise ValueError
        return (int(start) if start.strip() else None, int(stop) if stop.strip() else None)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a row range START:STOP (e.g. 1000000:1100000, or 1000000: for "
            "every row from there on)") from None


def _positive_int(text: str) -> int:
    try:
        value = int(float(text))  # accepts 1e6
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1 or value != float(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


# -- the Dask client and the progress bar -------------------------------------


class _ProgressGet:
    """A dask ``get`` that runs on the client and shows distributed's progress bar."""

    def __init__(self, client):
        self.client = client

    def __call__(self, dsk, keys, **kwargs):
        from distributed import progress

        futures = self.client.get(dsk, keys, sync=False, **kwargs)
        with contextlib.redirect_stdout(sys.stderr):  # keep stdout for results
            progress(futures)
            sys.stdout.write("\n")
        return self.client.gather(futures)


@contextlib.contextmanager
def _compute_context(args) -> Iterator[None]:
    """Where and how the command computes: a distributed client or a local scheduler."""
    from .dask_client import describe_client, get_client, scheduler_address

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
        raise _CommandError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    with client:
        print(describe_client(client), file=sys.stderr, flush=True)
        scheduler = _ProgressGet(client) if show_progress else client.get
        with dask.config.set(scheduler=scheduler):
            yield


def _add_compute_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where to compute")
    group.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="Dask scheduler address (tcp://... or tls://...; TLS credentials from the Dask "
             "config). Default: $DASK_SCHEDULER_ADDRESS, else a local cluster. "
             f"{' or '.join(LOCAL_SCHEDULERS)} compute in this process instead.")
    group.add_argument("--workers", type=_positive_int, metavar="N",
                       help="local cluster: worker processes (default: sized to the machine)")
    group.add_argument("--threads-per-worker", type=_positive_int, metavar="T",
                       help="local cluster: threads per worker")
    group.add_argument("--memory-limit", metavar="BYTES",
                       help="local cluster: memory per worker, e.g. 4GiB (default: auto)")
    group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="show a progress bar on stderr (default: when stderr is a terminal)")


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reading the data")
    group.add_argument("--array", metavar="NAME",
                       help="array in a Zarr group or an HDF5 file, or variable in a netCDF file "
                            "(needed when there are several 2-D ones)")
    group.add_argument("--format", choices=FORMATS,
                       help="format of the data when its extension does not say it (.zarr, "
                            ".npy, .parquet, .csv, .h5/.hdf5, .nc)")
    group.add_argument("--columns", type=_column_list, metavar="A,B,...",
                       help="Parquet or CSV: the columns to use (default: all); CSV columns "
                            "without a header are numbered from 0")
    group.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                       help="CSV: the first line names the columns (default: unless every "
                            "field of it is a number)")


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("writing the output")
    group.add_argument("--out-format", choices=("zarr", "parquet"),
                       help="format of the output (default: Parquet for a .parquet/.pq --out, "
                            "else Zarr)")
    group.add_argument("--keep-columns", type=_column_list, metavar="ID,...",
                       help="Parquet or CSV input, Parquet output: copy these columns (keys "
                            "such as an id) beside the outputs, row for row")
    group.add_argument("--out-dtype", choices=("float32", "float64"),
                       help="dtype of the outputs (default: the model's, float32 for a "
                            "--dtype float32 fit)")


def _open_data(args):
    """The data, opened lazily before any worker starts: a bad path fails here, at once."""
    from .io import open_array

    return open_array(args.data, array=args.array, format=args.format, columns=args.columns,
                      header=args.header)


def _check_parameters(kpca: KernelPCA, X) -> None:
    """Refuse bad estimator parameters now rather than after the cluster has started.

    The same checks ``fit`` makes before it reads any data: the table of
    :mod:`kpca_dask.model.parameters`, then the kernel's parameters.
    """
    from .blocks.kernels import canonical_kernel_name
    from .engine.bandwidth import BANDWIDTH_RULES
    from .model.parameters import check_params, resolve_kernel_params

    rule = kpca.gamma if isinstance(kpca.gamma, str) else None
    if rule is not None and rule not in BANDWIDTH_RULES:
        raise InvalidParameterError(
            f"--gamma {rule} is neither a number nor a rule; use a positive number, "
            f"{' or '.join(BANDWIDTH_RULES)}.")
    check_params(kpca.get_params(deep=False))
    kernel = canonical_kernel_name(kpca.kernel)
    resolve_kernel_params(kernel, X.shape[1], gamma=None if rule else kpca.gamma,
                          degree=kpca.degree, coef0=kpca.coef0, kernel_params=kpca.kernel_params)


# -- subcommands ---------------------------------------------------------------


def _generate(args) -> None:
    from .io import check_can_write, write_array

    check_can_write(args.out, overwrite=args.overwrite)
    X, _ = make_dataset(args.kind, args.n_samples, n_features=args.n_features,
                        chunk_rows=args.chunk_rows, seed=args.seed, dtype=args.dtype)
    attrs = {"dataset": args.kind, "seed": args.seed, "generated_by": f"{PROG} generate"}
    with _compute_context(args):
        started = time.perf_counter()
        write_array(X, args.out, overwrite=args.overwrite, attrs=attrs)
        seconds = time.perf_counter() - started
    print(f"wrote {args.out}: {X.shape[0]} x {X.shape[1]} {X.dtype}, "
          f"{X.numblocks[0]} chunk(s) of up to {X.chunks[0][0]} rows, in {seconds:.2f} s")


def _fit(args) -> None:
    from .io import check_can_write, open_array
    from .model.estimator import KernelPCA

    check_can_write(args.model, overwrite=args.overwrite)
    X = _open_data(args)
    landmarks = args.landmarks
    if os.path.exists(landmarks) or "://" in landmarks:
        landmarks = np.asarray(open_array(landmarks).compute(scheduler="threads"))
    kpca = KernelPCA(
        n_components=args.n_components, kernel=args.kernel, gamma=args.gamma,
        degree=args.degree, coef0=args.coef0,
        kernel_params={"nu": args.nu} if args.nu is not None else None,
        remove_zero_eig=args.remove_zero_eig,
        n_landmarks=args.n_landmarks, tol=args.tol, landmarks=landmarks, dtype=args.dtype,
        random_state=args.seed, fit_inverse_transform=args.fit_inverse_transform,
        alpha=args.alpha)
    _check_parameters(kpca, X)
    with _compute_context(args):
        kpca.fit(X, checkpoint=args.checkpoint)
    names = _table_names(args)
    if names is not None:  # as a fit on the table's frame would set them
        kpca.feature_names_in_ = names
    kpca.save(args.model, overwrite=args.overwrite)
    print(f"wrote {args.model}")
    _print_summary(_summary(kpca, args.model))


def _transform(args) -> None:
    _write_model_output(args, "transform")


def _inverse_transform(args) -> None:
    _write_model_output(args, "inverse_transform")


def _score(args) -> None:
    _write_model_output(args, "reconstruction_error")


def _write_model_output(args, method: str) -> None:
    """Apply a fitted model's ``method`` to the data and write the result as Zarr or Parquet
    (by the output's extension or --out-format); a table input may keep key columns."""
    from . import load
    from .io import check_can_write, write_array, write_embedding
    from .io.formats import file_format
    from .io.parquet_out import output_format, write_table
    from .model.table_outputs import output_dtype

    out_format = output_format(args.out, args.out_format)
    check_can_write(args.out, overwrite=args.overwrite)
    model = load(args.model)
    dtype = output_dtype(model, args.out_dtype)
    try:
        kind = file_format(args.data, args.format)
    except KPCAError:
        kind = "other"  # e.g. a sparse .npz: _open_data reads it or says why not
    if args.keep_columns and kind not in ("parquet", "csv"):
        raise _CommandError(f"--keep-columns copies columns of a Parquet or CSV input; "
                            f"{args.data} is {kind}.")
    if args.keep_columns and out_format != "parquet":
        raise _CommandError("--keep-columns needs a Parquet output (--out NAME.parquet, or "
                            "--out-format parquet).")
    _columns_of_model(args, model, method, kind)
    # Built lazily before any worker starts, so that a wrong file or shape fails at once.
    started = time.perf_counter()
    if out_format == "parquet":
        result = _table_output(args, model, method, kind, dtype)
        writer = write_table
        shape = (f"{len(result.columns)} column(s) ({', '.join(map(str, result.columns[:6]))}"
                 f"{', ...' if len(result.columns) > 6 else ''}), Parquet")
    else:
        with warnings.catch_warnings():
            # A table's columns were matched to the model's names above; the array has none.
            warnings.filterwarnings("ignore", message="X does not have valid feature names")
            result = getattr(model, method)(_open_data(args)).astype(dtype)
        writer = write_embedding if method == "transform" else write_array
        shape = " x ".join(str(n) for n in result.shape)
    with _compute_context(args):
        writer(result, args.out, overwrite=args.overwrite)
        seconds = time.perf_counter() - started
    print(f"wrote {args.out}: {shape} {dtype}, in {seconds:.2f} s")


def _table_names(args):
    """The feature names of a Parquet or CSV input (string column names), or None."""
    from .io.formats import file_format
    from .io.frames import frame_feature_names
    from .io.tables import read_table

    try:
        kind = file_format(args.data, args.format)
    except KPCAError:
        return None  # e.g. a sparse .npz, read by its own reader
    if kind not in ("parquet", "csv"):
        return None
    frame = read_table(args.data, kind, columns=args.columns, header=args.header,
                       block_rows=1)
    return frame_feature_names(frame)


def _columns_of_model(args, model, method: str, kind: str) -> None:
    """A table input's columns default to the model's feature names; other ones are refused
    as scikit-learn refuses them."""
    names = getattr(model, "feature_names_in_", None)
    if kind not in ("parquet", "csv") or names is None or method == "inverse_transform":
        return
    if args.columns is None:
        args.columns = [str(name) for name in names]
        return
    import pandas as pd

    from .io.frames import check_feature_names

    check_feature_names(model, pd.DataFrame(columns=list(args.columns)), reset=False)


def _table_output(args, model, method: str, kind: str, dtype):
    """The lazy frame a Parquet output is written from."""
    from .model.table_outputs import output_names, transform_table

    if kind in ("parquet", "csv"):
        from .io.tables import read_table
        from .validation import DEFAULT_BLOCK_ROWS

        frame = read_table(args.data, kind, header=args.header, block_rows=DEFAULT_BLOCK_ROWS)
        return transform_table(model, frame, method, columns=args.columns,
                               keep_columns=args.keep_columns or (), dtype=dtype)
    import dask.dataframe as dd

    result = getattr(model, method)(_open_data(args))
    result = getattr(result, "data", result).astype(dtype)  # a DataArray's dask array
    if result.ndim == 1:
        result = result[:, None]
    return dd.from_dask_array(result, columns=output_names(model, method))


def _info(args) -> None:
    from . import load

    model = load(args.model)
    if args.n_components is not _UNSET:
        # Re-solved in memory from the stored statistics; the file is not touched.
        model.set_n_components(args.n_components)
    summary = _summary(model, args.model)
    if args.n_components is not _UNSET:
        summary["re_solved_for"] = args.n_components
        if not args.json:
            print(f"re-solved for n_components={_shown_components(args.n_components)} from the "
                  "stored statistics; the model file is unchanged")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)


def _shown_components(n_components) -> str:
    return "all" if n_components is None else str(n_components)


def _resolve(args) -> None:
    from . import load
    from .io import check_can_write

    check_can_write(args.out, overwrite=args.overwrite)
    model = load(args.model).set_n_components(args.n_components)
    model.save(args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}: re-solved for n_components="
          f"{_shown_components(args.n_components)}, without reading the data")
    _print_summary(_summary(model, args.out))


def _update(args) -> None:
    from . import load
    from .io import check_can_write, open_array, store_location
    from .io.replacing import replace_unchanged, staging_path, version_of
    from .model.provenance import recorded_rows, source_of, with_rows

    out = args.out or args.model
    in_place = os.path.abspath(out) == os.path.abspath(args.model)
    if not in_place:
        check_can_write(out, overwrite=args.overwrite)
    version = version_of(args.model) if store_location(args.model).local else None
    model = load(args.model)
    X = open_array(args.data, array=args.array)
    start, stop, _ = slice(*args.rows).indices(X.shape[0])
    if start >= stop:
        raise _CommandError(f"--rows {args.rows[0]}:{args.rows[1]} selects no rows of "
                            f"{args.data}, which has {X.shape[0]}")
    # Refused now, before a cluster starts, if the model holds some of these rows.
    with_rows(recorded_rows(model), source_of(X), start, stop)
    with _compute_context(args):
        started = time.perf_counter()
        model.partial_fit(X, rows=(start, stop))
        seconds = time.perf_counter() - started
    if in_place and store_location(out).local:
        # Written beside the model, then swapped in only if no other process replaced it
        # meanwhile (it would hold rows this model lacks): a kill leaves the old model.
        staged = staging_path(out)
        model.save(staged)
        replace_unchanged(staged, out, version)
    else:
        model.save(out, overwrite=in_place or args.overwrite)
    print(f"wrote {out}: added rows {start}:{stop} of {args.data} in {seconds:.2f} s; "
          f"{model.n_samples_fit_} rows seen in all")
    _print_summary(_summary(model, out))


def _merge(args) -> None:
    from . import load, merge
    from .io import check_can_write

    check_can_write(args.out, overwrite=args.overwrite)
    merged = merge([load(path) for path in args.models], names=args.models)
    merged.save(args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}: {len(args.models)} models merged, "
          f"{merged.n_samples_fit_} rows seen in all")
    _print_summary(_summary(merged, args.out))


def _summary(model, path) -> dict:
    from . import __version__
    from .model.provenance import recorded_rows

    ratio = np.asarray(model.explained_variance_ratio_)
    return {
        "model": os.fspath(path),
        "kpca_dask_version": __version__,
        "kernel": model.kernel_,
        "kernel_params": model.kernel_params_,
        "n_landmarks": int(model.n_landmarks_),
        "landmarks": model.landmarks if isinstance(model.landmarks, str) else "explicit",
        "landmark_rank": int(model.landmark_rank_),
        "n_components": int(model.n_components_),
        "eigenvalues": np.asarray(model.eigenvalues_).tolist(),
        "explained_variance_ratio": ratio.tolist(),
        "explained_variance_total": float(ratio.sum()),
        "trace_error": float(model.trace_error_),
        "n_samples_fit": int(model.n_samples_fit_),
        "n_features_in": int(model.n_features_in_),
        "feature_names_in": _names(model),
        "fit_seconds": float(model.fit_seconds_),
        "dtype": model.dtype,
        "statistics_kept": getattr(model, "statistics_", None) is not None,
        "can_invert": hasattr(model, "preimage_coefficients_"),
        "row_provenance": recorded_rows(model),
    }


def _print_summary(s: dict) -> None:
    from .model.provenance import describe

    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in s["kernel_params"].items())
    rows = [
        ("kernel", f"{s['kernel']}({params})"),
        ("landmarks", f"m = {s['n_landmarks']} ({s['landmarks']}), rank {s['landmark_rank']}, "
                      f"{s['dtype']} blocks"),
        ("trained on", f"n = {s['n_samples_fit']} rows x {s['n_features_in']} features"),
        ("fit time", f"{s['fit_seconds']:.2f} s"),
        ("trace error", f"{s['trace_error']:.3e}  (relative error of the Nystrom trace)"),
        ("components", f"{s['n_components']}, explaining "
                       f"{100 * s['explained_variance_total']:.2f} % of the variance"),
        ("eigenvalues", _short_list(s["eigenvalues"])),
        ("explained", _short_list(s["explained_variance_ratio"])),
        ("updates", "update, merge and resolve work (statistics kept)" if s["statistics_kept"]
                    else "none: no statistics kept (model format version 1)"),
    ]
    if s.get("feature_names_in"):
        names = s["feature_names_in"]
        rows.insert(3, ("features", ", ".join(names[:10])
                        + (f" ... ({len(names)} in all)" if len(names) > 10 else "")))
    if "can_invert" in s:
        rows.append(("inverse", "yes (inverse-transform)" if s["can_invert"] else
                     "no: fit with fit_inverse_transform=True to invert"))
    if "row_provenance" in s:
        rows += [("rows" if i == 0 else "", line)
                 for i, line in enumerate(describe(s["row_provenance"]))]
    for label, text in rows:
        print(f"{label:<12} {text}")


def _names(model) -> list[str] | None:
    names = getattr(model, "feature_names_in_", None)
    return None if names is None else [str(name) for name in names]


def _short_list(values, shown=10) -> str:
    text = " ".join(f"{v:.4g}" for v in values[:shown])
    return text + (f" ... ({len(values)} in all)" if len(values) > shown else "")


# -- the parser ----------------------------------------------------------------

_DATA_HELP = ("Zarr array, group or URL, or a .npy, Parquet (file or directory), CSV, HDF5 or "
              "netCDF file")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kpca-dask`` (exposed for documentation and tests)."""
    from . import __version__

    parser = _Parser(prog=PROG,
                     description="Out-of-core Nystrom kernel PCA: Zarr and files in, Zarr out.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)

    gen = commands.add_parser("generate", help="write a synthetic data set to Zarr")
    gen.add_argument("kind", choices=DATASETS)
    gen.add_argument("--n-samples", type=_positive_int, required=True, metavar="N")
    gen.add_argument("--n-features", type=_positive_int, metavar="P",
                     help="default: 3 for two-shells, 2 for circles, 32 for blobs")
    gen.add_argument("--out", required=True, metavar="DATA.zarr")
    gen.add_argument("--chunk-rows", type=_positive_int, default=100_000, metavar="R")
    gen.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_compute_options(gen)
    gen.set_defaults(run=_generate)

    fit = commands.add_parser("fit", help="fit kernel PCA on a data set and save the model")
    fit.add_argument("data", metavar="DATA", help=_DATA_HELP)
    fit.add_argument("--model", required=True, metavar="MODEL.zarr")
    fit.add_argument("--n-components", type=_n_components, default=10, metavar="Q",
                     help="int, a fraction of variance in (0, 1), or 'all' (default 10)")
    fit.add_argument("--kernel", choices=KERNEL_NAMES, default="rbf")
    fit.add_argument("--gamma", type=_number_or_name, metavar="G",
                     help="kernel coefficient: a number, 'median' (median heuristic on a "
                          "sample: 2 / median squared distance) or 'scale' (1 / (n_features * "
                          "variance)); default 1 / n_features")
    fit.add_argument("--degree", type=int, default=3, help="polynomial degree")
    fit.add_argument("--coef0", type=float, default=1.0)
    fit.add_argument("--nu", type=float, help="Matern smoothness (default 1.5)")
    fit.add_argument("--remove-zero-eig", action="store_true",
                     help="drop components with eigenvalue 0 instead of keeping zero columns")
    fit.add_argument("--n-landmarks", type=_landmark_count,
                     default=_LIBRARY_DEFAULTS["n_landmarks"],
                     metavar="M", help="number of landmarks, or 'auto' (grow until --tol)")
    fit.add_argument("--tol", type=float, default=_LIBRARY_DEFAULTS["tol"],
                     help="target trace error for --n-landmarks auto")
    fit.add_argument("--landmarks", default=_LIBRARY_DEFAULTS["landmarks"],
                     metavar="STRATEGY_OR_FILE",
                     help="landmark strategy name, or a file of landmark points (Zarr, "
                          ".npy, ...)")
    fit.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                     help="precision of the kernel blocks")
    fit.add_argument("--seed", type=int, default=0, help="seed of the landmark choice")
    fit.add_argument("--fit-inverse-transform", action="store_true",
                     help="also learn the pre-image map (one more pass), for inverse-transform")
    fit.add_argument("--alpha", type=float, default=_LIBRARY_DEFAULTS["alpha"],
                     help="ridge penalty of the pre-image map")
    fit.add_argument("--checkpoint", metavar="PATH",
                     help="Zarr group where the pass saves progress; rerun to resume")
    fit.add_argument("--overwrite", action="store_true", help="replace an existing model")
    _add_input_options(fit)
    _add_compute_options(fit)
    fit.set_defaults(run=_fit)

    tr = commands.add_parser("transform", help="project a data set and write the embedding")
    tr.add_argument("model", metavar="MODEL.zarr")
    tr.add_argument("data", metavar="DATA", help=_DATA_HELP)
    tr.add_argument("--out", required=True, metavar="EMBEDDING.zarr|.parquet")
    tr.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_input_options(tr)
    _add_output_options(tr)
    _add_compute_options(tr)
    tr.set_defaults(run=_transform)

    inv = commands.add_parser(
        "inverse-transform", help="map a Zarr embedding back to input space (pre-images)")
    inv.add_argument("model", metavar="MODEL.zarr",
                     help="a model fitted with fit_inverse_transform=True")
    inv.add_argument("data", metavar="EMBEDDING", help="a Zarr, Parquet or CSV embedding")
    inv.add_argument("--out", required=True, metavar="X.zarr|.parquet")
    inv.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_input_options(inv)
    _add_output_options(inv)
    _add_compute_options(inv)
    inv.set_defaults(run=_inverse_transform)

    score = commands.add_parser(
        "score", help="write each row's reconstruction error (a novelty score) to Zarr")
    score.add_argument("model", metavar="MODEL.zarr")
    score.add_argument("data", metavar="DATA", help=_DATA_HELP)
    score.add_argument("--out", required=True, metavar="ERRORS.zarr|.parquet")
    score.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_input_options(score)
    _add_output_options(score)
    _add_compute_options(score)
    score.set_defaults(run=_score)

    info = commands.add_parser("info", help="describe a saved model")
    info.add_argument("model", metavar="MODEL.zarr")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.add_argument("--n-components", type=_n_components, default=_UNSET, metavar="Q",
                      help="show what Q (int, fraction of variance, or 'all') would keep, "
                           "re-solved from the stored statistics; the model is not changed")
    info.set_defaults(run=_info)

    res = commands.add_parser(
        "resolve", help="re-solve a model for another --n-components, without reading the data")
    res.add_argument("model", metavar="MODEL.zarr")
    res.add_argument("--n-components", type=_n_components, required=True, metavar="Q",
                     help="int, a fraction of variance in (0, 1), or 'all'")
    res.add_argument("--out", required=True, metavar="NEW.zarr")
    res.add_argument("--overwrite", action="store_true", help="replace an existing output")
    res.set_defaults(run=_resolve)

    up = commands.add_parser("update", help="add rows of a Zarr array to a saved model")
    up.add_argument("model", metavar="MODEL.zarr")
    up.add_argument("data", metavar="DATA.zarr", help="Zarr array, group or URL")
    up.add_argument("--rows", type=_row_range, default=(None, None), metavar="START:STOP",
                    help="rows to add (default: all), e.g. the region just appended")
    up.add_argument("--array", metavar="NAME", help="array in a Zarr group")
    up.add_argument("--out", metavar="NEW.zarr",
                    help="write the updated model here (default: replace MODEL.zarr)")
    up.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    _add_compute_options(up)
    up.set_defaults(run=_update)

    mer = commands.add_parser(
        "merge", help="merge models fitted on disjoint data with the same landmarks")
    mer.add_argument("models", nargs="+", metavar="MODEL.zarr")
    mer.add_argument("--out", required=True, metavar="MERGED.zarr")
    mer.add_argument("--overwrite", action="store_true", help="replace an existing output")
    mer.set_defaults(run=_merge)
    return parser


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kpca-dask``; returns the exit status (0, or 2 for a user error)."""
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except (KPCAError, FileNotFoundError, FileExistsError, _CommandError) as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
