"""Checks of a model read from a file, before anything is computed with it (docs/design.md §10).

A model file is an input like any other: it travels between clusters, object
stores and people, and a model that is wrong in a way nobody sees returns
wrong embeddings without a word. :func:`check_fitted_estimator` therefore holds a loaded
model to the same rules a fit obeys:

- the fitted kernel parameters go through the kernel's own checks (the
  stored constructor parameters and fit settings through the table ``fit``
  checks them with, :func:`~kpca_dask.model.parameters.check_params`, as the
  loader reads them: :mod:`kpca_dask.storage.model_files`);
- the rows it has counted (``row_provenance_``) add up to ``n_samples_fit_``;
- every fitted number has its type and range;
- the arrays agree with each other: m landmarks of p features, an m x q
  projection, q eigenvalues, an m x m Gram matrix, the pre-image map's m x q
  centres and m x p coefficients;
- every array is float64 (the indices int64) and finite; the eigenvalues are
  non-negative and descending, the ratios their share of one total.

:func:`check_statistics` holds pass statistics (of a model, a checkpoint or
the inputs of :func:`kpca_dask.merge`) to the shapes of their landmarks.
The types, shapes and dtypes come from the model's own declarations
(:data:`kpca_dask.model.fitted.DECLARED`). Every failure is a
:class:`~kpca_dask.errors.ModelFormatError` that names the array or
attribute and what is wrong; the caller that knows the file names it
(:func:`kpca_dask.errors.about`).
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from ..blocks.kernels import canonical_kernel_name
from ..blocks.statistics import PassStatistics
from ..engine.kernel_params import resolve_kernel_params
from ..errors import KPCAError, ModelFormatError, about
from ..validation import is_count, is_finite_real, is_real
from .fitted import declared

__all__ = ["check_fitted_estimator", "check_statistics", "check_array", "check_landmark_path",
           "check_row_provenance", "damaged"]

#: The least value of a fitted number, by its declared rule.
_LEAST = {"real": None, "nonnegative": 0.0}
#: Relative slack for sums that were rounded when written (ratios, symmetry).
_ROUNDING = 1e-8


def check_array(value, name: str, shape: tuple, *, kind: str = "f",
                found_in: str = "model") -> np.ndarray:
    """``value`` if it is a finite array of ``shape`` in float64 (``kind="f"``) or int64 ("i").

    ``kind="x"`` allows float32 as well, for points in input space: landmarks
    that are rows of float32 data keep their dtype.

    Examples
    --------
    >>> check_array(np.zeros((2, 3)), "landmarks", (2, 3)).shape
    (2, 3)
    >>> check_array(np.zeros(2), "offset", (3,))
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: the model is damaged: the array 'offset' has shape \
(2,), but the other arrays and attributes need (3,). Fit and save it again.

    ``found_in`` ("model" or "checkpoint") says where it was found, for the message.
    """
    expected = np.dtype(np.int64 if kind == "i" else np.float64)
    allowed = (expected, np.dtype(np.float32)) if kind == "x" else (expected,)
    if not isinstance(value, np.ndarray) or value.dtype not in allowed:
        dtype = getattr(value, "dtype", type(value).__name__)
        raise damaged(f"the array {name!r} has dtype {dtype}, not {expected}", found_in)
    if value.shape != tuple(shape):
        raise damaged(f"the array {name!r} has shape {value.shape}, but the other "
                      f"arrays and attributes need {tuple(shape)}", found_in)
    if kind != "i" and not np.isfinite(value).all():
        raise damaged(f"the array {name!r} holds {int((~np.isfinite(value)).sum())} "
                      "NaN or infinite value(s)", found_in)
    return value


def check_statistics(stats: PassStatistics, m: int, *, least_rows: int = 1,
                     found_in: str = "model") -> None:
    """Refuse pass statistics that do not fit ``m`` landmarks, or hold impossible values.

    ``least_rows`` is 1 for a model and 0 for a checkpoint that has counted
    nothing yet.

    Examples
    --------
    >>> stats = PassStatistics(3, np.zeros(2), np.eye(2), 6.0, 0, -1, np.ones(2))
    >>> check_statistics(stats, 2)
    >>> check_statistics(stats, 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: ... 'statistics_gram' has shape (2, 2), ...
    """
    if not is_count(stats.n_samples, least_rows):
        raise damaged(f"statistics.n_samples is {stats.n_samples!r}, not an integer "
                      f">= {least_rows}", found_in)
    if not is_count(stats.n_nonfinite, 0) or not is_count(stats.first_nonfinite_row, -1):
        raise damaged("statistics.n_nonfinite and statistics.first_nonfinite_row must "
                      "be integers >= 0 and >= -1", found_in)
    if not np.isfinite(stats.diagonal_sum):  # t = sum k(x, x) may be < 0 (sigmoid kernel)
        raise damaged(f"statistics.diagonal_sum is {stats.diagonal_sum!r}", found_in)
    if isinstance(stats.gram, da.Array):
        # Held on a cluster, or read lazily from a file whose chunks carry checksums:
        # read only when solved, so only its form is checked here.
        if stats.gram.shape != (m, m) or stats.gram.dtype != np.float64:
            raise damaged(f"the array 'statistics_gram' is {stats.gram.dtype} of shape "
                          f"{stats.gram.shape}, not float64 of shape {(m, m)}", found_in)
        gram = None
    else:
        gram = check_array(stats.gram, "statistics_gram", (m, m), found_in=found_in)
    check_array(stats.column_sums, "statistics_column_sums", (m,), found_in=found_in)
    check_array(stats.reference, "statistics_reference", (m,), found_in=found_in)
    if gram is None:
        return
    # G = sum_b D_b^T D_b: symmetric with a non-negative diagonal (sums of squares).
    scale = float(np.abs(gram).max(initial=0.0))
    if (np.diag(gram) < 0).any() or not np.allclose(gram, gram.T, rtol=0,
                                                     atol=_ROUNDING * scale):
        raise damaged("the array 'statistics_gram' is not a Gram matrix (it must be "
                      "symmetric with a non-negative diagonal)", found_in)


def check_fitted_estimator(estimator, where: str | None = None) -> None:
    """Raise ModelFormatError unless the loaded ``estimator`` is one a fit could have made.

    ``where`` names the model in the error (a file, or "model 2" of a merge);
    without it, the caller's :func:`~kpca_dask.errors.about` does.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> estimator = KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(
    ...     np.random.default_rng(0).normal(size=(100, 3)))
    >>> check_fitted_estimator(estimator)
    >>> estimator.eigenvalues_[:] = -estimator.eigenvalues_
    >>> check_fitted_estimator(estimator, "model.zarr")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: model.zarr: the model is damaged: the array \
'eigenvalues' holds negative values ...
    """
    if where is not None:
        with about(where):
            check_fitted_estimator(estimator)
        return
    # The constructor's parameters are not checked against the fitted values: they may
    # have been set since the fit, and take effect only at the next one (a file's are
    # checked by the loader through the parameter table).
    _check_fitted_numbers(estimator)
    _check_kernel(estimator)
    _check_declared_arrays(estimator.model_)
    _check_arrays(estimator)
    _check_layout(estimator.model_.layout, estimator.model_.n_features)


def _check_layout(layout, n_features: int) -> None:
    """A field's kept positions and weights: one per feature, weights finite and >= 0."""
    if layout is None:
        return
    if layout.n_features != n_features:
        raise damaged(f"feature_layout_ keeps {layout.n_features} positions, but the "
                      f"model has {n_features} features")
    if layout.weights is not None and (layout.weights < 0).any():
        raise damaged("the array 'feature_weights' holds negative values")


def _check_fitted_numbers(estimator) -> None:
    """Each number declared a count, or a finite number (with its least value)."""
    for each in declared(type(estimator.model_)):
        rule, name = each.declaration.check, each.declaration.attribute
        if not rule:
            continue
        value = each.read(estimator.model_)
        if rule == "count":
            if not is_count(value):
                raise damaged(f"the attribute {name} is {value!r}, not an integer >= 1")
            continue
        least = _LEAST[rule]
        if value is None:  # the novelty terms of a file of format version 1
            continue
        if not is_finite_real(value) or (least is not None and value < least):
            bound = "" if least is None else f" >= {least}"
            raise damaged(f"the attribute {name} is {value!r}, not a finite number{bound}")
    check_landmark_path(estimator.landmark_path_)
    check_row_provenance(estimator.row_provenance_, estimator.n_samples_fit_)


def check_row_provenance(provenance, n_samples) -> None:
    """Refuse a record of counted rows that is malformed or does not add up to ``n_samples``.

    Examples
    --------
    >>> record = {"sources": [{"fingerprint": "ab", "description": "x.zarr",
    ...                        "rows": [[0, 60]]}], "unrecorded_rows": 40}
    >>> check_row_provenance(record, 100)
    >>> check_row_provenance(record, 90)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: ... the record of counted rows holds 100 rows, ...
    """
    if provenance is None:  # files written before rows were recorded
        return
    ranges_ok = lambda rows: isinstance(rows, list) and all(  # noqa: E731
        isinstance(r, list) and len(r) == 2 and is_count(r[0], 0) and is_count(r[1], 0)
        and r[0] < r[1] for r in rows)
    if not (isinstance(provenance, dict)
            and {"sources", "unrecorded_rows"} <= set(provenance)
            <= {"sources", "unrecorded_rows", "repeated_rows"}
            and is_count(provenance["unrecorded_rows"], 0)
            and is_count(provenance.get("repeated_rows", 0), 0)
            and isinstance(provenance["sources"], list)
            and all(isinstance(source, dict)
                    and isinstance(source.get("fingerprint"), str)
                    and isinstance(source.get("description"), str)
                    and ranges_ok(source.get("rows"))
                    for source in provenance["sources"])):
        raise damaged("row_provenance_ must be {'sources': [{'fingerprint', "
                      "'description', 'rows': [[start, stop], ...]}], "
                      f"'unrecorded_rows': int, optionally 'repeated_rows': int}}; "
                      f"got {provenance!r}")
    counted = provenance["unrecorded_rows"] + provenance.get("repeated_rows", 0) + sum(
        stop - start for source in provenance["sources"] for start, stop in source["rows"])
    if n_samples is not None and counted != n_samples:
        raise damaged(f"the record of counted rows holds {counted} rows, but the model "
                      f"counted n_samples_fit_ = {n_samples}")


def check_landmark_path(path, found_in: str = "model") -> None:
    """Refuse a growth path of ``n_landmarks="auto"`` that is not a list of [m, error] pairs.

    Examples
    --------
    >>> check_landmark_path([[128, 0.02], [256, 0.008]])
    """
    if path is not None and not (isinstance(path, list) and all(
            isinstance(step, (list, tuple)) and len(step) == 2 and is_count(step[0])
            and is_real(step[1])
            for step in path)):
        raise damaged("the landmark path must be a list of [m, trace error] pairs; "
                      f"got {path!r}", found_in)


def _check_kernel(estimator) -> None:
    """``kernel_`` is a known kernel, and ``kernel_params_`` exactly the parameters it takes."""
    kernel, params = estimator.kernel_, estimator.kernel_params_
    if callable(kernel):  # in memory only: a model file never holds code
        if not isinstance(params, dict):
            raise damaged(f"kernel_params_ is {params!r}, not a mapping")
        return
    try:
        if not isinstance(kernel, str) or canonical_kernel_name(kernel) != kernel:
            raise ModelFormatError(f"kernel_ is {kernel!r}, not the name of a kernel")
        if not isinstance(params, dict):
            raise ModelFormatError(f"kernel_params_ is {params!r}, not a mapping")
        resolved = resolve_kernel_params(kernel, estimator.n_features_in_, kernel_params=params)
        if set(resolved) != set(params):
            raise ModelFormatError(f"kernel_params_ has {sorted(params)}; the {kernel!r} kernel "
                                   f"takes {sorted(resolved)}")
    except KPCAError as exc:
        raise damaged(f"the fitted kernel is invalid: {exc}") from None


def _rotated_modes(rotation, q: int) -> int:
    """The r modes a rotation keeps: from 2 to q, by a known method and power."""
    r = int(np.shape(rotation.explained_variance)[0]) if isinstance(
        rotation.explained_variance, np.ndarray) else -1
    if not 2 <= r <= q or rotation.method not in ("varimax", "promax") or not (
            is_count(rotation.power) and (rotation.method == "promax" or rotation.power == 1)):
        raise damaged(f"the rotation ({rotation.method!r}, power {rotation.power!r}) of "
                      f"{r} modes is not one rotate makes of {q} components")
    return r


def _check_declared_arrays(fitted) -> None:
    """Each array the model holds has its declared dtype and shape, and is finite."""
    p, q, m = fitted.n_features, fitted.n_components, fitted.n_landmarks
    # A precomputed kernel's landmarks are rows [K[J, J], diag K[J, J]] (model.precomputed).
    sizes = {"m": m, "p": p, "q": q, "w": m + 1 if fitted.kernel == "precomputed" else p,
             "r": 0 if fitted.rotation is None else _rotated_modes(fitted.rotation, q)}
    for each in declared(type(fitted)):
        declaration = each.declaration
        if declaration.place != "array":
            continue
        value = each.read(fitted)
        if value is not None or not declaration.absent:
            check_array(value, declaration.file_name,
                        tuple(sizes[size] for size in declaration.shape), kind=declaration.kind)


def _check_arrays(estimator) -> None:
    """What the arrays hold: ordered eigenvalues, their shares, rows of the data, ..."""
    q, m = estimator.n_components_, estimator.n_landmarks_
    eigenvalues, ratio = estimator.eigenvalues_, estimator.explained_variance_ratio_
    if (eigenvalues < 0).any():
        raise damaged("the array 'eigenvalues' holds negative values (a fit keeps "
                      "only non-negative ones)")
    if (np.diff(eigenvalues) > 0).any():
        raise damaged("the array 'eigenvalues' is not in descending order")
    # ratio_j = eigenvalue_j / total, one total for all j, and at most 1 in all.
    total = eigenvalues[0] / ratio[0] if q and ratio[0] > 0 else None
    if ((ratio < 0).any() or ratio.sum() > 1 + _ROUNDING
            or (total is not None and not np.allclose(ratio * total, eigenvalues,
                                                      rtol=_ROUNDING, atol=0))):
        raise damaged("the array 'explained_variance_ratio' is not the eigenvalues' "
                      "share of one total variance")
    residuals = estimator.model_.solution.residuals
    if residuals is not None and (residuals < 0).any():
        raise damaged("the array 'eigenvalue_residuals' holds negative norms")
    if estimator.landmark_indices_ is not None:
        indices = estimator.landmark_indices_
        if (indices < 0).any() or (indices >= estimator.n_samples_fit_).any():
            raise damaged("the array 'landmark_indices' holds rows outside the "
                          f"{estimator.n_samples_fit_} training rows")
    if not 1 <= estimator.landmark_rank_ <= m:
        raise damaged(f"landmark_rank_ is {estimator.landmark_rank_}, but there are {m} "
                      "landmarks")
    stats = estimator.model_.statistics
    if stats is not None:
        check_statistics(stats, m)
        if stats.n_samples != estimator.n_samples_fit_ or stats.n_nonfinite:
            raise damaged(f"statistics.n_samples is {stats.n_samples} but "
                          f"n_samples_fit_ is {estimator.n_samples_fit_}"
                           if stats.n_nonfinite == 0 else
                          "statistics.n_nonfinite is not 0 (a fit refuses non-finite rows)")


def damaged(what: str, found_in: str = "model") -> ModelFormatError:
    """The error for a damaged model or checkpoint (``found_in``): what is wrong, what to do.

    It names no file: raised inside :func:`~kpca_dask.errors.about`, it begins with
    the one that boundary names.

    Examples
    --------
    >>> from kpca_dask.errors import about
    >>> try:
    ...     with about("'fit.ckpt'"):
    ...         raise damaged("n_segments is 0", "checkpoint")
    ... except ModelFormatError as exc:
    ...     print(exc)  # doctest: +ELLIPSIS
    'fit.ckpt': the checkpoint is damaged: n_segments is 0. Delete it and fit again...
    """
    fix = ("Fit and save it again." if found_in == "model" else
           "Delete it and fit again: a fit with a new checkpoint path starts afresh.")
    return ModelFormatError(f"the {found_in} is damaged: {what.rstrip('.')}. {fix}")

