"""Several fields as one: their layouts joined along one feature axis, and outputs split back.

A combined EOF of several fields (sea-surface temperature and sea-level
pressure, or one variable on two grids; eofs' ``MultivariateEof``) fits the
features of every field side by side: each field keeps its own feature
dimensions, mask and weights (a :class:`~kpca_dask.io.preprocessing.fields.FeatureLayout`),
and its positions follow those of the field before it along one feature axis
(docs/design.md §15). :func:`combined_layout` makes the layout of the whole,
whose kept positions and weights are those of the fields one after the other;
:func:`as_fields` puts values over the features back on each field and gives
them as the fields came: a list of DataArrays or a Dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import xarray as xr

from ...errors import InvalidInputError
from .fields import FeatureLayout, as_field

__all__ = ["CONTAINERS", "combined_layout", "feature_slices", "as_fields", "field_names"]

#: How several fields may come, and go back.
CONTAINERS = ("list", "dataset")
#: The name of the one feature axis the fields are joined along.
JOINED_DIM = "position"


def combined_layout(parts: Sequence[FeatureLayout], container: str) -> FeatureLayout:
    """The layout of ``parts`` joined along one feature axis, in order.

    Its positions are those of each part one after the other; its kept
    positions and weights are the parts' (every position, and weight 1, for a
    part without a mask or weights, when another part has them).

    Examples
    --------
    >>> a = FeatureLayout("time", ("lat",), (3,), kept=np.array([0, 2]), name="sst")
    >>> b = FeatureLayout("time", ("x",), (2,), weights=np.array([0.5, 2.0]), name="slp")
    >>> joined = combined_layout([a, b], "list")
    >>> joined.kept.tolist(), joined.weights.tolist(), joined.describe(4)
    ([0, 2, 3, 4], [1.0, 1.0, 0.5, 2.0], "field 'slp', x index 1")
    """
    if container not in CONTAINERS:
        raise ValueError(f"container must be one of {CONTAINERS}; got {container!r}")
    parts = tuple(parts)
    offsets = np.cumsum([0] + [part.n_positions for part in parts])
    kept = weights = None
    if any(part.kept is not None for part in parts):
        kept = np.concatenate([
            offset + (np.arange(part.n_positions) if part.kept is None else part.kept)
            for part, offset in zip(parts, offsets)]).astype(np.int64)
    if any(part.weights is not None for part in parts):
        weights = np.concatenate([
            np.ones(part.n_features) if part.weights is None else part.weights
            for part in parts]).astype(np.float64)
    return FeatureLayout(parts[0].sample_dim, (JOINED_DIM,), (int(offsets[-1]),), {},
                         kept=kept, weights=weights, parts=parts, container=container,
                         sample_dim_from=parts[0].sample_dim_from)


def field_names(layout: FeatureLayout) -> list[str]:
    """The name each part of a joined ``layout`` goes back under.

    Examples
    --------
    >>> parts = [FeatureLayout("t", ("x",), (1,), name="sst"), FeatureLayout("t", ("y",), (1,))]
    >>> field_names(combined_layout(parts, "list"))
    ['sst', 'field1']
    """
    return [part.name if part.name is not None else f"field{i}"
            for i, part in enumerate(layout.parts)]


def feature_slices(layout: FeatureLayout) -> list[slice]:
    """The features of each part of a joined ``layout``: a slice of its feature axis.

    Examples
    --------
    >>> parts = [FeatureLayout("t", ("x",), (3,), kept=np.array([1])),
    ...          FeatureLayout("t", ("y",), (2,))]
    >>> feature_slices(combined_layout(parts, "list"))
    [slice(0, 1, None), slice(1, 3, None)]
    """
    edges = np.cumsum([0] + [part.n_features for part in layout.parts]).tolist()
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def as_fields(values, layout: FeatureLayout, leading: Mapping[str, np.ndarray | None], *,
              attrs: Mapping | None = None, keep: tuple[str, ...] = ()):
    """Values over the joined features (..., n_features) back on each field, as they came.

    A list of DataArrays (``container="list"``) or a Dataset of one variable
    per field (``"dataset"``), each over its own feature dimensions with NaN on
    its mask (:func:`~kpca_dask.io.preprocessing.fields.as_field`); lazy for dask ``values``.
    Each DataArray is named after its field, with the attributes ``keep`` of
    its input (``units``, ``long_name``) that still hold.

    Examples
    --------
    >>> parts = [FeatureLayout("t", ("x",), (2,), name="a"),
    ...          FeatureLayout("t", ("y",), (1,), name="b")]
    >>> out = as_fields(np.array([[1.0, 2.0, 3.0]]), combined_layout(parts, "dataset"),
    ...                 {"mode": None})
    >>> list(out.data_vars), out["b"].values.tolist()
    (['a', 'b'], [[3.0]])
    """
    names = field_names(layout)
    maps = [as_field(values[..., where], part, leading, name=part_name, attrs=attrs,
                     keep=keep)
            for part, where, part_name in zip(layout.parts, feature_slices(layout), names)]
    if layout.container == "dataset":
        try:
            return xr.Dataset(dict(zip(names, maps)), attrs=dict(attrs or {}))
        except ValueError as exc:  # fields on one dimension name with other coordinates
            raise InvalidInputError(
                f"The fields {names} cannot be one Dataset ({exc}); fit them as a list of "
                "DataArrays instead.") from None
    return maps
