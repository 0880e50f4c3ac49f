"""``fit --method hilbert`` and ``fit --method extended``: the EOF estimators on the command line.

Their parameters come from the fit's options: those of the kernel and of the
landmarks as for ``fit``, and their own (``--solver``, ``--padding``,
``--decay-factor``, ``--tau``, ``--embedding``, ``--n-pca-modes``). An option
that the chosen estimator does not take is refused, by name, before any data
are read; so is an option of these estimators given to another method.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from ..estimators.extended import ExtendedKernelEOF
from ..estimators.hilbert import HilbertKernelEOF
from .compute import compute_context
from .inputs import fit_weights
from .parser import EOF_DEFAULTS, LIBRARY_DEFAULTS, CommandError

__all__ = ["eof_params", "fit_eof", "refuse_eof_options", "eof_summary", "eof_rows"]

#: The options each method takes beside the kernel's, --n-components, --weights and
#: --sample-dim (their command-line names).
_OWN = {"hilbert": ("solver", "padding", "decay_factor", "n_landmarks", "landmarks", "seed"),
        "extended": ("solver", "tau", "embedding", "n_pca_modes", "n_landmarks", "landmarks",
                     "seed", "tol", "dtype", "nu"),
        "mca": ("n_landmarks", "landmarks", "seed", "dtype", "nu"),
        "cca": ("n_pca_modes", "epsilon", "n_landmarks", "landmarks", "seed", "dtype", "nu")}
#: The options no EOF estimator takes, with their defaults.
_NONE_TAKES = {"remove_zero_eig": False, "fit_inverse_transform": False, "alpha": 1.0,
               "checkpoint": None, "eigen_solver": "auto"}
#: Which methods take the options no EOF estimator takes (the others: nystrom alone).
_TAKERS = {"eigen_solver": ["exact"], "checkpoint": ["nystrom", "exact"],
           "remove_zero_eig": ["nystrom", "exact"]}
_ESTIMATORS = {"hilbert": HilbertKernelEOF, "extended": ExtendedKernelEOF}


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _defaults() -> dict:
    return {**EOF_DEFAULTS, **LIBRARY_DEFAULTS, "seed": None, "nu": None, **_NONE_TAKES}


def refuse_eof_options(args: argparse.Namespace, method: str) -> None:
    """Refuse the options the estimator of ``method`` does not take, by name.

    Examples
    --------
    >>> from kpca_dask.cli.parser import build_parser
    >>> args = build_parser().parse_args(["fit", "d.zarr", "--model", "m.zarr", "--tau", "3"])
    >>> refuse_eof_options(args, "nystrom")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.cli.parser.CommandError: --tau is an option of --method extended, not of ...
    """
    defaults, own = _defaults(), _OWN.get(method)
    if getattr(args, "with_data", None) is not None and method not in ("mca", "cca"):
        raise CommandError(f"--with names the second field of --method mca or cca, not of "
                           f"--method {method}: leave it out.")
    for name in (*EOF_DEFAULTS, *(_NONE_TAKES if own is not None else ())):
        if (own is not None and name in own) or getattr(args, name, None) == defaults[name]:
            continue
        takers = [m for m, names in _OWN.items() if name in names] or _TAKERS.get(
            name, ["nystrom"])
        raise CommandError(
            f"{_option(name)} is an option of --method {' and '.join(takers)}, not of "
            f"--method {method}: leave it out.")
    if own is not None:
        for name in ("n_landmarks", "landmarks", "seed", "tol", "dtype", "nu"):
            if name not in own and getattr(args, name) != defaults[name]:
                raise CommandError(f"{_option(name)} is not an option of --method {method}: "
                                   "leave it out.")


def eof_params(args: argparse.Namespace, method: str) -> dict:
    """The parameters of the HilbertKernelEOF or ExtendedKernelEOF ``fit --method`` makes.

    Examples
    --------
    >>> from kpca_dask.cli.parser import build_parser
    >>> args = build_parser().parse_args(["fit", "d.zarr", "--model", "m.zarr", "--method",
    ...                                   "extended", "--tau", "3", "--n-components", "4"])
    >>> params = eof_params(args, "extended")
    >>> params["kernel"], params["tau"], params["embedding"], params["n_components"]
    ('linear', 3, 2, 4)
    """
    refuse_eof_options(args, method)
    if args.n_components is None or (isinstance(args.n_components, float)
                                     and method == "hilbert"):
        kinds = "an int" if method == "hilbert" else "an int, or a fraction of variance"
        raise CommandError(f"--method {method} needs --n-components Q, the number of modes "
                           f"({kinds}).")
    params = {"n_components": args.n_components, "kernel": args.kernel or "linear",
              "gamma": args.gamma, "degree": args.degree, "coef0": args.coef0,
              "n_landmarks": args.n_landmarks, "landmarks": args.landmarks,
              "random_state": args.seed, "solver": args.solver,
              "sample_dim": getattr(args, "sample_dim", None)}
    if method == "hilbert":
        params.update(padding=args.padding, decay_factor=args.decay_factor)
        # The Hilbert EOF draws its landmarks uniformly (or takes sample indices, which the
        # command line does not offer): the default strategy's name stands for that.
        if params["landmarks"] == LIBRARY_DEFAULTS["landmarks"]:
            params["landmarks"] = "uniform"
        elif params["landmarks"] != "uniform":
            raise CommandError(f"--landmarks {params['landmarks']}: --method hilbert draws its "
                               "landmarks uniformly; leave --landmarks out.")
    else:
        params.update(tau=args.tau, embedding=args.embedding, n_pca_modes=args.n_pca_modes,
                      tol=args.tol, dtype=args.dtype,
                      kernel_params={"nu": args.nu} if args.nu is not None else None)
    return params


def fit_eof(args: argparse.Namespace, X, method: str):
    """Fit and save the estimator of ``method`` on ``X``; returns it."""
    from ..io import open_array

    params = eof_params(args, method)
    landmarks = params["landmarks"]
    if os.path.exists(landmarks) or "://" in landmarks:  # a file of landmark points
        params["landmarks"] = np.asarray(open_array(landmarks).compute(scheduler="threads"))
    estimator = _ESTIMATORS[method](**params, weights=fit_weights(args.weights, X))
    with compute_context(args):
        estimator.fit(X)
        estimator.save(args.model, overwrite=args.overwrite)
    return estimator


def eof_summary(model, path: str | os.PathLike) -> dict:
    """What ``info`` says about a Hilbert or extended EOF model, as JSON values."""
    from .. import __version__

    ratio = np.asarray(model.explained_variance_ratio_)
    described = {"model": os.fspath(path), "kpca_dask_version": __version__,
                 "estimator": type(model).__name__, "kernel": model.kernel,
                 "kernel_params": {key: value for key, value in model.kernel_params_.items()
                                   if key != "kernel"},
                 "solver": model.solver_, "n_components": int(model.n_components_),
                 "eigenvalues": np.asarray(model.eigenvalues_).tolist(),
                 "explained_variance_ratio": ratio.tolist(),
                 "explained_variance_total": float(ratio.sum()),
                 "total_variance_kind": model.total_variance_kind_,
                 "north_errors": np.asarray(model.north_errors()).tolist(),
                 "n_samples_fit": int(model.n_samples_fit_),
                 "n_features_in": int(model.n_features_in_)}
    if isinstance(model, ExtendedKernelEOF):
        described.update(tau=model.delay_[0], embedding=model.delay_[1],
                         n_pca_modes=model.n_pca_modes)
    else:
        described.update(padding=model.padding, n_landmarks=int(model.n_landmarks_))
    return described


def eof_rows(s: dict) -> list[tuple[str, str]]:
    """The lines ``info`` prints for a Hilbert or extended EOF model (after the kernel)."""
    way = {"gram": "the field's n x n Gram matrix (exact)", "nystrom": "landmarks"}[s["solver"]]
    if s["estimator"] == "ExtendedKernelEOF":
        reduced = (f", on the scores of {s['n_pca_modes']} linear EOFs"
                   if s["n_pca_modes"] else "")
        what = (f"extended EOF: {s['embedding']} copies {s['tau']} samples apart{reduced}, "
                f"by {way}")
    else:
        what = (f"Hilbert (complex) EOF, padding {s['padding']}, by {way}"
                + ("" if s["solver"] == "gram" else f", m = {s['n_landmarks']}"))
    return [("estimator", what),
            ("trained on", f"n = {s['n_samples_fit']} samples x {s['n_features_in']} features"),
            ("components", f"{s['n_components']}, explaining "
                           f"{100 * s['explained_variance_total']:.2f} % of the variance "
                           f"({s['total_variance_kind']})")]
