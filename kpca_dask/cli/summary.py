"""The summary of a model that ``info`` prints, and every command that writes a model after it.

:func:`summary` gathers it as plain JSON values (``info --json`` prints them
as they are); :func:`print_summary` lays it out one line per topic.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["summary", "print_summary", "shown_components"]


def summary(model, path: str | os.PathLike) -> dict:
    """What ``info`` says about a fitted ``model`` saved at ``path``, as JSON values.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> model = KernelPCA(n_components=2, gamma=0.5, n_landmarks=20, random_state=0).fit(X)
    >>> s = summary(model, "model.zarr")
    >>> s["kernel"], s["n_components"], s["n_samples_fit"], s["can_invert"]
    ('rbf', 2, 100, False)
    """
    from .. import __version__
    from ..exact.exact_model import ExactFit
    from ..model.provenance import recorded_rows

    if type(model).__name__ in ("HilbertKernelEOF", "ExtendedKernelEOF"):
        from .eof_fits import eof_summary

        return eof_summary(model, path)
    if type(model).__name__ in ("KernelMCA", "KernelCCA"):
        from .coupled_fits import coupled_summary

        return coupled_summary(model, path)
    if isinstance(model.model_, ExactFit):
        return _exact_summary(model, path)
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
        "explained_variance": np.asarray(model.explained_variance_).tolist(),
        "total_variance": float(model.total_variance_),
        "total_variance_kind": str(model.total_variance_kind_),
        "north_errors": np.asarray(model.north_errors()).tolist(),
        "trace_error": float(model.trace_error_),
        "trace_error_std": float(getattr(model, "trace_error_std_", 0.0)),
        "eigenvalue_residuals": _residuals(model),
        "n_samples_fit": int(model.n_samples_fit_),
        "n_features_in": int(model.n_features_in_),
        "feature_names_in": _names(model),
        "fit_seconds": float(model.fit_seconds_),
        "dtype": model.fit_settings_.dtype,
        "statistics_kept": model.model_.statistics is not None,
        "can_invert": model.model_.preimage is not None,
        "inverse_alpha": getattr(model, "inverse_alpha_", None),
        "row_provenance": recorded_rows(model),
        "field": _field(model.model_.layout),
        "rotation": _rotation(model.model_.rotation),
    }


def _exact_summary(model, path) -> dict:
    """:func:`summary` of an ExactKernelPCA."""
    from .. import __version__

    ratio = np.asarray(model.explained_variance_ratio_)
    return {
        "model": os.fspath(path),
        "kpca_dask_version": __version__,
        "estimator": "ExactKernelPCA",
        "kernel": model.kernel_,
        "kernel_params": model.kernel_params_,
        "eigen_solver": model.eigen_solver_,
        "dtype": model.dtype if model.eigen_solver_ == "matrix-free" else "float64",
        "n_products": model.model_.n_products,
        "n_components": int(model.n_components_),
        "eigenvalues": np.asarray(model.eigenvalues_).tolist(),
        "explained_variance_ratio": ratio.tolist(),
        "explained_variance_total": float(ratio.sum()),
        "eigenvalue_residuals": _residuals(model),
        "n_samples_fit": int(model.n_samples_fit_),
        "n_features_in": int(model.n_features_in_),
        "field": _field(model.model_.layout),
    }


def _exact_rows(s: dict) -> list[tuple[str, str]]:
    """The lines :func:`print_summary` prints for an ExactKernelPCA."""
    products = (f", {s['n_products']} products with J K J ({s['dtype']} tiles)"
                if s.get("n_products") is not None else "")
    residuals = ("not computed (the dense solver's eigendecomposition)"
                 if s["eigenvalue_residuals"] is None else _certificate(s, "J K J"))
    return [("solver", f"exact, {s['eigen_solver']}{products}"),
            ("trained on", f"n = {s['n_samples_fit']} rows x {s['n_features_in']} features "
                           "(copied into the model file)"),
            ("components", f"{s['n_components']}, explaining "
                           f"{100 * s['explained_variance_total']:.2f} % of the variance"),
            ("eigenvalues", _short_list(s["eigenvalues"])),
            ("explained", _short_list(s["explained_variance_ratio"])),
            ("residuals", residuals),
            ("inverse", "no: exact kernel PCA learns no pre-image map")]


def _rotation(rotation) -> dict | None:
    """The rotation a model holds (a kpca_dask.rotate result's): its method, modes and their
    variance fractions."""
    if rotation is None:
        return None
    variance, total = np.asarray(rotation.explained_variance), rotation.total_variance
    return {"method": rotation.method, "power": int(rotation.power),
            "n_components": rotation.n_components,
            "explained_variance_ratio": (variance / total if total > 0
                                         else np.zeros_like(variance)).tolist()}


def _field(layout) -> dict | None:
    """The layout of a field or weighted fit: dims, sizes, mask and weights."""
    if layout is None:
        return None
    weights = None
    if layout.weights is not None:
        w = layout.weights
        weights = {"dims": list(layout.weight_dims), "min": float(w.min()),
                   "max": float(w.max()), "mean": float(w.mean())}
    shown = {"sample_dim": layout.sample_dim, "dims": list(layout.dims),
             "shape": list(layout.shape), "masked": int(layout.n_positions - layout.n_features),
             "weights": weights}
    if layout.parts:
        shown["fields"] = {part.name: _field(part) for part in layout.parts}
        shown["container"] = layout.container
    return shown


def _field_rows(field: dict) -> list[tuple[str, str]]:
    rows = []
    if field.get("fields"):
        for name, part in field["fields"].items():
            rows += [(label, f"{name}: {text}") for label, text in _field_rows(part)]
        return rows
    if field["dims"]:
        sizes = " x ".join(f"{d} {n}" for d, n in zip(field["dims"], field["shape"]))
        rows.append(("field", f"samples along {field['sample_dim']!r}; features {sizes}, "
                              f"{field['masked']} masked position(s) dropped"))
    weights = field["weights"]
    if weights is not None:
        over = f"over {', '.join(weights['dims'])}" if weights["dims"] else "per feature"
        rows.append(("weights", f"{over}: min {weights['min']:.4g}, mean "
                                f"{weights['mean']:.4g}, max {weights['max']:.4g}"))
    return rows


def _residuals(model) -> list | None:
    """|M v - lambda v| of each component (the solve's certificate); None in older files."""
    residuals = getattr(model, "eigenvalue_residuals_", None)
    return None if residuals is None else np.asarray(residuals).tolist()


def _certificate(s: dict, operator: str = "M") -> str:
    residuals, eigenvalues = s.get("eigenvalue_residuals"), s["eigenvalues"]
    if residuals is None:
        return "not recorded (a model saved before kpca-dask recorded it)"
    top = max(eigenvalues, default=0.0)
    worst = max(residuals, default=0.0)
    relative = f"{worst / top:.1e} of the largest eigenvalue" if top > 0 else f"{worst:.1e}"
    return f"|{operator} v - lambda v| <= {relative}"


def _trace_error(s: dict) -> str:
    std = s.get("trace_error_std", 0.0)
    spread = f" +/- {std:.1e} (trace estimated)" if std > 0 else ""
    return f"{s['trace_error']:.3e}{spread}  (relative error of the Nystrom trace)"


def print_summary(s: dict) -> None:
    """Print a :func:`summary` one topic a line, as ``info`` does.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> model = KernelPCA(n_components=2, gamma=0.5, n_landmarks=20, random_state=0).fit(X)
    >>> print_summary(summary(model, "model.zarr"))  # doctest: +ELLIPSIS
    kernel       rbf(gamma=0.5)
    landmarks    m = 20 (kmeans), rank 20, float64 blocks
    trained on   n = 100 rows x 3 features
    ...
    components   2, explaining ... % of the variance
    ...
    """
    from ..model.provenance import describe

    own = _estimator_rows(s)
    if own is not None:
        for label, text in own:
            print(f"{label:<12} {text}")
        return
    params = _kernel_params(s)
    rows = [
        ("kernel", f"{s['kernel']}({params})"),
        ("landmarks", f"m = {s['n_landmarks']} ({s['landmarks']}), rank {s['landmark_rank']}, "
                      f"{s['dtype']} blocks"),
        ("trained on", f"n = {s['n_samples_fit']} rows x {s['n_features_in']} features"),
        ("fit time", f"{s['fit_seconds']:.2f} s"),
        ("trace error", _trace_error(s)),
        ("components", f"{s['n_components']}, explaining "
                       f"{100 * s['explained_variance_total']:.2f} % of the variance"),
        ("eigenvalues", _short_list(s["eigenvalues"])),
        ("explained", _short_list(s["explained_variance_ratio"])),
        ("variance", _variance(s)),
        ("north error", _short_list(s["north_errors"]) + "  (typical error of each variance, "
                        "lambda sqrt(2/n))"),
        ("residuals", _certificate(s)),
        ("updates", "update, merge and resolve work (statistics kept)" if s["statistics_kept"]
                    else "none: no statistics kept (model format version 1)"),
    ]
    if s.get("feature_names_in"):
        names = s["feature_names_in"]
        rows.insert(3, ("features", ", ".join(names[:10])
                        + (f" ... ({len(names)} in all)" if len(names) > 10 else "")))
    if s.get("field"):
        rows[3:3] = _field_rows(s["field"])
    if s.get("rotation"):
        r = s["rotation"]
        power = f", power {r['power']}" if r["method"] == "promax" else ""
        rows.append(("rotation", f"{r['method']}{power} of {r['n_components']} modes, "
                                 f"explaining {_short_list(r['explained_variance_ratio'])} "
                                 "of the field's variance"))
    if "can_invert" in s:
        alpha = s.get("inverse_alpha")
        chosen = "" if alpha is None else f", ridge alpha = {alpha:.3g}"
        rows.append(("inverse", f"yes (inverse-transform{chosen})" if s["can_invert"] else
                     "no: fit with fit_inverse_transform=True to invert"))
    if "row_provenance" in s:
        rows += [("rows" if i == 0 else "", line)
                 for i, line in enumerate(describe(s["row_provenance"]))]
    for label, text in rows:
        print(f"{label:<12} {text}")


def _kernel_params(s: dict) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in s["kernel_params"].items())


def _estimator_rows(s: dict) -> list[tuple[str, str]] | None:
    """The lines of the estimators ``info`` describes their own way (None: KernelPCA's)."""
    estimator = s.get("estimator")
    if estimator in ("KernelMCA", "KernelCCA"):
        from .coupled_fits import coupled_rows

        return coupled_rows(s)
    if estimator in ("HilbertKernelEOF", "ExtendedKernelEOF"):
        from .eof_fits import eof_rows

        return [("kernel", f"{s['kernel']}({_kernel_params(s)})"), *eof_rows(s)]
    if estimator == "ExactKernelPCA":
        rows = [("kernel", f"{s['kernel']}({_kernel_params(s)})"), *_exact_rows(s)]
        if s.get("field"):
            rows[3:3] = _field_rows(s["field"])
        return rows
    return None


def shown_components(n_components: int | float | None) -> str:
    """``n_components`` as the command line writes it: None is "all".

    Examples
    --------
    >>> shown_components(None), shown_components(0.95), shown_components(3)
    ('all', '0.95', '3')
    """
    return "all" if n_components is None else str(n_components)


def _names(model) -> list[str] | None:
    names = model.model_.feature_names
    return None if names is None else [str(name) for name in names]


def _variance(s: dict) -> str:
    """Each component's variance (eigenvalue / (n - 1)) and the total they are shares of."""
    kind = {"exact": "exact", "nystrom-estimate": "Nyström estimate"}.get(
        s.get("total_variance_kind", "exact"), "exact")
    return (_short_list(s["explained_variance"])
            + f"  of a total {s['total_variance']:.4g} ({kind}; eigenvalues / (n - 1))")


def _short_list(values, shown=10) -> str:
    text = " ".join(f"{v:.4g}" for v in values[:shown])
    return text + (f" ... ({len(values)} in all)" if len(values) > shown else "")
