"""One function per subcommand of ``kpca-dask``, and :data:`COMMANDS`, which names them.

Each function takes the parsed arguments (:func:`kpca_dask.cli.parser.build_parser`),
checks what it can before anything is computed (outputs that exist, inputs
that cannot be read, parameters), computes in
:func:`~kpca_dask.cli.compute.compute_context` and writes its output
atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from types import MappingProxyType

import numpy as np

from ..datasets import make_dataset
from ..errors import KPCAError
from ..estimators.exact import ExactKernelPCA
from ..estimators.extended import ExtendedKernelEOF
from ..estimators.hilbert import HilbertKernelEOF
from ..estimators.kernel_pca import KernelPCA
from .compute import check_parameters, compute_context
from .coupled_fits import COUPLED_METHODS, fit_coupled, refuse_field_option
from .eof_fits import fit_eof, refuse_eof_options
from .inputs import fit_weights, open_data
from .parser import LIBRARY_DEFAULTS, PROG, UNSET, CommandError
from .summary import print_summary, shown_components, summary

__all__ = ["COMMANDS", "fit_params", "exact_params"]


def _generate(args) -> None:
    from ..io import check_can_write, write_array

    check_can_write(args.out, overwrite=args.overwrite)
    X, _ = make_dataset(args.kind, args.n_samples, n_features=args.n_features,
                        chunk_rows=args.chunk_rows, seed=args.seed, dtype=args.dtype)
    attrs = {"dataset": args.kind, "seed": args.seed, "generated_by": f"{PROG} generate"}
    with compute_context(args):
        started = time.perf_counter()
        write_array(X, args.out, overwrite=args.overwrite, attrs=attrs)
        seconds = time.perf_counter() - started
    print(f"wrote {args.out}: {X.shape[0]} x {X.shape[1]} {X.dtype}, "
          f"{X.numblocks[0]} chunk(s) of up to {X.chunks[0][0]} rows, in {seconds:.2f} s")


def fit_params(args: argparse.Namespace) -> dict:
    """The parameters of the KernelPCA that ``fit`` makes from its options.

    ``landmarks`` and ``weights`` are left as given: a strategy name or the path
    of a file of landmark points, and None, "coslat" or the path of a file of
    weights, which ``fit`` reads (:func:`kpca_dask.cli.inputs.fit_weights`).

    Examples
    --------
    >>> from kpca_dask.cli.parser import build_parser
    >>> args = build_parser().parse_args(["fit", "data.zarr", "--model", "model.zarr",
    ...                                   "--kernel", "matern", "--nu", "2.5", "--seed", "7"])
    >>> params = fit_params(args)
    >>> params["kernel_params"], params["random_state"]
    ({'nu': 2.5}, 7)
    """
    return {
        "n_components": args.n_components, "gamma": args.gamma,
        "kernel": args.kernel if args.kernel is not None else LIBRARY_DEFAULTS["kernel"],
        "degree": args.degree, "coef0": args.coef0,
        "kernel_params": {"nu": args.nu} if args.nu is not None else None,
        "remove_zero_eig": args.remove_zero_eig, "n_landmarks": args.n_landmarks,
        "landmarks": args.landmarks, "tol": args.tol, "dtype": args.dtype,
        "random_state": args.seed, "fit_inverse_transform": args.fit_inverse_transform,
        "alpha": args.alpha, "sample_dim": getattr(args, "sample_dim", None),
        "weights": getattr(args, "weights", None),
    }


def exact_params(args: argparse.Namespace) -> dict:
    """The parameters of the ExactKernelPCA that ``fit --exact`` makes from its options.

    Examples
    --------
    >>> from kpca_dask.cli.parser import build_parser
    >>> args = build_parser().parse_args(["fit", "data.zarr", "--model", "model.zarr", "--exact",
    ...                                   "--n-components", "10", "--gamma", "median"])
    >>> params = exact_params(args)
    >>> params["eigen_solver"], params["gamma"], params["n_components"]
    ('auto', 'median', 10)
    """
    params = fit_params(args)
    landmark_options = {"n_landmarks": "--n-landmarks", "landmarks": "--landmarks",
                        "tol": "--tol", "random_state": "--seed",
                        "fit_inverse_transform": "--fit-inverse-transform", "alpha": "--alpha"}
    given = [option for name, option in landmark_options.items()
             if params[name] != LIBRARY_DEFAULTS[name]]
    if given:
        raise CommandError(f"{', '.join(given)} set the Nystrom fit's landmarks and pre-image "
                           "map, which --exact has none of; leave them out.")
    return {**{name: params[name] for name in ("n_components", "kernel", "gamma", "degree",
                                               "coef0", "kernel_params", "remove_zero_eig",
                                               "dtype", "sample_dim", "weights")},
            "eigen_solver": args.eigen_solver}


def _fit_exact(args, X) -> None:
    """``fit --exact``: ExactKernelPCA, checkpointed between the matrix-free solver's
    products, saved with its training rows."""
    model = ExactKernelPCA(**{**exact_params(args), "weights": fit_weights(args.weights, X)})
    check_parameters(model, X.shape[1])
    with compute_context(args):
        model.fit(X, checkpoint=args.checkpoint)
        model.save(args.model, overwrite=args.overwrite)
    print(f"wrote {args.model}")
    print_summary(summary(model, args.model))


def _method(args) -> str:
    """The estimator ``fit`` makes: --method, or --exact (``--method exact``)."""
    if args.exact and args.method not in ("nystrom", "exact"):
        raise CommandError(f"--exact asks for --method exact, not --method {args.method}: "
                           "give one of them.")
    return "exact" if args.exact else args.method


def _fit(args) -> None:
    from ..io import check_can_write, open_array

    check_can_write(args.model, overwrite=args.overwrite)
    method = _method(args)
    refuse_eof_options(args, method)
    X = open_data(args)
    if method in ("hilbert", "extended", "mca", "cca"):
        model = (fit_coupled(args, X, method) if method in COUPLED_METHODS
                 else fit_eof(args, X, method))
        print(f"wrote {args.model}")
        print_summary(summary(model, args.model))
        return
    if method == "exact":
        _fit_exact(args, X)
        return
    if args.eigen_solver != "auto":
        raise CommandError("--eigen-solver chooses how --exact solves; add --exact, or leave "
                           "it out for the Nystrom fit.")
    params = fit_params(args)
    landmarks = params["landmarks"]
    if os.path.exists(landmarks) or "://" in landmarks:
        params["landmarks"] = np.asarray(open_array(landmarks).compute(scheduler="threads"))
    params["weights"] = fit_weights(args.weights, X)
    # --method nystrom is the landmark way by its name; the Gram way is --method exact.
    kpca = KernelPCA(**params, solver="nystrom")
    check_parameters(kpca, X.shape[1])
    names = _table_names(args)
    with compute_context(args):
        kpca.fit(X, checkpoint=args.checkpoint)
        if names is not None:  # as a fit on the table's frame would set them
            kpca.feature_names_in_ = names
        # Saved while the cluster runs: the pass's m x m sums are on its workers.
        kpca.save(args.model, overwrite=args.overwrite)
    print(f"wrote {args.model}")
    print_summary(summary(kpca, args.model))


def _transform(args) -> None:
    _write_model_output(args, "transform")


def _inverse_transform(args) -> None:
    _write_model_output(args, "inverse_transform")


def _score(args) -> None:
    _write_model_output(args, "reconstruction_error")


def _patterns(args) -> None:
    """Write the covariance, correlation or EOF maps of a model's components: a field's maps
    (component, feature dims) as an xarray Zarr group, else a q x p array. The two kernel
    PCAs take them over DATA; a Hilbert or extended EOF writes the maps its fit computed."""
    from .. import load
    from ..io import check_can_write, write_array

    check_can_write(args.out, overwrite=args.overwrite)
    model = load(args.model)
    name = type(model).__name__
    if isinstance(model, (KernelPCA, ExactKernelPCA)):
        if args.data is None:
            raise CommandError(f"patterns of a {name} model takes its maps over DATA (usually "
                               "the data it was fitted on): kpca-dask patterns MODEL DATA ...")
        _check_sample_dim(args, model)
        maps = model.patterns(open_data(args), kind=args.kind)  # lazy: one pass when written
    elif isinstance(model, (HilbertKernelEOF, ExtendedKernelEOF)):
        maps = _fitted_maps(args, model, name)
    else:
        raise CommandError(f"{args.model} holds a {name} model: patterns takes the models of "
                           "one field (KernelPCA, ExactKernelPCA, HilbertKernelEOF, "
                           "ExtendedKernelEOF); read a coupled model's patterns in Python, "
                           "kpca_dask.load(path).components(X, Y).")
    with compute_context(args):
        started = time.perf_counter()
        write_array(maps, args.out, overwrite=args.overwrite)
        seconds = time.perf_counter() - started
    print(f"wrote {args.out}: {' x '.join(map(str, maps.shape))} {args.kind} maps, "
          f"in {seconds:.2f} s")


def _fitted_maps(args, model, name: str):
    """The maps a Hilbert or extended EOF's fit computed (``components()``): complex for the
    Hilbert EOF, over (mode, embedding, ...) for the extended one; DATA is not read."""
    if args.kind != "eof":
        raise CommandError(f"{args.model} holds a {name} model, whose fit computed its maps: "
                           f"--kind eof writes them (components()); {args.kind} maps are of "
                           "the KernelPCA and ExactKernelPCA models.")
    if args.data is not None:
        raise CommandError(f"{args.model} holds a {name} model, whose fit computed its maps: "
                           "leave DATA out (kpca-dask patterns MODEL --kind eof --out ...).")
    return model.components()


def _check_sample_dim(args, model) -> None:
    fitted = model.sample_dim_  # every estimator's: None for a fit on arrays
    if args.sample_dim is not None and fitted is not None and args.sample_dim != fitted:
        raise CommandError(f"--sample-dim {args.sample_dim} differs from the model's sample "
                           f"dimension {fitted!r}; leave it out to use the model's.")


def _write_model_output(args, method: str) -> None:
    """Apply a fitted model's ``method`` to the data and write the result as Zarr or Parquet
    (by the output's extension or --out-format); a table input may keep key columns."""
    from .. import load
    from ..io import check_can_write, write_array, write_embedding
    from ..io.formats import file_format
    from ..io.parquet_out import output_format, write_table
    from ..model.table_outputs import output_dtype

    out_format = output_format(args.out, args.out_format)
    check_can_write(args.out, overwrite=args.overwrite)
    model = load(args.model)
    if getattr(type(model), method, None) is None:
        raise CommandError(f"{args.model} holds a {type(model).__name__} model, which has no "
                           f"{method}: see the API reference's table of the estimators.")
    _check_sample_dim(args, model)
    dtype = output_dtype(model, args.out_dtype)
    try:
        kind = file_format(args.data, args.format)
    except KPCAError:
        kind = "other"  # e.g. a sparse .npz: open_data reads it or says why not
    if args.keep_columns and kind not in ("parquet", "csv"):
        raise CommandError(f"--keep-columns copies columns of a Parquet or CSV input; "
                           f"{args.data} is {kind}.")
    if args.keep_columns and out_format != "parquet":
        raise CommandError("--keep-columns needs a Parquet output (--out NAME.parquet, or "
                           "--out-format parquet).")
    _columns_of_model(args, model, method, kind)
    # Built lazily before any worker starts, so that a wrong file or shape fails at once.
    started = time.perf_counter()
    if out_format == "parquet":
        if refuse_field_option(args, model) is not None:
            raise CommandError("A coupled model's scores are written to Zarr (--out NAME.zarr).")
        if type(model).__name__ == "HilbertKernelEOF":
            raise CommandError("A Hilbert EOF's scores are complex, which Parquet does not "
                               "hold: write them to Zarr (--out NAME.zarr).")
        result = _table_output(args, model, method, kind, dtype)
        writer = write_table
        shape = (f"{len(result.columns)} column(s) ({', '.join(map(str, result.columns[:6]))}"
                 f"{', ...' if len(result.columns) > 6 else ''}), Parquet")
    else:
        with warnings.catch_warnings():
            # A table's columns were matched to the model's names above; the array has none.
            warnings.filterwarnings("ignore", message="X does not have valid feature names")
            field = refuse_field_option(args, model)
            result = (getattr(model, method)(open_data(args)) if field is None
                      else model.transform(**{field: open_data(args)}))
            if np.iscomplexobj(result):  # a Hilbert EOF's scores: complex128 (Zarr)
                if args.out_dtype is not None:
                    raise CommandError(f"{args.model} gives complex scores, written as "
                                       "complex128: leave --out-dtype out.")
                dtype = np.dtype(np.complex128)
            result = result.astype(dtype)
        writer = write_embedding if method == "transform" else write_array
        shape = " x ".join(str(n) for n in result.shape)
    with compute_context(args):
        writer(result, args.out, overwrite=args.overwrite)
        seconds = time.perf_counter() - started
    print(f"wrote {args.out}: {shape} {dtype}, in {seconds:.2f} s")


def _table_names(args):
    """The feature names of a Parquet or CSV input (string column names), or None."""
    from ..io.formats import file_format
    from ..io.frames import frame_feature_names
    from ..io.tables import read_table

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

    from ..io.frames import check_feature_names

    check_feature_names(model, pd.DataFrame(columns=list(args.columns)), reset=False)


def _table_output(args, model, method: str, kind: str, dtype):
    """The lazy frame a Parquet output is written from."""
    from ..model.table_outputs import output_names, transform_table

    if kind in ("parquet", "csv"):
        from ..io.tables import read_table
        from ..validation import DEFAULT_BLOCK_ROWS

        frame = read_table(args.data, kind, header=args.header, block_rows=DEFAULT_BLOCK_ROWS)
        return transform_table(model, frame, method, columns=args.columns,
                               keep_columns=args.keep_columns or (), dtype=dtype)
    import dask.dataframe as dd

    result = getattr(model, method)(open_data(args))
    result = getattr(result, "data", result).astype(dtype)  # a DataArray's dask array
    if result.ndim == 1:
        result = result[:, None]
    return dd.from_dask_array(result, columns=output_names(model, method))


def _info(args) -> None:
    from .. import load

    model = load(args.model)
    if args.n_components is not UNSET and not isinstance(model, KernelPCA):
        kind = "an exact" if isinstance(model, ExactKernelPCA) else f"a {type(model).__name__}"
        raise CommandError(f"{args.model} is {kind} model, which keeps no statistics to "
                           "re-solve from; fit it again with another --n-components.")
    if args.n_components is not UNSET:
        # Re-solved in memory from the stored statistics; the file is not touched.
        model.set_n_components(args.n_components)
    described = summary(model, args.model)
    if args.n_components is not UNSET:
        described["re_solved_for"] = args.n_components
        if not args.json:
            print(f"re-solved for n_components={shown_components(args.n_components)} from the "
                  "stored statistics; the model file is unchanged")
    if args.json:
        print(json.dumps(described, indent=2))
    else:
        print_summary(described)


def _resolve(args) -> None:
    from .. import load
    from ..io import check_can_write

    check_can_write(args.out, overwrite=args.overwrite)
    model = _nystrom_model(load(args.model), args.model, "resolve")
    model = model.set_n_components(args.n_components)
    model.save(args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}: re-solved for n_components="
          f"{shown_components(args.n_components)}, without reading the data")
    print_summary(summary(model, args.out))


def _update(args) -> None:
    from .. import load
    from ..io import check_can_write, open_array, store_location
    from ..io.replacing import read_unchanged, replace_unchanged, staging_path, version_of
    from ..model.inputs import model_rows
    from ..model.provenance import recorded_rows, source_of, with_rows

    out = args.out or args.model
    in_place = os.path.abspath(out) == os.path.abspath(args.model)
    if not in_place:
        check_can_write(out, overwrite=args.overwrite)
    version = version_of(args.model) if store_location(args.model).local else None
    # Read while another update may be swapping its result in: that is no damaged file.
    model = load(args.model) if version is None else read_unchanged(load, args.model, version)
    _nystrom_model(model, args.model, "update")
    X = open_array(args.data, array=args.array)
    # A field's rows of features (checked as they are read) are what its model counts.
    rows = model_rows(model.model_.layout, X)[0] if model.model_.layout is not None else X
    start, stop, _ = slice(*args.rows).indices(rows.shape[0])
    if start >= stop:
        raise CommandError(f"--rows {args.rows[0]}:{args.rows[1]} selects no rows of "
                           f"{args.data}, which has {rows.shape[0]}")
    # Refused now, before a cluster starts, if the model holds some of these rows.
    with_rows(recorded_rows(model), source_of(rows), start, stop)
    with compute_context(args):
        started = time.perf_counter()
        model.partial_fit(X, rows=(start, stop))
        seconds = time.perf_counter() - started
        # Saved while the cluster runs: the grown m x m sums are on its workers.
        if in_place and store_location(out).local:
            # Written beside the model, then swapped in only if no other process replaced
            # it meanwhile (it would hold rows this model lacks): a kill leaves the old model.
            staged = staging_path(out)
            model.save(staged)
            replace_unchanged(staged, out, version)
        else:
            model.save(out, overwrite=in_place or args.overwrite)
    print(f"wrote {out}: added rows {start}:{stop} of {args.data} in {seconds:.2f} s; "
          f"{model.n_samples_fit_} rows seen in all")
    print_summary(summary(model, out))


def _merge(args) -> None:
    from .. import load, merge
    from ..io import check_can_write

    check_can_write(args.out, overwrite=args.overwrite)
    merged = merge([_nystrom_model(load(path), path, "merge") for path in args.models],
                   names=args.models)
    merged.save(args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}: {len(args.models)} models merged, "
          f"{merged.n_samples_fit_} rows seen in all")
    print_summary(summary(merged, args.out))


def _nystrom_model(model, path, command: str):
    """``model`` if it is a KernelPCA, whose pass's statistics re-solve, grow and add up; else
    the reason ``command`` cannot take it."""
    if not isinstance(model, KernelPCA):
        raise CommandError(f"{path} holds a {type(model).__name__} model; {command} takes the "
                           "models of kpca-dask fit --method nystrom (KernelPCA), whose "
                           "statistics re-solve, grow and add up. Fit again instead.")
    return model


#: The function that runs each subcommand, by the name the parser gives it (``args.command``).
COMMANDS = MappingProxyType({
    "generate": _generate,
    "fit": _fit,
    "transform": _transform,
    "inverse-transform": _inverse_transform,
    "score": _score,
    "patterns": _patterns,
    "info": _info,
    "resolve": _resolve,
    "update": _update,
    "merge": _merge,
})
