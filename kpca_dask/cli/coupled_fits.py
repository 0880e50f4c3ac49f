"""``fit --method mca|cca --with DATA_Y``: kernel MCA and CCA of two fields on the command line.

The first field is the fit's DATA, the second the one ``--with`` names; both are read with
the same input options (``--array``, ``--format``, ``--sample-dim``, ``--no-decode-times``,
``--weights``: a file of weights must suit both) and get the same kernel and landmark
options (a pair of different ones is for Python: ``KernelMCA(kernel=("rbf", "linear"))``).
``--n-components`` is the number of pairs of modes. ``transform --field Y`` projects samples
of the second field; ``info`` describes the pairs.
"""

from __future__ import annotations

import argparse
import copy
import os

import numpy as np

from ..estimators.coupled import KernelCCA, KernelMCA
from .compute import compute_context
from .inputs import fit_weights, open_data
from .parser import CommandError

__all__ = ["COUPLED_METHODS", "fit_coupled", "coupled_summary", "coupled_rows",
           "refuse_field_option"]

#: ``fit --method`` of the coupled estimators.
COUPLED_METHODS = {"mca": KernelMCA, "cca": KernelCCA}


def _second_field(args: argparse.Namespace):
    """The field ``--with`` names, read with DATA's input options (--array, --format,
    --columns, --header, --no-decode-times, --sample-dim)."""
    second = copy.copy(args)
    second.data = args.with_data
    return open_data(second)


def coupled_params(args: argparse.Namespace, method: str) -> dict:
    """The parameters of the KernelMCA or KernelCCA ``fit --method`` makes.

    Examples
    --------
    >>> from kpca_dask.cli.parser import build_parser
    >>> args = build_parser().parse_args(["fit", "x.zarr", "--with", "y.zarr", "--model",
    ...                                   "m.zarr", "--method", "cca", "--n-components", "2",
    ...                                   "--n-pca-modes", "5", "--epsilon", "0.1"])
    >>> params = coupled_params(args, "cca")
    >>> params["n_modes"], params["n_pca_modes"], params["epsilon"], params["kernel"]
    (2, 5, 0.1, 'rbf')
    """
    if args.with_data is None:
        raise CommandError(f"--method {method} pairs two fields: name the second with "
                           "--with DATA_Y (the same samples as DATA, in the same order).")
    if not isinstance(args.n_components, int):
        raise CommandError(f"--method {method} needs --n-components Q, the number of pairs of "
                           "modes (an int).")
    if isinstance(args.landmarks, str) and (os.path.exists(args.landmarks)
                                            or "://" in args.landmarks):
        raise CommandError(f"--method {method} draws each field's landmarks by a strategy "
                           "(kmeans, uniform, rpcholesky); landmark points are for Python.")
    params = {"n_modes": args.n_components, "kernel": args.kernel or "rbf",
              "gamma": args.gamma, "degree": args.degree, "coef0": args.coef0,
              "kernel_params": {"nu": args.nu} if args.nu is not None else None,
              "n_landmarks": args.n_landmarks, "landmarks": args.landmarks,
              "dtype": args.dtype, "random_state": args.seed,
              "sample_dim": getattr(args, "sample_dim", None)}
    if method == "cca":
        params["epsilon"] = args.epsilon
        if args.n_pca_modes is not None:
            params["n_pca_modes"] = args.n_pca_modes
    return params


def fit_coupled(args: argparse.Namespace, X, method: str):
    """Fit and save the coupled estimator of ``method`` on ``X`` and ``--with``; returns it."""
    params = coupled_params(args, method)
    Y = _second_field(args)
    weights = (fit_weights(args.weights, X), fit_weights(args.weights, Y))
    estimator = COUPLED_METHODS[method](**params, weights=weights)
    with compute_context(args):
        estimator.fit(X, Y)
        estimator.save(args.model, overwrite=args.overwrite)
    return estimator


def refuse_field_option(args: argparse.Namespace, model) -> str | None:
    """The field ``transform --field`` projects (None for a one-field model), or a refusal."""
    coupled = type(model).__name__ in ("KernelMCA", "KernelCCA")
    field = getattr(args, "field", None)
    if field is not None and not coupled:
        raise CommandError(f"--field chooses the field of a KernelMCA or KernelCCA model; "
                           f"{args.model} holds a {type(model).__name__} model: leave it out.")
    return (field or "X") if coupled else None


def coupled_summary(model, path: str | os.PathLike) -> dict:
    """What ``info`` says about a KernelMCA or KernelCCA model, as JSON values."""
    from .. import __version__

    fit = model.model_
    described = {"model": os.fspath(path), "kpca_dask_version": __version__,
                 "estimator": type(model).__name__, "method": fit.method,
                 "n_modes": int(fit.n_modes), "n_samples_fit": int(fit.n_samples),
                 "singular_values": np.asarray(model.singular_values_).tolist(),
                 "fields": [{"kernel": str(field.kernel), "kernel_params": field.kernel_params,
                             "n_landmarks": field.n_landmarks,
                             "landmark_rank": int(field.landmark_rank),
                             "n_features": int(field.n_features)} for field in fit.fields]}
    if fit.method == "mca":
        described["squared_covariance_fraction"] = np.asarray(
            model.squared_covariance_fraction_).tolist()
    else:
        described.update(n_pca_modes=list(model.n_pca_modes_), epsilon=fit.epsilon)
    return described


def coupled_rows(s: dict) -> list[tuple[str, str]]:
    """The lines ``info`` prints for a coupled model."""
    rows = []
    for name, field in zip("XY", s["fields"]):
        params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in field["kernel_params"].items())
        rows.append((f"field {name}", f"{field['kernel']}({params}), m = {field['n_landmarks']} "
                                      f"(rank {field['landmark_rank']}), "
                                      f"{field['n_features']} features"))
    values = ", ".join(f"{v:.4g}" for v in s["singular_values"])
    if s["method"] == "mca":
        fractions = ", ".join(f"{v:.3f}" for v in s["squared_covariance_fraction"])
        rows += [("estimator", f"kernel MCA, {s['n_modes']} pairs of modes"),
                 ("covariance", values), ("SCF", fractions)]
    else:
        d_x, d_y = s["n_pca_modes"]
        rows += [("estimator", f"kernel CCA on {d_x} and {d_y} kernel PCs, epsilon "
                               f"{s['epsilon']:g}, {s['n_modes']} pairs of modes"),
                 ("correlation", values)]
    rows.append(("trained on", f"n = {s['n_samples_fit']} samples"))
    return rows
