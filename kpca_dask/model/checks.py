"""Checks of a model read from a file, before anything is computed with it (docs/design.md §10).

A model file is an input like any other: it travels between clusters, object
stores and people, and a model that is wrong in a way nobody sees returns
wrong embeddings without a word. :func:`check_model` therefore holds a loaded
model to the same rules a fit obeys:

- the parameters go through the table ``fit`` checks them with
  (:func:`~kpca_dask.model.parameters.check_params`, not a copy of it), and the
  fitted kernel parameters through the kernel's;
- every fitted number has its type and range;
- the arrays agree with each other: m landmarks of p features, an m x q
  projection, q eigenvalues, an m x m Gram matrix, the pre-image map's m x q
  centres and m x p coefficients;
- every array is float64 (the indices int64) and finite; the eigenvalues are
  non-negative and descending, the ratios their share of one total.

:func:`check_statistics` holds pass statistics (of a model, a checkpoint or
the inputs of :func:`kpca_dask.merge`) to the shapes of their landmarks.
Every failure is a :class:`~kpca_dask.errors.ModelFormatError` that names the
file, the array or attribute, and what is wrong.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from ..blocks.kernels import canonical_kernel_name
from ..blocks.statistics import PassStatistics
from ..errors import KPCAError, ModelFormatError
from ..validation import is_count, is_finite_real, is_real
from .fitted import FITTED_ATTRIBUTES
from .parameters import resolve_kernel_params

__all__ = ["check_model", "check_statistics", "check_array", "check_landmark_path", "damaged"]

#: Fitted counts: integers, at least 1.
_COUNTS = ("n_features_in_", "n_components_", "n_landmarks_", "landmark_rank_", "n_samples_fit_")
#: Fitted numbers: finite floats; the value is the least allowed (None: any).
_NUMBERS = {"trace_error_": None, "trace_error_std_": 0.0, "fit_seconds_": 0.0,
            "novelty_mean_norm2_": 0.0}
#: Relative slack for sums that were rounded when written (ratios, symmetry).
_ROUNDING = 1e-8


def check_array(value, name: str, shown: str, shape: tuple, *, kind: str = "f",
                source: str = "model") -> np.ndarray:
    """``value`` if it is a finite array of ``shape`` in float64 (``kind="f"``) or int64 ("i").

    ``kind="x"`` allows float32 as well, for points in input space: landmarks
    that are rows of float32 data keep their dtype.

    Examples
    --------
    >>> check_array(np.zeros((2, 3)), "landmarks", "model.zarr", (2, 3)).shape
    (2, 3)
    >>> check_array(np.zeros(2), "offset", "model.zarr", (3,))
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: The model at model.zarr is damaged: the array 'offset' \
has shape (2,), but the other arrays and attributes need (3,). Fit and save it again.

    ``source`` ("model" or "checkpoint") says what ``shown`` is, for the message.
    """
    expected = np.dtype(np.int64 if kind == "i" else np.float64)
    allowed = (expected, np.dtype(np.float32)) if kind == "x" else (expected,)
    if not isinstance(value, np.ndarray) or value.dtype not in allowed:
        dtype = getattr(value, "dtype", type(value).__name__)
        raise damaged(shown, f"the array {name!r} has dtype {dtype}, not {expected}", source)
    if value.shape != tuple(shape):
        raise damaged(shown, f"the array {name!r} has shape {value.shape}, but the other "
                              f"arrays and attributes need {tuple(shape)}", source)
    if kind != "i" and not np.isfinite(value).all():
        raise damaged(shown, f"the array {name!r} holds {int((~np.isfinite(value)).sum())} "
                              "NaN or infinite value(s)", source)
    return value


def check_statistics(stats: PassStatistics, m: int, shown: str, *, least_rows: int = 1,
                     source: str = "model") -> None:
    """Refuse pass statistics that do not fit ``m`` landmarks, or hold impossible values.

    ``least_rows`` is 1 for a model and 0 for a checkpoint that has counted
    nothing yet.

    Examples
    --------
    >>> stats = PassStatistics(3, np.zeros(2), np.eye(2), 6.0, 0, -1, np.ones(2))
    >>> check_statistics(stats, 2, "model.zarr")
    >>> check_statistics(stats, 3, "model.zarr")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: ... 'statistics_gram' has shape (2, 2), ...
    """
    if not is_count(stats.n_samples, least_rows):
        raise damaged(shown, f"statistics.n_samples is {stats.n_samples!r}, not an integer "
                              f">= {least_rows}", source)
    if not is_count(stats.n_nonfinite, 0) or not is_count(stats.first_nonfinite_row, -1):
        raise damaged(shown, "statistics.n_nonfinite and statistics.first_nonfinite_row must "
                              "be integers >= 0 and >= -1", source)
    if not np.isfinite(stats.diagonal_sum):  # t = sum k(x, x) may be < 0 (sigmoid kernel)
        raise damaged(shown, f"statistics.diagonal_sum is {stats.diagonal_sum!r}", source)
    if isinstance(stats.gram, da.Array):
        # Held on a cluster, or read lazily from a file whose chunks carry checksums:
        # read only when solved, so only its form is checked here.
        if stats.gram.shape != (m, m) or stats.gram.dtype != np.float64:
            raise damaged(shown, f"the array 'statistics_gram' is {stats.gram.dtype} of shape "
                                  f"{stats.gram.shape}, not float64 of shape {(m, m)}", source)
        gram = None
    else:
        gram = check_array(stats.gram, "statistics_gram", shown, (m, m), source=source)
    check_array(stats.column_sums, "statistics_column_sums", shown, (m,), source=source)
    check_array(stats.reference, "statistics_reference", shown, (m,), source=source)
    if gram is None:
        return
    # G = sum_b D_b^T D_b: symmetric with a non-negative diagonal (sums of squares).
    scale = float(np.abs(gram).max(initial=0.0))
    if (np.diag(gram) < 0).any() or not np.allclose(gram, gram.T, rtol=0,
                                                     atol=_ROUNDING * scale):
        raise damaged(shown, "the array 'statistics_gram' is not a Gram matrix (it must be "
                              "symmetric with a non-negative diagonal)", source)


def check_model(model, shown: str) -> None:
    """Raise ModelFormatError unless the loaded ``model`` is one a fit could have made.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> model = KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(
    ...     np.random.default_rng(0).normal(size=(100, 3)))
    >>> check_model(model, "model.zarr")
    >>> model.eigenvalues_[:] = -model.eigenvalues_
    >>> check_model(model, "model.zarr")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: ... the array 'eigenvalues' holds negative values ...
    """
    # The constructor's parameters are not checked against the fitted values: they may
    # have been set since the fit, and take effect only at the next one (a file's are
    # checked by the loader through the parameter table).
    _check_fitted_numbers(model, shown)
    _check_kernel(model, shown)
    _check_arrays(model, shown)
    _check_layout(model.model_.layout, model.model_.n_features, shown)


def _check_layout(layout, n_features: int, shown: str) -> None:
    """A field's kept positions and weights: one per feature, weights finite and >= 0."""
    if layout is None:
        return
    if layout.n_features != n_features:
        raise damaged(shown, f"feature_layout_ keeps {layout.n_features} positions, but the "
                             f"model has {n_features} features")
    if layout.kept is not None:
        check_array(layout.kept, "feature_kept", shown, (n_features,), kind="i")
    if layout.weights is not None:
        check_array(layout.weights, "feature_weights", shown, (n_features,))
        if (layout.weights < 0).any():
            raise damaged(shown, "the array 'feature_weights' holds negative values")


def _check_fitted_numbers(model, shown: str) -> None:
    for name in _COUNTS:
        value = getattr(model, name)
        if not is_count(value):
            raise damaged(shown, f"the attribute {name} is {value!r}, not an integer >= 1")
    for name, least in _NUMBERS.items():
        value = FITTED_ATTRIBUTES[name](model.model_)
        if value is None:  # the novelty terms of a file of format version 1
            continue
        if not is_finite_real(value) or (least is not None and value < least):
            bound = "" if least is None else f" >= {least}"
            raise damaged(shown, f"the attribute {name} is {value!r}, not a finite number{bound}")
    check_landmark_path(model.landmark_path_, shown)
    check_row_provenance(model.row_provenance_, model.n_samples_fit_, shown)


def check_row_provenance(provenance, n_samples, shown: str) -> None:
    """Refuse a record of counted rows that is malformed or does not add up to ``n_samples``.

    Examples
    --------
    >>> record = {"sources": [{"fingerprint": "ab", "description": "x.zarr",
    ...                        "rows": [[0, 60]]}], "unrecorded_rows": 40}
    >>> check_row_provenance(record, 100, "model.zarr")
    >>> check_row_provenance(record, 90, "model.zarr")  # doctest: +ELLIPSIS
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
        raise damaged(shown, "row_provenance_ must be {'sources': [{'fingerprint', "
                             "'description', 'rows': [[start, stop], ...]}], "
                             f"'unrecorded_rows': int, optionally 'repeated_rows': int}}; "
                             f"got {provenance!r}")
    counted = provenance["unrecorded_rows"] + provenance.get("repeated_rows", 0) + sum(
        stop - start for source in provenance["sources"] for start, stop in source["rows"])
    if n_samples is not None and counted != n_samples:
        raise damaged(shown, f"the record of counted rows holds {counted} rows, but the model "
                             f"counted n_samples_fit_ = {n_samples}")


def check_landmark_path(path, shown: str, source: str = "model") -> None:
    """Refuse a growth path of ``n_landmarks="auto"`` that is not a list of [m, error] pairs.

    Examples
    --------
    >>> check_landmark_path([[128, 0.02], [256, 0.008]], "model.zarr")
    """
    if path is not None and not (isinstance(path, list) and all(
            isinstance(step, (list, tuple)) and len(step) == 2 and is_count(step[0])
            and is_real(step[1])
            for step in path)):
        raise damaged(shown, "the landmark path must be a list of [m, trace error] pairs; "
                              f"got {path!r}", source)


def _check_kernel(model, shown: str) -> None:
    """``kernel_`` is a known kernel, and ``kernel_params_`` exactly the parameters it takes."""
    kernel, params = model.kernel_, model.kernel_params_
    if callable(kernel):  # in memory only: a model file never holds code
        if not isinstance(params, dict):
            raise damaged(shown, f"kernel_params_ is {params!r}, not a mapping")
        return
    try:
        if not isinstance(kernel, str) or canonical_kernel_name(kernel) != kernel:
            raise ModelFormatError(f"kernel_ is {kernel!r}, not the name of a kernel")
        if not isinstance(params, dict):
            raise ModelFormatError(f"kernel_params_ is {params!r}, not a mapping")
        resolved = resolve_kernel_params(kernel, model.n_features_in_, kernel_params=params)
        if set(resolved) != set(params):
            raise ModelFormatError(f"kernel_params_ has {sorted(params)}; the {kernel!r} kernel "
                                   f"takes {sorted(resolved)}")
    except KPCAError as exc:
        raise damaged(shown, f"the fitted kernel is invalid: {exc}") from None


def _check_arrays(model, shown: str) -> None:
    p, q = model.n_features_in_, model.n_components_
    m = model.n_landmarks_
    # A precomputed kernel's landmarks are rows [K[J, J], diag K[J, J]] (model.precomputed).
    width = m + 1 if model.kernel_ == "precomputed" else p
    check_array(model.landmarks_, "landmarks", shown, (m, width), kind="x")
    check_array(model.projection_, "projection", shown, (m, q))
    check_array(model.offset_, "offset", shown, (q,))
    eigenvalues = check_array(model.eigenvalues_, "eigenvalues", shown, (q,))
    ratio = check_array(model.explained_variance_ratio_, "explained_variance_ratio", shown, (q,))
    if (eigenvalues < 0).any():
        raise damaged(shown, "the array 'eigenvalues' holds negative values (a fit keeps "
                              "only non-negative ones)")
    if (np.diff(eigenvalues) > 0).any():
        raise damaged(shown, "the array 'eigenvalues' is not in descending order")
    # ratio_j = eigenvalue_j / total, one total for all j, and at most 1 in all.
    total = eigenvalues[0] / ratio[0] if q and ratio[0] > 0 else None
    if ((ratio < 0).any() or ratio.sum() > 1 + _ROUNDING
            or (total is not None and not np.allclose(ratio * total, eigenvalues,
                                                      rtol=_ROUNDING, atol=0))):
        raise damaged(shown, "the array 'explained_variance_ratio' is not the eigenvalues' "
                              "share of one total variance")
    residuals = model.model_.solution.residuals
    if residuals is not None and (check_array(residuals, "eigenvalue_residuals", shown,
                                              (q,)) < 0).any():
        raise damaged(shown, "the array 'eigenvalue_residuals' holds negative norms")
    if model.landmark_indices_ is not None:
        indices = check_array(model.landmark_indices_, "landmark_indices", shown, (m,), kind="i")
        if (indices < 0).any() or (indices >= model.n_samples_fit_).any():
            raise damaged(shown, "the array 'landmark_indices' holds rows outside the "
                                  f"{model.n_samples_fit_} training rows")
    if not 1 <= model.landmark_rank_ <= m:
        raise damaged(shown, f"landmark_rank_ is {model.landmark_rank_}, but there are {m} "
                              "landmarks")
    fitted = model.model_
    if fitted.novelty is not None:
        check_array(fitted.novelty.mean_weights, "novelty_weights", shown, (m,))
    if fitted.preimage is not None:
        check_array(fitted.preimage.centres, "preimage_centres", shown, (m, q))
        check_array(fitted.preimage.coefficients, "preimage_coefficients", shown, (m, p))
    stats = fitted.statistics
    if stats is not None:
        check_statistics(stats, m, shown)
        if stats.n_samples != model.n_samples_fit_ or stats.n_nonfinite:
            raise damaged(shown, f"statistics.n_samples is {stats.n_samples} but "
                                  f"n_samples_fit_ is {model.n_samples_fit_}"
                           if stats.n_nonfinite == 0 else
                           "statistics.n_nonfinite is not 0 (a fit refuses non-finite rows)")


def damaged(shown: str, what: str, source: str = "model") -> ModelFormatError:
    """The error for ``shown`` (a "model" or a "checkpoint"), saying what is wrong and what to do.

    Examples
    --------
    >>> str(damaged("'fit.ckpt'", "n_segments is 0", "checkpoint"))  # doctest: +ELLIPSIS
    "The checkpoint at 'fit.ckpt' is damaged: n_segments is 0. Delete it and fit again..."
    """
    fix = ("Fit and save it again." if source == "model" else
           "Delete it and fit again: a fit with a new checkpoint path starts afresh.")
    return ModelFormatError(f"The {source} at {shown} is damaged: {what.rstrip('.')}. {fix}")

