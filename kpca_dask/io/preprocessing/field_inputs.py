"""Fields and weights on rows already opened: weighting, stacking and unstacking.

A DataArray of any dimensions is a field (:mod:`kpca_dask.io.preprocessing.fields`): at fit
its layout is recorded (sample dimension, feature dimensions and coordinates,
the fixed mask, the weights), and every later input is held to it. Plain
arrays may carry weights too (a 1-D array of one weight per feature).
:mod:`kpca_dask.model.inputs` opens every input and calls these on dask rows.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from ...errors import InvalidInputError
from .field_rows import layout_rows
from .field_sets import is_fields
from .fields import FeatureLayout, positions_of

__all__ = ["layout_differences", "weighted_rows", "stacked_rows", "unweighted",
           "stacked_positions", "with_sample_dim"]


def with_sample_dim(X, layout: FeatureLayout | None) -> tuple[object, bool]:
    """``X`` with the model's sample dimension added if a field came without it (one time
    step: ``sst.isel(time=0)``), and whether it was added; anything else unchanged.

    A DataArray (or each field of several) whose dimensions are exactly the
    model's feature dimensions is one sample: eofs' ``projectField`` of a map.

    Examples
    --------
    >>> import xarray as xr
    >>> layout = FeatureLayout("time", ("x",), (2,))
    >>> X, added = with_sample_dim(xr.DataArray([1.0, 2.0], dims="x"), layout)
    >>> X.dims, added
    (('time', 'x'), True)
    """
    if layout is None or layout.sample_dim is None or not layout.dims:
        return X, False
    parts = layout.parts or (layout,)
    if hasattr(X, "data_vars"):  # a Dataset: its fields by name
        fields = [X.get(part.name) for part in parts]
    else:
        fields = list(X) if is_fields(X) else [X]
    if len(fields) != len(parts) or not all(
            hasattr(field, "dims") and layout.sample_dim not in field.dims
            and sorted(map(str, field.dims)) == sorted(part.dims)
            for field, part in zip(fields, parts)):
        return X, False
    if isinstance(X, (list, tuple)):
        return [field.expand_dims(layout.sample_dim) for field in X], True
    return X.expand_dims(layout.sample_dim), True


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


def stacked_rows(rows: da.Array, layout: FeatureLayout, weighted: bool = True) -> da.Array:
    """Rows of a field's stacked positions, masked, checked and weighted like a DataArray's,
    chunk by chunk of positions as they come
    (:func:`~kpca_dask.io.preprocessing.field_rows.layout_rows`).

    Examples
    --------
    >>> layout = FeatureLayout("t", ("x",), (3,), kept=np.array([0, 2]))
    >>> stacked_rows(da.from_array(np.array([[1.0, np.nan, 3.0]])), layout).compute().tolist()
    [[1.0, 3.0]]
    """
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
    fields = [[(part.name, part.dims, part.shape) for part in layout.parts]
              for layout in (first, other)]
    if fields[0] != fields[1]:
        found.append(f"the fields differ: {fields[0] or 'one field'} in one model, "
                     f"{fields[1] or 'one field'} in the other")
    elif (first.dims, first.shape) != (other.dims, other.shape):
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
