"""Saving and loading :class:`~kpca_dask.KernelMCA` and :class:`~kpca_dask.KernelCCA` models.

Layout (``format_version`` 1 of "kpca-dask-model", ``estimator`` the class's name)::

    coupled.zarr/
      singular_values        (q,)
      x_landmarks            (m_x, p_x)   and y_landmarks (m_y, p_y)
      x_landmark_indices     (m_x,)       int64; -1 for landmarks given as points
      x_projection           (m_x, q)     scores of X = x_projection^T k_x(x) - x_offset
      x_offset               (q,)
      x_feature_kept, x_feature_weights   a field's kept positions and weights (and y_...)
      rotation_matrix, rotation_correlation, rotation_norms, rotation_signs, rotation_order,
      rotation_x_components, rotation_y_components   a rotated MCA's rotation, and its rotated
                                   components of each field (NaN on a field's mask)
      attributes (JSON): format, format_version, kpca_dask_version, estimator, params,
                         unsaved_params, checksums, and fitted: method, n_samples, dtype,
                         pairs (the parameters given as a pair, which JSON holds as lists),
                         total_squared, pca_modes, field_variances, n_pca_modes, epsilon
                         (the ridge used), held_out (epsilon="auto"'s grid and scores),
                         fields (each field's kernel, kernel_params, landmark_strategy,
                         landmark_rank, n_features, feature_layout_, feature_names),
                         rotation (a rotated MCA's method, power and its components'
                         labels, or null)

Parameters JSON cannot hold are listed in ``unsaved_params``; landmark points and an array
fit's feature weights come back from the arrays, others (a numpy Generator seed, DataArray
weights) as their defaults: give them again before a refit of a loaded model.

Every chunk carries a crc32c checksum and every array and the attributes a digest,
checked on loading with the shapes against each other (as every model file,
:mod:`kpca_dask.storage.file_headers`). Only m-sized arrays are kept: no data.
"""

from __future__ import annotations

import os

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._json import jsonable
from ..checkpoints.file_checks import damaged
from ..coupled.coupled_model import FIELDS, CoupledField, CoupledFit, CoupledRotation
from ..engine.orthomax import METHODS
from ..engine.solve.coupled import CoupledSolution
from ..engine.solve.held_out import HeldOutRidge
from ..errors import InvalidParameterError, about
from ..io import PathOrURL, open_group, write_group
from ..io.checksums import read_checked
from .exact_files import array_digest
from .file_headers import check_header, header_attributes, layout_entries, with_checksums
from .layout_files import labelled, labels_attribute, layout_from_attribute
from .model_files import check_written

__all__ = ["save_coupled", "load_coupled", "ESTIMATORS"]

#: The estimators whose models this file holds.
ESTIMATORS = ("KernelMCA", "KernelCCA")
FORMAT_VERSION = 1
_PREFIXES = ("x_", "y_")
#: The arrays of a rotated MCA's rotation (kpca_dask.coupled.coupled_model.CoupledRotation).
_ROTATION_ARRAYS = ("matrix", "correlation", "norms", "signs", "order")


def _field_entries(field: CoupledField, prefix: str, arrays: dict, P, c,
                   strategy: str | None) -> dict:
    if not isinstance(field.kernel, str):
        raise InvalidParameterError(
            "A model with a callable kernel cannot be saved: a file holds no code. Fit with a "
            "named kernel (e.g. 'rbf', 'linear') to save the model.")
    indices = (np.full(field.n_landmarks, -1, np.int64) if field.landmark_indices is None
               else np.asarray(field.landmark_indices, np.int64))
    own = {"landmarks": np.asarray(field.landmarks), "landmark_indices": indices,
           "projection": P, "offset": c}
    entry = {"kernel": field.kernel, "kernel_params": jsonable(field.kernel_params),
             "landmark_strategy": strategy,
             "landmark_rank": int(field.landmark_rank), "n_features": int(field.n_features),
             "feature_names": (None if field.feature_names is None
                               else [str(name) for name in field.feature_names])}
    layout_entries(field.layout, entry, own)
    arrays.update({prefix + name: value for name, value in own.items()})
    return entry


def save_coupled(estimator, path: PathOrURL, *, overwrite: bool = False,
                 storage_options: dict | None = None) -> str:
    """Write a fitted KernelMCA or KernelCCA to a Zarr group at ``path``; returns the path.

    Raises :class:`~kpca_dask.errors.OutputExistsError` for an existing ``path`` without
    ``overwrite``, and writes nothing for a model that cannot be saved.
    """
    check_is_fitted(estimator)
    fit: CoupledFit = estimator.model_
    solution = fit.solution
    arrays = {"singular_values": np.asarray(solution.singular_values, np.float64)}
    strategies = [value if isinstance(value, str) else None for value in _pair(
        estimator.landmarks)]
    fields = [_field_entries(field, prefix, arrays, *fit.projection(which), strategies[which])
              for which, (field, prefix) in enumerate(zip(fit.fields, _PREFIXES))]
    fitted = {"method": fit.method, "n_samples": fit.n_samples, "dtype": fit.dtype,
              # JSON has no tuples: the parameters given as a pair (for X, for Y)
              "pairs": sorted(name for name, value in estimator.get_params(deep=False).items()
                              if isinstance(value, tuple)),
              "total_squared": float(solution.total_squared),
              "pca_modes": None if solution.pca_modes is None else list(solution.pca_modes),
              "field_variances": (None if solution.field_variances is None
                                  else list(solution.field_variances)),
              "n_pca_modes": jsonable(list(fit.n_pca_modes)), "epsilon": fit.epsilon,
              "held_out": None if fit.held_out is None else {
                  "grid": list(fit.held_out.grid),
                  "correlations": [float(v) for v in fit.held_out.correlations]},
              "fields": fields, "rotation": _rotation_entries(fit.rotation, arrays)}
    name = type(estimator).__name__
    attrs = with_checksums(header_attributes(estimator, name, FORMAT_VERSION, fitted),
                           {key: array_digest(value) for key, value in arrays.items()})
    return write_group(arrays, path, attrs=attrs, overwrite=overwrite,
                       storage_options=storage_options)


def _rotation_entries(rotation: CoupledRotation | None, arrays: dict) -> dict | None:
    """A rotated MCA's rotation: its arrays (the rotated components of each field among
    them) added to ``arrays``, its method and the components' labels returned."""
    if rotation is None:
        return None
    for name in _ROTATION_ARRAYS:
        arrays[f"rotation_{name}"] = np.asarray(getattr(rotation, name))
    for prefix, values in zip(_PREFIXES, rotation.components):
        arrays[f"rotation_{prefix}components"] = np.asarray(values, np.float64)
    return {"method": rotation.method, "power": int(rotation.power),
            "components": [labels_attribute(values) for values in rotation.components]}


def _rotation(arrays: dict, stored: dict | None, solution: CoupledSolution,
              fields: tuple) -> CoupledRotation | None:
    """The rotation :func:`_rotation_entries` wrote, its shapes held to the model's."""
    if stored is None:
        return None
    method = stored.get("method") if isinstance(stored, dict) else stored
    if method not in METHODS:
        raise ValueError(f"rotation method {method!r}")
    values = {name: arrays[f"rotation_{name}"] for name in _ROTATION_ARRAYS}
    r = values["signs"].shape[0]
    expected = {"matrix": (r, r), "correlation": (r, r), "norms": (2, r), "order": (r,)}
    wrong = [name for name, shape in expected.items() if values[name].shape != shape]
    if wrong or not 2 <= r <= len(solution.singular_values) or not np.array_equal(
            np.sort(values["order"]), np.arange(r)):
        raise ValueError(f"the rotation's {(wrong or ['order'])[0]} does not fit {r} pairs")
    components = []
    for prefix, labels, field in zip(_PREFIXES, stored["components"], fields):
        maps = arrays[f"rotation_{prefix}components"]
        if maps.shape[0] != r or np.isfinite(maps).reshape(r, -1).all(axis=0).sum() != (
                field.n_features):
            raise ValueError(f"the rotated components of {prefix[0].upper()} do not fit "
                             f"{r} pairs over the field's {field.n_features} features")
        components.append(labelled(maps, labels))
    return CoupledRotation(stored["method"], int(stored["power"]), values["matrix"],
                           values["correlation"], values["norms"], values["signs"],
                           values["order"].astype(np.int64), tuple(components))


def load_coupled(path: PathOrURL, estimator_class: type, *,
                 storage_options: dict | None = None):
    """Read a model written by :func:`save_coupled`, checked as a whole.

    Raises
    ------
    ModelFormatError
        Not such a model, a damaged array or attribute, or a model no fit could have
        made; the message names the array or attribute.
    """
    name = estimator_class.__name__
    with about(os.fspath(path)):
        group = open_group(path, storage_options=storage_options)
        attrs = group.attrs.asdict()
        check_header(attrs, name, FORMAT_VERSION, f"{name}.save")
        fitted = attrs.get("fitted")
        if not isinstance(fitted, dict) or not isinstance(fitted.get("fields"), list):
            raise damaged("the attribute fitted missing")
        arrays = {key: read_checked(group, key) for key in sorted(group.array_keys())}
        check_written(attrs, arrays)
        try:
            params = dict(attrs.get("params", {}))
            params.update({name: tuple(params[name]) for name in fitted.get("pairs", [])
                           if name in params})
            estimator = estimator_class(**params)
            estimator.model_ = _fitted(arrays, fitted)
            estimator.set_params(**_rebuilt_params(estimator, fitted,
                                                   attrs.get("unsaved_params", [])))
            estimator.field_params()  # the checks of a fit: an edited parameter is refused
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise damaged(
                f"its arrays and attributes are not those a fit writes ({exc})") from None
        return estimator


def _pair(value) -> tuple:
    return value if isinstance(value, tuple) and len(value) == 2 else (value, value)


def _rebuilt_params(estimator, fitted: dict, unsaved: list) -> dict:
    """The parameters a file cannot hold as JSON but its arrays can give back: landmark
    points (a field drawn by a strategy keeps its name) and an array fit's feature weights."""
    rebuilt = {}
    fields = estimator.model_.fields
    if "landmarks" in unsaved:
        rebuilt["landmarks"] = tuple(
            entry.get("landmark_strategy") or field.landmarks
            for entry, field in zip(fitted["fields"], fields))
    if "weights" in unsaved and all(f.layout is None or not f.layout.dims for f in fields):
        rebuilt["weights"] = tuple(None if f.layout is None else f.layout.weights
                                   for f in fields)
    return rebuilt


def _field(arrays: dict, entry: dict, prefix: str, q: int) -> tuple[CoupledField, tuple]:
    landmarks, P, c = (arrays[prefix + key] for key in ("landmarks", "projection", "offset"))
    indices = arrays[prefix + "landmark_indices"]
    m, p = landmarks.shape
    if P.shape != (m, q) or c.shape != (q,) or indices.shape != (m,) or p != entry[
            "n_features"]:
        raise ValueError(f"the arrays of field {FIELDS[_PREFIXES.index(prefix)]} do not fit "
                         f"{m} landmarks, {q} modes and {entry['n_features']} features")
    layout = None
    if entry.get("feature_layout_") is not None:
        layout = layout_from_attribute(entry["feature_layout_"],
                                       arrays.get(prefix + "feature_kept"),
                                       arrays.get(prefix + "feature_weights"))
    names = entry.get("feature_names")
    field = CoupledField(entry["kernel"], dict(entry["kernel_params"]), landmarks,
                         None if (indices < 0).any() else indices,
                         int(entry["landmark_rank"]), p, layout,
                         None if names is None else np.asarray(names, dtype=object))
    return field, (P, c)


def _fitted(arrays: dict, fitted: dict) -> CoupledFit:
    values = arrays["singular_values"]
    q = values.shape[0]
    (x, (P_x, c_x)), (y, (P_y, c_y)) = (
        _field(arrays, entry, prefix, q) for entry, prefix in zip(fitted["fields"], _PREFIXES))
    modes, variances = fitted["pca_modes"], fitted["field_variances"]
    solution = CoupledSolution(P_x, c_x, P_y, c_y, values, float(fitted["total_squared"]),
                               None if modes is None else tuple(int(d) for d in modes),
                               None if variances is None else tuple(map(float, variances)))
    held = fitted.get("held_out")
    held_out = None if held is None else HeldOutRidge(
        float(fitted["epsilon"]), tuple(held["grid"]), np.asarray(held["correlations"]))
    return CoupledFit(fitted["method"], (x, y), solution, int(fitted["n_samples"]),
                      fitted["dtype"], tuple(fitted["n_pca_modes"]), float(fitted["epsilon"]),
                      held_out=held_out,
                      rotation=_rotation(arrays, fitted.get("rotation"), solution, (x, y)))
