"""The argument parser of ``kpca-dask``, and the argparse types of its options.

The options of ``fit`` that are estimator parameters default to
:class:`~kpca_dask.KernelPCA`'s own defaults, copied from its signature
(:data:`LIBRARY_DEFAULTS`), so the command line and the library never
disagree: a ``fit`` without ``--n-components`` keeps every component with a
positive eigenvalue, and one without ``--seed`` draws its landmarks afresh.

Every argument says in its help what it is, its default (``%(default)s``
where it is a value) and the values it takes by name; tests/interfaces/test_cli_help.py
walks the parser and holds every argument to that.

The parser imports nothing of the library but its version: ``kpca-dask --help``
answers at once, before scikit-learn, dask.array or xarray are loaded, and a
command's module is imported when that command runs (:func:`kpca_dask.cli.main`).
The names and defaults it offers are therefore written here, as copies of the
library's tables (:data:`LIBRARY_DEFAULTS`, :data:`KERNEL_NAMES`, ...), and
tests/interfaces/test_cli_help.py checks each copy equal to the table it copies.
"""

from __future__ import annotations

import argparse
import contextlib
from types import MappingProxyType

__all__ = ["build_parser", "CommandError", "PROG", "UNSET", "LIBRARY_DEFAULTS",
           "LOCAL_SCHEDULERS", "LOCAL_CLUSTER_OPTIONS"]

PROG = "kpca-dask"
#: An option not given (None means "all components" for --n-components).
UNSET = object()


class CommandError(Exception):
    """A problem the user can fix, found by the command line itself."""

# -- copies of the library's tables (each checked equal to its source by the tests) ----------

#: KernelPCA's defaults (its signature's) for the parameters ``fit`` has options for.
LIBRARY_DEFAULTS = MappingProxyType({
    "n_components": None, "kernel": "rbf", "gamma": None, "degree": 3, "coef0": 1.0,
    "kernel_params": None, "remove_zero_eig": False, "n_landmarks": 1000,
    "landmarks": "kmeans", "tol": 0.01, "dtype": "float64", "random_state": None,
    "fit_inverse_transform": False, "alpha": 1.0, "sample_dim": None, "weights": None})
#: kpca_dask.blocks.kernels.KERNEL_NAMES
KERNEL_NAMES = ("cosine", "gaussian", "laplacian", "linear", "matern", "poly", "polynomial",
                "precomputed", "rbf", "sigmoid")
#: kpca_dask.datasets.DATASETS
DATASETS = ("two-shells", "circles", "blobs")
#: kpca_dask.engine.bandwidth.BANDWIDTH_RULES
BANDWIDTH_RULES = ("median", "scale")
#: kpca_dask.io.formats.FORMATS
FORMATS = ("zarr", "npy", "parquet", "csv", "hdf5", "netcdf")
#: kpca_dask.landmarks.strategies.landmark_strategy_names(), the built-in strategies
LANDMARK_STRATEGIES = ("kmeans", "rpcholesky", "uniform")
#: kpca_dask.model.parameters.EIGEN_SOLVERS
EIGEN_SOLVERS = ("auto", "dense", "matrix-free")
#: The estimators ``fit --method`` makes: KernelPCA, ExactKernelPCA, HilbertKernelEOF,
#: ExtendedKernelEOF, and of two fields KernelMCA and KernelCCA.
METHODS = ("nystrom", "exact", "hilbert", "extended", "mca", "cca")
#: kpca_dask.model.parameters.SOLVERS (the Hilbert and extended EOF's ways)
SOLVERS = ("auto", "gram", "nystrom")
#: kpca_dask.io.preprocessing.analytic_signal.PADDINGS
PADDINGS = ("exp", "none")
#: The defaults of the options that only the Hilbert and extended EOF take, as their
#: estimators' (HilbertKernelEOF, ExtendedKernelEOF).
EOF_DEFAULTS = MappingProxyType({"solver": "auto", "padding": "exp", "decay_factor": 0.2,
                                 "tau": 1, "embedding": 2, "n_pca_modes": None,
                                 "epsilon": 0.0})

#: Scheduler names that run in this process instead of on a distributed client.
LOCAL_SCHEDULERS = ("threads", "synchronous")
#: The options that shape a local cluster: any of them asks for one.
LOCAL_CLUSTER_OPTIONS = ("workers", "threads_per_worker", "memory_limit")

_DATA_HELP = ("Zarr array, group or URL, or a .npy, Parquet (file or directory), CSV, HDF5 or "
              "netCDF file")
_MODEL_HELP = "a model saved by kpca-dask fit (a Zarr group)"


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


def _gamma(text: str) -> float | str:
    with contextlib.suppress(ValueError):
        return float(text)
    if text in BANDWIDTH_RULES:
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither a number nor a rule ({', '.join(BANDWIDTH_RULES)})")


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


def _alpha(text: str) -> float | str:
    """``--alpha``: a number >= 0 or ``auto``."""
    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number >= 0 nor 'auto'")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(float(text))  # accepts 1e6
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1 or value != float(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


# -- option groups -------------------------------------------------------------

_STRATEGY_WORDS = {"kmeans": "k-means centroids of a sample", "uniform": "rows drawn uniformly",
                   "rpcholesky": "randomly pivoted Cholesky"}


def _strategies() -> str:
    """The built-in landmark strategies, with a word on each."""
    return ", ".join(f"{name} ({_STRATEGY_WORDS[name]})" for name in LANDMARK_STRATEGIES)


def _add_compute_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "where to compute",
        "By default the command computes in this process on Dask's threaded scheduler. "
        "--scheduler or $DASK_SCHEDULER_ADDRESS sends the work to a cluster; --workers, "
        "--threads-per-worker or --memory-limit (or --scheduler local) start a local cluster "
        "of worker processes for it.")
    group.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="Dask scheduler address (tcp://... or tls://...; TLS credentials from the Dask "
             "config); 'local' for a local cluster sized to the machine; "
             f"{' or '.join(LOCAL_SCHEDULERS)} to compute in this process. Default: "
             "$DASK_SCHEDULER_ADDRESS, else a local cluster if a local-cluster option is "
             "given, else threads.")
    group.add_argument("--workers", type=_positive_int, metavar="N",
                       help="start a local cluster of N worker processes (default: none, "
                            "threads in this process; with --scheduler local, sized to the "
                            "machine)")
    group.add_argument("--threads-per-worker", type=_positive_int, metavar="T",
                       help="local cluster: threads per worker (default: the machine's cores "
                            "shared among the workers)")
    group.add_argument("--memory-limit", metavar="BYTES",
                       help="local cluster: memory per worker, e.g. 4GiB (default: auto, the "
                            "machine's memory shared among the workers)")
    group.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="show a progress bar on stderr, on threads or on a cluster "
                            "(default: when stderr is a terminal)")


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reading the data")
    group.add_argument("--array", metavar="NAME",
                       help="array in a Zarr group or an HDF5 file, or variable in a netCDF file "
                            "(default: the only 2-D one; needed when there are several)")
    group.add_argument("--format", choices=FORMATS,
                       help="format of the data when its extension does not say it (default: "
                            "from the extension: .zarr, .npy, .parquet, .csv, .h5/.hdf5, .nc)")
    group.add_argument("--columns", type=_column_list, metavar="A,B,...",
                       help="Parquet or CSV: the columns to use (default: all); CSV columns "
                            "without a header are numbered from 0")
    group.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                       help="CSV: the first line names the columns (default: unless every "
                            "field of it is a number)")
    group.add_argument("--sample-dim", metavar="DIM",
                       help="netCDF or xarray Zarr: the dimension of the samples (default: the "
                            "first of two dimensions, or among more the one named time, else "
                            "the fit asks for it; at fit, every other one is a feature "
                            "dimension, and later commands take the model's)")
    group.add_argument("--decode-times", action=argparse.BooleanOptionalAction, default=True,
                       help="netCDF: decode CF times into dates; --no-decode-times reads them "
                            "as the numbers stored (for units or calendars that cannot be "
                            "decoded) (default: decode)")


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("writing the output")
    group.add_argument("--out-format", choices=("zarr", "parquet"),
                       help="format of the output (default: Parquet for a .parquet/.pq --out, "
                            "else Zarr)")
    group.add_argument("--keep-columns", type=_column_list, metavar="ID,...",
                       help="Parquet or CSV input, Parquet output: copy these columns (keys "
                            "such as an id) beside the outputs, row for row (default: none)")
    group.add_argument("--out-dtype", choices=("float32", "float64"),
                       help="dtype of the outputs (default: the model's, float32 for a "
                            "--dtype float32 fit)")


def _add_fit_options(fit: argparse.ArgumentParser) -> None:
    """The estimator's parameters, each defaulting to KernelPCA's default."""
    default = LIBRARY_DEFAULTS
    fit.add_argument("--n-components", type=_n_components, default=default["n_components"],
                     metavar="Q", help="int, a fraction of variance in (0, 1), or 'all' "
                                       "(default: all, every component with a positive "
                                       "eigenvalue)")
    # None until given: the Hilbert and extended EOF default to the linear kernel.
    fit.add_argument("--kernel", choices=KERNEL_NAMES, default=None,
                     help="the kernel k(x, y); gaussian and poly are other names of rbf and "
                          "polynomial, precomputed takes DATA as the n x n kernel matrix "
                          f"(default: {default['kernel']}; linear for --method hilbert and "
                          "extended)")
    fit.add_argument("--gamma", type=_gamma, default=default["gamma"], metavar="G",
                     help="kernel coefficient: a number, 'median' (median heuristic on a "
                          "sample: 2 / median squared distance) or 'scale' (1 / (n_features * "
                          "variance)) (default: 1 / n_features; --method hilbert: "
                          "1 / median squared distance for rbf)")
    fit.add_argument("--degree", type=int, default=default["degree"],
                     help="degree of the polynomial kernel (default: %(default)s)")
    fit.add_argument("--coef0", type=float, default=default["coef0"],
                     help="independent term of the polynomial and sigmoid kernels (default: "
                          "%(default)s)")
    fit.add_argument("--nu", type=float, help="smoothness of the matern kernel (default: 1.5)")
    fit.add_argument("--remove-zero-eig", action="store_true",
                     default=default["remove_zero_eig"],
                     help="drop components with eigenvalue 0 instead of keeping zero columns")
    fit.add_argument("--n-landmarks", type=_landmark_count, default=default["n_landmarks"],
                     metavar="M", help="number of landmarks, or 'auto' (double m from 128 "
                                       "until the trace error is below --tol) (default: "
                                       "%(default)s)")
    fit.add_argument("--tol", type=float, default=default["tol"],
                     help="target trace error for --n-landmarks auto (default: %(default)s)")
    fit.add_argument("--landmarks", default=default["landmarks"], metavar="STRATEGY_OR_FILE",
                     help=f"how landmarks are chosen: a strategy, {_strategies()}, or a file of "
                          "landmark points (Zarr, .npy, ...) (default: %(default)s)")
    fit.add_argument("--dtype", choices=("float64", "float32"), default=default["dtype"],
                     help="precision of the kernel blocks; sums are float64 either way "
                          "(default: %(default)s)")
    fit.add_argument("--seed", type=int, default=default["random_state"],
                     help="seed of the landmark choice (default: none, a fresh choice each "
                          "run; give one to repeat a fit)")
    fit.add_argument("--fit-inverse-transform", action="store_true",
                     default=default["fit_inverse_transform"],
                     help="also learn the pre-image map (one more pass), for inverse-transform")
    fit.add_argument("--alpha", type=_alpha, default=default["alpha"], metavar="A|auto",
                     help="ridge penalty of the pre-image map, >= 0, or 'auto' to choose it "
                          "by generalised cross-validation from the pass's sums "
                          "(default: %(default)s)")
    fit.add_argument("--weights", metavar="coslat|FILE",
                     help="multiply the features before the kernel: 'coslat' for "
                          "sqrt(cos(latitude)) from a field's latitude coordinate, or a file "
                          "of weights (netCDF, xarray Zarr, or .npy) over the field's feature "
                          "dimensions, or one per column of a table or array (default: none)")


# -- the parser ----------------------------------------------------------------


def _add_output_command(commands, name: str, help: str, *, data: tuple[str, str], out: str,
                        model_help: str = _MODEL_HELP) -> argparse.ArgumentParser:
    """A subcommand that applies a model to a data set and writes one output; returns it."""
    sub = commands.add_parser(name, help=help)
    sub.add_argument("model", metavar="MODEL.zarr", help=model_help)
    sub.add_argument("data", metavar=data[0], help=data[1])
    sub.add_argument("--out", required=True, metavar=out,
                     help="where to write it: Zarr, or Parquet for a .parquet/.pq path")
    sub.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_input_options(sub)
    _add_output_options(sub)
    _add_compute_options(sub)
    return sub


def _epsilon(text: str):
    """--epsilon: a number, or 'auto'."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kpca-dask`` (exposed for documentation and tests).

    Each subcommand's name is ``args.command``; :data:`kpca_dask.cli.commands.COMMANDS`
    maps it to the function that runs it.

    Examples
    --------
    >>> args = build_parser().parse_args(["fit", "data.zarr", "--model", "model.zarr"])
    >>> args.command, args.n_components, args.seed
    ('fit', None, None)
    """
    from .. import __version__

    parser = _Parser(prog=PROG,
                     description="Out-of-core Nystrom kernel PCA: Zarr and files in, Zarr out.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)

    gen = commands.add_parser("generate", help="write a synthetic data set to Zarr")
    gen.add_argument("kind", choices=DATASETS,
                     help="two noisy concentric shells in 3-D, two circles in 2-D, or "
                          "Gaussian blobs")
    gen.add_argument("--n-samples", type=_positive_int, required=True, metavar="N",
                     help="number of rows")
    gen.add_argument("--n-features", type=_positive_int, metavar="P",
                     help="number of columns (default: 3 for two-shells, 2 for circles, 32 "
                          "for blobs)")
    gen.add_argument("--out", required=True, metavar="DATA.zarr", help="the Zarr array to write")
    gen.add_argument("--chunk-rows", type=_positive_int, default=100_000, metavar="R",
                     help="rows per stored chunk (default: %(default)s)")
    gen.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                     help="dtype of the array (default: %(default)s)")
    gen.add_argument("--seed", type=int, default=0,
                     help="seed of the random numbers (default: %(default)s)")
    gen.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_compute_options(gen)

    fit = commands.add_parser("fit", help="fit kernel PCA on a data set and save the model")
    fit.add_argument("data", metavar="DATA", help=_DATA_HELP)
    fit.add_argument("--model", required=True, metavar="MODEL.zarr",
                     help="where to save the model (a Zarr group)")
    _add_fit_options(fit)
    fit.add_argument("--checkpoint", metavar="PATH",
                     help="Zarr group where the pass (or the matrix-free solver, after each "
                          "product) saves progress; rerun to resume (default: none)")
    fit.add_argument("--method", choices=METHODS, default="nystrom",
                     help="nystrom: kernel PCA by landmarks (KernelPCA); exact: no landmarks "
                          "(ExactKernelPCA, as --exact); hilbert: complex modes of the "
                          "analytic signal (HilbertKernelEOF, linear kernel unless --kernel "
                          "says otherwise); extended: modes of the delay-embedded samples "
                          "(ExtendedKernelEOF, linear kernel unless --kernel says otherwise); "
                          "mca, cca: kernel MCA or CCA of DATA and the field --with names "
                          "(KernelMCA, KernelCCA) (default: %(default)s)")
    fit.add_argument("--with", dest="with_data", metavar="DATA_Y",
                     help="with --method mca or cca: the second field, the same samples as "
                          "DATA in the same order (default: none)")
    fit.add_argument("--exact", action="store_true",
                     help="exact kernel PCA (ExactKernelPCA), no landmarks: the n x n matrix "
                          "while it fits in memory, matrix-free beyond (then --n-components "
                          "must be an int); --dtype is then the precision of its kernel tiles")
    eof = EOF_DEFAULTS
    fit.add_argument("--solver", choices=SOLVERS, default=eof["solver"],
                     help="with --method hilbert or extended: 'gram' (the n x n Gram matrix of "
                          "the field, exact), 'nystrom' (landmarks) or 'auto' (the Gram way "
                          "for wide data that fits) (default: %(default)s)")
    fit.add_argument("--padding", choices=PADDINGS, default=eof["padding"],
                     help="with --method hilbert: the padding of each record before the "
                          "Hilbert transform (default: %(default)s)")
    fit.add_argument("--decay-factor", type=float, default=eof["decay_factor"], metavar="F",
                     help="with --method hilbert: the padding's e-folding length as a share "
                          "of the record (default: %(default)s)")
    fit.add_argument("--tau", type=_positive_int, default=eof["tau"],
                     help="with --method extended: the delay between lagged copies, in "
                          "samples (default: %(default)s)")
    fit.add_argument("--embedding", type=_positive_int, default=eof["embedding"], metavar="L",
                     help="with --method extended: the number of lagged copies "
                          "(default: %(default)s)")
    fit.add_argument("--n-pca-modes", type=_positive_int, default=eof["n_pca_modes"],
                     metavar="P", help="with --method extended: embed the scores of the "
                                       "field's P leading linear EOFs (default: none, the "
                                       "field itself); with --method cca: each field's P "
                                       "leading kernel PCs (default: none, those explaining "
                                       "0.999 of each field's variance)")
    fit.add_argument("--epsilon", type=_epsilon, default=eof["epsilon"], metavar="E|auto",
                     help="with --method cca: the ridge on each field's kept PCs, relative "
                          "to their mean variance, or 'auto' (chosen on held-out folds) "
                          "(default: %(default)s)")
    fit.add_argument("--eigen-solver", choices=EIGEN_SOLVERS, default="auto",
                     help="with --exact: 'dense' (the n x n matrix), 'matrix-free' (products "
                          "with it, one pass over the data each) or 'auto' (default: auto)")
    fit.add_argument("--overwrite", action="store_true", help="replace an existing model")
    _add_input_options(fit)
    _add_compute_options(fit)

    transform = _add_output_command(commands, "transform",
                                    "project a data set and write the embedding",
                                    data=("DATA", _DATA_HELP), out="EMBEDDING.zarr|.parquet")
    transform.add_argument("--field", choices=("X", "Y"), default=None,
                           help="with a KernelMCA or KernelCCA model: the field DATA is "
                                "(default: X)")
    _add_output_command(commands, "inverse-transform",
                        "map an embedding back to input space (pre-images)",
                        data=("EMBEDDING", "a Zarr, Parquet or CSV embedding"),
                        out="X.zarr|.parquet",
                        model_help="a model fitted with fit_inverse_transform=True")
    _add_output_command(commands, "score",
                        "write each row's reconstruction error (a novelty score)",
                        data=("DATA", _DATA_HELP), out="ERRORS.zarr|.parquet")

    pat = commands.add_parser("patterns", help="write each component's covariance, "
                                               "correlation or EOF map over the features")
    pat.add_argument("model", metavar="MODEL.zarr", help=_MODEL_HELP)
    pat.add_argument("data", metavar="DATA", nargs="?",
                     help=_DATA_HELP + "; the maps are taken over its rows (not given for a "
                                       "Hilbert or extended EOF, whose fit computed its maps)")
    pat.add_argument("--kind", choices=("covariance", "correlation", "eof"),
                     default="covariance",
                     help="covariance with each score scaled to unit variance (eofs' "
                          "eofsAsCovariance), correlation, or eof: the unit EOFs (eofs' "
                          "eofs(); a Hilbert or extended EOF's own maps, components(), the "
                          "only kind they have) (default: covariance)")
    pat.add_argument("--out", required=True, metavar="MAPS.zarr",
                     help="where to write the maps (Zarr)")
    pat.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_input_options(pat)
    _add_compute_options(pat)

    info = commands.add_parser("info", help="describe a saved model")
    info.add_argument("model", metavar="MODEL.zarr", help=_MODEL_HELP)
    info.add_argument("--json", action="store_true", help="print JSON")
    info.add_argument("--n-components", type=_n_components, default=UNSET, metavar="Q",
                      help="show what Q (int, fraction of variance, or 'all') would keep, "
                           "re-solved from the stored statistics; the model is not changed "
                           "(default: the model's own)")

    res = commands.add_parser(
        "resolve", help="re-solve a model for another --n-components, without reading the data")
    res.add_argument("model", metavar="MODEL.zarr", help=_MODEL_HELP)
    res.add_argument("--n-components", type=_n_components, required=True, metavar="Q",
                     help="int, a fraction of variance in (0, 1), or 'all'")
    res.add_argument("--out", required=True, metavar="NEW.zarr",
                     help="where to save the re-solved model")
    res.add_argument("--overwrite", action="store_true", help="replace an existing output")

    up = commands.add_parser("update", help="add rows of a Zarr array to a saved model")
    up.add_argument("model", metavar="MODEL.zarr", help=_MODEL_HELP)
    up.add_argument("data", metavar="DATA.zarr", help="Zarr array, group or URL")
    up.add_argument("--rows", type=_row_range, default=(None, None), metavar="START:STOP",
                    help="rows to add (default: all), e.g. the region just appended")
    up.add_argument("--array", metavar="NAME",
                    help="array in a Zarr group (default: the only 2-D one)")
    up.add_argument("--out", metavar="NEW.zarr",
                    help="write the updated model here (default: replace MODEL.zarr)")
    up.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    _add_compute_options(up)

    mer = commands.add_parser(
        "merge", help="merge models fitted on disjoint data with the same landmarks")
    mer.add_argument("models", nargs="+", metavar="MODEL.zarr",
                     help="two or more models saved by kpca-dask fit")
    mer.add_argument("--out", required=True, metavar="MERGED.zarr",
                     help="where to save the merged model")
    mer.add_argument("--overwrite", action="store_true", help="replace an existing output")
    return parser
