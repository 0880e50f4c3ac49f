"""A field's layout in a model file: JSON for its dimensions and coordinates.

The kept positions and the weights are arrays of the model file
(``feature_kept``, ``feature_weights``); the rest of a
:class:`~kpca_dask.io.preprocessing.fields.FeatureLayout` is the JSON attribute
``feature_layout_``. Coordinates keep their dtype: numbers as JSON numbers
(floats round-trip exactly), dates and strings as text with the dtype beside.
Several fields fitted together (:mod:`kpca_dask.io.preprocessing.multiple_fields`) add
``fields``, each field's own attribute with its name and whether it is
weighted, and ``container``; their kept positions and weights are cut from the
joined arrays.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import xarray as xr

from .._json import jsonable
from ..io.preprocessing.fields import FeatureLayout
from ..io.preprocessing.multiple_fields import CONTAINERS, combined_layout

__all__ = ["layout_attribute", "layout_from_attribute", "coordinate_attribute",
           "coordinate_values", "labels_attribute", "labelled"]


def layout_attribute(layout: FeatureLayout) -> dict:
    """The JSON attribute of ``layout`` (without its kept positions and weights).

    Examples
    --------
    >>> layout = FeatureLayout("time", ("lat",), (2,), {"lat": np.array([-5.0, 5.0])})
    >>> layout_attribute(layout)["coords"]
    {'lat': {'dtype': 'float64', 'values': [-5.0, 5.0]}}
    """
    stored = {
        "sample_dim": layout.sample_dim,
        "dims": list(layout.dims),
        "shape": [int(size) for size in layout.shape],
        "coords": {dim: coordinate_attribute(values) for dim, values in layout.coords.items()},
        "weight_dims": list(layout.weight_dims),
    }
    # What outputs are named and described by, and how the sample dimension was chosen.
    for key in ("variable", "sample_dim_from"):
        if getattr(layout, key):
            stored[key] = getattr(layout, key)
    if layout.attrs:
        stored["attrs"] = dict(layout.attrs)
    if layout.parts:
        stored["container"] = layout.container
        stored["fields"] = [{**layout_attribute(part), "name": part.name,
                             "weighted": part.weights is not None} for part in layout.parts]
    return stored


def coordinate_attribute(values: np.ndarray) -> dict:
    """A coordinate's values as JSON: its dtype and values (times and text as text)."""
    values = np.asarray(values)
    if values.dtype.kind in "biuf":
        return {"dtype": str(values.dtype), "values": values.tolist()}
    if values.dtype.kind in "MmU":
        return {"dtype": str(values.dtype), "values": values.astype(str).tolist()}
    return {"dtype": "str", "values": [str(value) for value in values]}


def coordinate_values(stored: dict) -> np.ndarray:
    """The values :func:`coordinate_attribute` wrote, in their dtype."""
    return np.asarray(stored["values"], dtype=stored["dtype"])


def labels_attribute(values) -> dict | None:
    """The labels of a DataArray kept in a model file beside its values (its dims, the index
    coordinates of those dims, its name and attributes); None for an array.

    Examples
    --------
    >>> import xarray as xr
    >>> maps = xr.DataArray(np.ones((1, 2)), dims=("mode", "x"), coords={"x": [0.5, 1.5]})
    >>> labelled(np.zeros((1, 2)), labels_attribute(maps))["x"].values.tolist()
    [0.5, 1.5]
    """
    if not isinstance(values, xr.DataArray):
        return None
    return {"dims": list(values.dims), "name": values.name,
            "coords": {dim: coordinate_attribute(values[dim].values)
                       for dim in values.dims if dim in values.coords},
            "attrs": jsonable(dict(values.attrs))}


def labelled(values: np.ndarray, stored: dict | None):
    """``values`` with the labels :func:`labels_attribute` kept (as they are for None)."""
    if stored is None:
        return values
    dims = tuple(stored["dims"])
    coords = {dim: coordinate_values(value) for dim, value in stored["coords"].items()}
    return xr.DataArray(values, dims=dims, coords=coords, name=stored["name"],
                        attrs=dict(stored["attrs"]))


def layout_from_attribute(stored: dict, kept, weights) -> FeatureLayout:
    """The layout a model file holds; raises ValueError, KeyError or TypeError if malformed.

    Examples
    --------
    >>> layout = FeatureLayout("time", ("lat",), (2,), {"lat": np.array([-5.0, 5.0])})
    >>> layout_from_attribute(layout_attribute(layout), None, None).coords["lat"].tolist()
    [-5.0, 5.0]
    """
    dims = tuple(stored["dims"])
    shape = tuple(stored["shape"])
    if not all(isinstance(d, str) for d in dims) or len(shape) != max(len(dims), 1) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in shape):
        raise ValueError(f"dims {list(dims)} and shape {list(shape)} do not match")
    coords = {}
    for dim, coordinate in stored["coords"].items():
        values = coordinate_values(coordinate)
        if dim not in dims or values.shape != (shape[dims.index(dim)],):
            raise ValueError(f"the coordinate {dim!r} does not match the dims and shape")
        coords[dim] = values
    sample_dim = stored["sample_dim"]
    if not (sample_dim is None or isinstance(sample_dim, str)):
        raise TypeError(f"sample_dim must be a name or null, not {sample_dim!r}")
    n_positions = int(np.prod(shape))
    if kept is not None and (kept.ndim != 1 or kept.size == 0 or kept[0] < 0
                             or kept[-1] >= n_positions or np.any(np.diff(kept) <= 0)):
        raise ValueError("feature_kept must hold ascending positions of the field")
    if "fields" in stored:
        return _joined(stored, kept, weights)
    attrs = stored.get("attrs", {})
    if not (isinstance(attrs, dict) and all(isinstance(v, str) for v in attrs.values())):
        raise TypeError(f"attrs must map names to text, not {attrs!r}")
    return FeatureLayout(sample_dim, dims, shape, coords, kept=kept, weights=weights,
                         weight_dims=tuple(stored.get("weight_dims", ())),
                         variable=stored.get("variable"), attrs=attrs,
                         sample_dim_from=str(stored.get("sample_dim_from", "")))


def _joined(stored: dict, kept, weights) -> FeatureLayout:
    """The layout of several fields: each field's own, cut from the joined arrays, and
    joined again (which must give back the joined arrays the file holds)."""
    if stored.get("container") not in CONTAINERS or not stored["fields"]:
        raise ValueError(f"container must be one of {CONTAINERS}, with fields")
    parts, start, first = [], 0, 0
    positions = np.arange(int(np.prod(stored["shape"]))) if kept is None else kept
    for field in stored["fields"]:
        size = int(np.prod(field["shape"]))
        mine = positions[(positions >= start) & (positions < start + size)] - start
        part = layout_from_attribute(
            {key: value for key, value in field.items() if key not in ("name", "weighted")},
            None if mine.size == size else mine.astype(np.int64), None)
        if field["weighted"]:
            part_weights = None if weights is None else weights[first:first + part.n_features]
            if part_weights is None or part_weights.size != part.n_features:
                raise ValueError("feature_weights does not hold the weights of every field")
        else:
            part_weights = None
        parts.append(replace(part, weights=part_weights, name=str(field["name"])))
        start, first = start + size, first + part.n_features
    joined = combined_layout(parts, stored["container"])
    if joined.shape != tuple(stored["shape"]) or not all(
            (a is None and b is None) or (a is not None and b is not None
                                          and np.array_equal(a, b))
            for a, b in ((joined.kept, kept), (joined.weights, weights))):
        raise ValueError("the fields do not make the joined positions and weights stored")
    return joined
