"""Saving and loading :class:`~kpca_dask.HilbertKernelEOF` models as Zarr groups (no pickle).

Complex arrays are stored as float64 arrays with a leading axis of two (the
real and the imaginary part). Layout (``format_version`` 1 of
"kpca-dask-model", ``estimator = "HilbertKernelEOF"``)::

    hilbert.zarr/
      projection        (2, m, q)  scores = (k(z, W) - centre) @ projection
      centre            (2, m)
      explained_variance  (q,)
      loadings          (2, q, p)  the maps before their unit norm
      mean              (p,)       each feature's mean (the analytic signal's)
      scores            (2, n, q)  the training samples' scores
      landmark_indices  (m,)       int64
      landmarks         (2, m, p)  the Nyström way's landmarks (analytic signal)
      rows              (n, p)     the Gram way's training rows, copied in, in the
                                   dtype the fit read them in
      train_sums, norms (n,)       the Gram way's X Xᵀ 1 and squared norms
      feature_kept, feature_weights      a field's kept positions and weights
      rotation_matrix, ...        a rotated model's complex rotation
                                  (kpca_dask.storage.rotation_files)
      attributes (JSON): format, format_version, kpca_dask_version, estimator,
                         params, unsaved_params, checksums, and fitted: solver,
                         kernel_params, preprocessing (the analytic signal's
                         step, kpca_dask.io.preprocessing), total_variance,
                         field_total_variance,
                         n_samples, train_total, feature_layout_, samples, lazy,
                         rotation (its method, or null)

As for :mod:`kpca_dask.storage.exact_files`: every chunk carries a crc32c
checksum, every array and the attributes a digest, all checked on loading
(the training rows panel by panel), and the shapes against each other. A
Gram-way model holds its training rows (n p words), as an exact model does,
because a new record is projected through its inner products with them. The
samples' coordinates are kept as their values (numbers, times, text); other
objects (cftime dates) come back as their text. A rotated model keeps its rotation.
"""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import xarray as xr
import zarr
from sklearn.utils.validation import check_is_fitted

from .._json import jsonable
from ..checkpoints.file_checks import damaged
from ..engine.hilbert.complex_solve import ComplexSolution
from ..eof.hilbert_model import GramState, HilbertFit
from ..errors import InvalidParameterError, about
from ..io import PathOrURL, open_group, write_group
from ..io.checksums import read_checked
from ..io.preprocessing import AnalyticSignal, steps_attribute, steps_from_attribute
from ..model.eof_parameters import HILBERT_CONSTRAINTS
from ..model.parameters import check_params
from .exact_files import array_digest, stored_digest
from .file_headers import check_header, header_attributes, layout_entries, with_checksums
from .layout_files import (
    coordinate_attribute,
    coordinate_values,
    layout_from_attribute,
)
from .model_files import check_written
from .rotation_files import rotation_entries, rotation_from_entries

__all__ = ["save_hilbert", "load_hilbert", "ESTIMATOR"]

ESTIMATOR = "HilbertKernelEOF"
FORMAT_VERSION = 1
_COMPLEX = ("projection", "centre", "loadings", "scores", "landmarks")
_REQUIRED = ("projection", "centre", "explained_variance", "loadings", "mean", "scores",
             "landmark_indices")
_GRAM = ("rows", "train_sums", "norms")


def _split(values) -> np.ndarray:
    return np.stack([np.real(values), np.imag(values)]).astype(np.float64)


def save_hilbert(estimator, path: PathOrURL, *, overwrite: bool = False,
                 storage_options: dict | None = None) -> str:
    """Write a fitted HilbertKernelEOF to a Zarr group at ``path``; returns the path.

    A Gram-way model's training rows are copied in, read once for their digest
    and once as they are written. Raises
    :class:`~kpca_dask.errors.OutputExistsError` for an existing ``path``
    without ``overwrite``.
    """
    check_is_fitted(estimator)
    fit: HilbertFit = estimator.model_
    solution = fit.solution
    arrays = {"projection": _split(solution.projection), "centre": _split(solution.centre),
              "explained_variance": np.asarray(solution.explained_variance, np.float64),
              "loadings": _split(solution.loadings),
              "scores": _split(fit.scores),
              "landmark_indices": fit.landmark_indices, **fit.analytic.arrays()}
    fitted = {"solver": fit.solver, "kernel_params": jsonable(fit.kernel_params),
              "preprocessing": steps_attribute(fit.preprocessing.steps),
              "total_variance": float(solution.total_variance),
              "field_total_variance": float(solution.field_total_variance),
              "n_samples": fit.n_samples, "lazy": bool(fit.lazy),
              "samples": _samples_attribute(fit.samples)}
    if fit.solver == "gram":
        arrays.update(rows=fit.gram.rows, train_sums=fit.gram.train_sums, norms=fit.gram.norms)
        fitted["train_total"] = float(fit.gram.train_total)
    else:
        arrays["landmarks"] = _split(fit.landmarks)
    layout_entries(fit.layout, fitted, arrays)
    rotation_entries(fit.rotation, fitted, arrays)
    attrs = with_checksums(header_attributes(estimator, ESTIMATOR, FORMAT_VERSION, fitted),
                           {name: array_digest(value) for name, value in arrays.items()})
    return write_group(arrays, path, attrs=attrs, overwrite=overwrite,
                       storage_options=storage_options)


def _samples_attribute(samples: xr.DataArray | None) -> dict | None:
    if samples is None:
        return None
    return {"dim": samples.dims[0],
            "coords": {name: coordinate_attribute(coord.values)
                       for name, coord in samples.coords.items()}}


def _samples(stored: dict | None, n: int) -> xr.DataArray | None:
    if stored is None:
        return None
    dim = stored["dim"]
    coords = {name: (dim, coordinate_values(value)) for name, value in stored["coords"].items()}
    if any(values.shape != (n,) for _, values in coords.values()):
        raise ValueError("a sample coordinate does not have the fit's samples")
    return xr.DataArray(np.zeros(n, dtype=bool), dims=(dim,), coords=coords)


def load_hilbert(path: PathOrURL, estimator_class: type, *,
                 storage_options: dict | None = None):
    """Read a model written by :func:`save_hilbert`, checked as a whole; a Gram-way model's
    training rows lazily.

    Raises
    ------
    ModelFormatError
        Not such a model, a damaged array or attribute, or a model no fit
        could have made; the message names the array or attribute.
    """
    with about(os.fspath(path)):
        group = open_group(path, storage_options=storage_options)
        attrs = group.attrs.asdict()
        check_header(attrs, ESTIMATOR, FORMAT_VERSION, f"{ESTIMATOR}.save")
        return _rebuilt(group, attrs, estimator_class)


def _rebuilt(group: zarr.Group, attrs: dict, estimator_class: type):
    names = sorted(group.array_keys())
    fitted = attrs.get("fitted")
    if not isinstance(fitted, dict):
        raise damaged("the attribute fitted missing")
    gram = fitted.get("solver") == "gram"
    wanted = _REQUIRED + (_GRAM if gram else ("landmarks",))
    missing = [name for name in wanted if name not in names]
    if missing:
        raise damaged(f"{', '.join(missing)} missing")
    large = ("rows",) if gram else ()
    small = {name: read_checked(group, name) for name in names if name not in large}
    check_written(attrs, {**small, **{name: None for name in large}},
                  taken={name: stored_digest(group, name) for name in large})
    params = dict(attrs.get("params", {}))
    try:
        estimator = estimator_class(**params)
        check_params(estimator.get_params(deep=False), constraints=HILBERT_CONSTRAINTS,
                     estimator=ESTIMATOR)
    except (InvalidParameterError, TypeError) as exc:
        raise damaged(f"a parameter is invalid: {exc}") from None
    rows = da.from_zarr(group["rows"], chunks=group["rows"].chunks) if gram else None
    try:
        estimator.model_ = _fitted(small, fitted, rows, estimator)
    except (KeyError, TypeError, ValueError) as exc:
        raise damaged(f"its arrays and attributes are not those a fit writes ({exc})") from None
    return estimator


def _joined(small: dict, name: str) -> np.ndarray:
    values = small[name]
    if values.ndim < 2 or values.shape[0] != 2:
        raise ValueError(f"the array {name!r} holds no real and imaginary parts")
    return values[0] + 1j * values[1]


def _fitted(small: dict, fitted: dict, rows, estimator) -> HilbertFit:
    """The fitted model the arrays and attributes make, their shapes checked."""
    projection, centre = _joined(small, "projection"), _joined(small, "centre")
    loadings, scores = _joined(small, "loadings"), _joined(small, "scores")
    variance, mean = small["explained_variance"], small["mean"]
    n, (m, q), p = int(fitted["n_samples"]), projection.shape, mean.shape[0]
    expected = {"centre": ((m,), centre.shape), "explained_variance": ((q,), variance.shape),
                "loadings": ((q, p), loadings.shape), "scores": ((n, q), scores.shape),
                "landmark_indices": ((m,), small["landmark_indices"].shape)}
    landmarks, gram = None, None
    if fitted["solver"] == "gram":
        expected.update(rows=((n, p), rows.shape), train_sums=((n,), small["train_sums"].shape),
                        norms=((n,), small["norms"].shape))
        gram = GramState(rows, small["train_sums"], float(fitted["train_total"]),
                         small["norms"])
    elif fitted["solver"] == "nystrom":
        landmarks = _joined(small, "landmarks")
        expected["landmarks"] = ((m, p), landmarks.shape)
    else:
        raise ValueError(f"solver {fitted['solver']!r}")
    wrong = [name for name, (want, got) in expected.items() if want != got]
    if wrong:
        raise ValueError(f"the array {wrong[0]!r} does not fit a model of {n} samples, "
                         f"{m} landmarks, {q} modes and {p} features")
    layout = None
    if fitted.get("feature_layout_") is not None:
        layout = layout_from_attribute(fitted["feature_layout_"], small.get("feature_kept"),
                                       small.get("feature_weights"))
    solution = ComplexSolution(projection, centre, variance, loadings,
                               float(fitted["total_variance"]),
                               float(fitted["field_total_variance"]), n)
    return HilbertFit(fitted["solver"], solution, dict(fitted["kernel_params"]), landmarks,
                      small["landmark_indices"].astype(np.int64),
                      _analytic_step(fitted, small, estimator), layout, scores,
                      _samples(fitted.get("samples"), n), bool(fitted["lazy"]), gram,
                      rotation_from_entries(fitted, small, q, p))


def _analytic_step(fitted: dict, small: dict, estimator) -> AnalyticSignal:
    """The analytic signal the file's steps hold, as the estimator's parameters say it
    (a file written before the steps were recorded: from those parameters)."""
    stored = fitted.get("preprocessing", [{"step": AnalyticSignal.kind,
                                           "padding": estimator.padding,
                                           "decay_factor": estimator.decay_factor}])
    steps = steps_from_attribute(stored, small)
    if [step.kind for step in steps] != [AnalyticSignal.kind]:
        raise ValueError(f"its preprocessing is {[step.kind for step in steps]}, not the "
                         "analytic signal alone")
    step = steps[0]
    if (step.padding, step.decay_factor) != (estimator.padding, float(estimator.decay_factor)):
        raise ValueError("its analytic signal's padding is not its parameters'")
    return step
