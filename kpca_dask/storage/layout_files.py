"""A field's layout in a model file: JSON for its dimensions and coordinates.

The kept positions and the weights are arrays of the model file
(``feature_kept``, ``feature_weights``); the rest of a
:class:`~kpca_dask.io.fields.FeatureLayout` is the JSON attribute
``feature_layout_``. Coordinates keep their dtype: numbers as JSON numbers
(floats round-trip exactly), dates and strings as text with the dtype beside.
"""

from __future__ import annotations

import numpy as np

from ..io.fields import FeatureLayout

__all__ = ["layout_attribute", "layout_from_attribute"]


def layout_attribute(layout: FeatureLayout) -> dict:
    """The JSON attribute of ``layout`` (without its kept positions and weights).

    Examples
    --------
    >>> layout = FeatureLayout("time", ("lat",), (2,), {"lat": np.array([-5.0, 5.0])})
    >>> layout_attribute(layout)["coords"]
    {'lat': {'dtype': 'float64', 'values': [-5.0, 5.0]}}
    """
    return {
        "sample_dim": layout.sample_dim,
        "dims": list(layout.dims),
        "shape": [int(size) for size in layout.shape],
        "coords": {dim: _coordinate(values) for dim, values in layout.coords.items()},
        "weight_dims": list(layout.weight_dims),
    }


def _coordinate(values: np.ndarray) -> dict:
    values = np.asarray(values)
    if values.dtype.kind in "biuf":
        return {"dtype": str(values.dtype), "values": values.tolist()}
    if values.dtype.kind in "MmU":
        return {"dtype": str(values.dtype), "values": values.astype(str).tolist()}
    return {"dtype": "str", "values": [str(value) for value in values]}


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
        values = np.asarray(coordinate["values"], dtype=coordinate["dtype"])
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
    return FeatureLayout(sample_dim, dims, shape, coords, kept=kept, weights=weights,
                         weight_dims=tuple(stored.get("weight_dims", ())))
