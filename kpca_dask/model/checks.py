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

The checks of single arrays, pass statistics and the landmark path, and the
error they raise, are those a checkpoint is held to as well
(:mod:`kpca_dask.checkpoints.file_checks`). The types, shapes and dtypes come
from the model's own declarations (:data:`kpca_dask.model.fitted.DECLARED`). Every failure is a
:class:`~kpca_dask.errors.ModelFormatError` that names the array or
attribute and what is wrong; the caller that knows the file names it
(:func:`kpca_dask.errors.about`).
"""

from __future__ import annotations

import numpy as np

from ..blocks.kernels import canonical_kernel_name
from ..checkpoints.file_checks import (
    ROUNDING,
    check_array,
    check_landmark_path,
    check_statistics,
    damaged,
)
from ..engine.kernel_params import resolve_kernel_params
from ..errors import KPCAError, ModelFormatError, about
from ..validation import is_count, is_finite_real
from .fitted import declared

__all__ = ["check_fitted_estimator", "check_row_provenance"]

#: The least value of a fitted number, by its declared rule.
_LEAST = {"real": None, "nonnegative": 0.0}


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
    if ((ratio < 0).any() or ratio.sum() > 1 + ROUNDING
            or (total is not None and not np.allclose(ratio * total, eigenvalues,
                                                      rtol=ROUNDING, atol=0))):
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
