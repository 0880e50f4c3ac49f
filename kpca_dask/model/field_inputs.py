"""Fields and weights on the way in: what the estimators fit and transform, as rows.

A DataArray of any dimensions is a field (:mod:`kpca_dask.io.fields`): at fit
its layout is recorded (sample dimension, feature dimensions and coordinates,
the fixed mask, the weights), and every later input is held to it. Plain
arrays may carry weights too (a 1-D array of one weight per feature). The
estimators call :func:`fit_rows` in ``fit`` and :func:`model_rows` in every
method that reads data; both return lazy rows of features, masked, checked
and weighted.
"""

from __future__ import annotations

from typing import Any

import dask.array as da
import numpy as np

from ..errors import InvalidInputError, InvalidParameterError
from ..io.field_rows import CANDIDATE_ROWS, candidate_mask, field_rows, layout_rows, with_mask
from ..io.fields import (
    FeatureLayout,
    check_same_field,
    check_weights,
    layout_of,
    positions_of,
    stacked,
)
from ..validation import DEFAULT_BLOCK_ROWS
from .inputs import as_rows, computed, is_xarray, open_input

__all__ = ["fit_rows", "layout_differences", "model_rows", "weights_allowed", "weighted_rows",
           "unweighted", "stacked_positions"]


def weights_allowed(value) -> bool:
    """Whether ``value`` may be the ``weights`` parameter (checked against X at fit).

    Examples
    --------
    >>> weights_allowed(None), weights_allowed(np.ones(3)), weights_allowed("cos")
    (True, True, False)
    """
    if value is None or is_xarray(value):
        return True
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        if not isinstance(value, (list, tuple)):
            return False
        try:  # a list, as a model file's parameters hold an array
            value = np.asarray(value)
        except (TypeError, ValueError):
            return False
    return len(value.shape) == 1 and np.dtype(value.dtype).kind in "biuf"


def fit_rows(X: Any, sample_dim: str | None, weights: Any, *, precomputed: bool = False
             ) -> tuple[Any, FeatureLayout | None]:
    """The data of a fit and their layout (None for unweighted arrays, which stay as given).

    A field's mask is taken from its first rows (read once, before the pass)
    and verified by every block the fit reads.

    Examples
    --------
    >>> import xarray as xr
    >>> X = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("time", "x"))
    >>> rows, layout = fit_rows(X, None, None)
    >>> rows.shape, layout.sample_dim
    ((3, 2), 'time')
    """
    if precomputed:
        if weights is not None:
            raise InvalidParameterError(
                'weights multiply features, which kernel="precomputed" does not have; weight '
                "the data before computing the kernel matrix instead.")
        return X, None  # a kernel matrix keeps its stored column chunks
    X = open_input(X, sample_dim=sample_dim)
    if is_xarray(X):
        layout = layout_of(X, sample_dim, weights)
        X = X.transpose(layout.sample_dim, *layout.dims)
        candidates = computed(candidate_mask(stacked(X)[:CANDIDATE_ROWS]))
        first_label = f"{layout.sample_dim}={X[layout.sample_dim].values[0]}" if (
            layout.sample_dim in X.coords) else None
        layout = with_mask(layout, np.flatnonzero(candidates).astype(np.int64), first_label)
        return field_rows(X, layout, fitting=True), layout
    if sample_dim is not None:
        raise InvalidParameterError(
            f"sample_dim={sample_dim!r} names a dimension of labelled input, but X is "
            f"{type(X).__name__}, which has none; pass an xarray DataArray or leave "
            "sample_dim=None.")
    if weights is None:
        return X, None
    return _array_weighted(X, weights)


def _array_weighted(X, weights):
    if is_xarray(weights):
        raise InvalidParameterError(
            "weights is a DataArray but X is not labelled: pass X as a DataArray whose "
            "feature dimensions the weights are over, or weights as a 1-D array of one "
            "weight per feature.")
    flat = np.asarray(weights, dtype=np.float64)
    rows, _ = as_rows(X, None)
    if flat.shape != (rows.shape[1],):
        raise InvalidParameterError(
            f"weights has shape {flat.shape}, but X has {rows.shape[1]} features: give one "
            "weight per feature, shape (n_features,).")
    check_weights(flat)
    layout = FeatureLayout(None, (), (rows.shape[1],), weights=flat)
    return weighted_rows(rows, layout), layout


def weighted_rows(rows: da.Array, layout: FeatureLayout | None) -> da.Array:
    """Rows of features multiplied by the layout's weights (unchanged without weights).

    Examples
    --------
    >>> layout = FeatureLayout(None, (), (2,), weights=np.array([2.0, 0.5]))
    >>> weighted_rows(da.ones((1, 2)), layout).compute().tolist()
    [[2.0, 0.5]]
    """
    if layout is None or layout.weights is None:
        return rows
    dtype = np.float32 if rows.dtype == np.float32 else np.float64
    return rows * layout.weights.astype(dtype)


def model_rows(layout: FeatureLayout | None, X: Any, *, weighted: bool = True,
               whole_rows: bool = False, frame: Any = None) -> tuple[Any, Any]:
    """``X`` as rows of the model's features, and the DataArray the outputs are labelled like.

    For a field model, a DataArray must have the fit's feature dimensions (in
    the same order) and coordinates; a plain array is taken as the stacked
    field (every position, C order). ``weighted=False`` gives the features as
    they are (the input :meth:`patterns` compares scores with).

    Examples
    --------
    >>> rows, like = model_rows(None, np.ones((2, 3)))
    >>> rows.shape, like is None
    ((2, 3), True)
    """
    sample_dim = None if layout is None else layout.sample_dim
    X = open_input(X, whole_rows, sample_dim=sample_dim)
    if layout is None or layout.weights is None and not layout.dims:
        if is_xarray(X):
            return X.data, X
        return X, None
    if not layout.dims:  # weights of an array fit
        like = X if is_xarray(X) else None
        rows, _ = as_rows(X.data if like is not None else X, frame)
        if rows.shape[1] != layout.n_features:
            raise InvalidInputError(
                f"X has {rows.shape[1]} features, but the model was fitted on "
                f"{layout.n_features}.")
        return (weighted_rows(rows, layout) if weighted else rows), like
    if is_xarray(X):
        X = check_same_field(X, layout)
        return field_rows(X, layout, weighted=weighted), X
    rows = _positions(X, frame)
    if rows.shape[1] != layout.n_positions:
        raise InvalidInputError(
            f"X has {rows.shape[1]} columns, but the model was fitted on a field of "
            f"{layout.n_positions} positions ({' x '.join(map(str, layout.shape))} over "
            f"{layout.dims}): pass the field as a DataArray, or its stacked positions.")
    return _stacked_rows(rows, layout, weighted), None


def _positions(X, frame) -> da.Array:
    """An array of a field's stacked positions, NaN on its mask allowed (checked block by
    block as it is read, by :func:`_stacked_rows`)."""
    if not isinstance(X, da.Array) and isinstance(X, np.ndarray) and X.ndim == 2 and (
            X.dtype.kind in "biuf"):
        return da.from_array(X, chunks=(min(DEFAULT_BLOCK_ROWS, max(len(X), 1)), -1))
    return as_rows(X, frame)[0]


def _stacked_rows(rows: da.Array, layout: FeatureLayout, weighted: bool) -> da.Array:
    """Rows of a field's stacked positions, masked, checked and weighted like a DataArray's,
    chunk by chunk of positions as they come (:func:`~kpca_dask.io.field_rows.layout_rows`)."""
    from dataclasses import replace

    if any(np.isnan(c) for c in rows.chunks[0]):
        raise InvalidInputError(
            "X has row blocks of unknown length; a model fitted on a field needs them to "
            "name the samples of its checks: call X.compute_chunk_sizes() first.")
    labels = da.arange(rows.shape[0], chunks=rows.chunks[0])[:, None]
    return layout_rows(rows, labels, replace(layout, sample_dim="row"), weighted=weighted)


def unweighted(X_hat: da.Array, layout: FeatureLayout | None) -> da.Array:
    """Rows of weighted features divided by their weights, NaN where a weight is 0.

    Examples
    --------
    >>> layout = FeatureLayout(None, (), (2,), weights=np.array([2.0, 0.0]))
    >>> unweighted(da.ones((1, 2)), layout).compute().tolist()
    [[0.5, nan]]
    """
    if layout is None or layout.weights is None:
        return X_hat
    with np.errstate(divide="ignore"):
        inverse = np.where(layout.weights > 0, 1.0 / layout.weights, np.nan)
    return X_hat * inverse.astype(X_hat.dtype)


def stacked_positions(X_hat: da.Array, layout: FeatureLayout) -> da.Array:
    """Rows of kept features as rows of every position of the field, NaN on the mask.

    Examples
    --------
    >>> layout = FeatureLayout("t", ("x",), (3,), kept=np.array([0, 2]))
    >>> stacked_positions(da.ones((1, 2)), layout).compute().tolist()
    [[1.0, nan, 1.0]]
    """
    return positions_of(X_hat, layout)


def layout_differences(first: FeatureLayout | None, other: FeatureLayout | None) -> list[str]:
    """What differs between the feature layouts of two models, one phrase per difference.

    Examples
    --------
    >>> a = FeatureLayout("time", ("x",), (3,))
    >>> layout_differences(a, FeatureLayout("time", ("x",), (3,), weights=np.ones(3)))
    ['one model weights its features and the other does not']
    """
    if first is None and other is None:
        return []
    if first is None or other is None:
        return ["one model was fitted on a field or with weights, the other not"]
    found = []
    if (first.dims, first.shape) != (other.dims, other.shape):
        found.append(f"the fields differ: {first.dims} of {first.shape} in one model, "
                     f"{other.dims} of {other.shape} in the other")
    elif any(not np.array_equal(first.coords.get(d), other.coords.get(d)) for d in first.dims):
        found.append("the fields' coordinates differ")
    for name, what in (("kept", "masks"), ("weights", "weights")):
        mine, theirs = getattr(first, name), getattr(other, name)
        if (mine is None) != (theirs is None):
            found.append(f"one model {'masks' if name == 'kept' else 'weights'} its features "
                         "and the other does not")
        elif mine is not None and not np.array_equal(mine, theirs):
            found.append(f"the {what} differ")
    return found
