"""Labelled fields as rows: a DataArray of any dimensions, its mask and weights, and back.

A field such as (time, lat, lon) becomes rows of features: the sample
dimension (``sample_dim``, else the first of two dimensions or the one named
``time``: :func:`resolved_sample_dim`) indexes the rows, every other
dimension is a feature dimension,
and the feature dimensions are stacked lazily, in their order, into one
feature axis (C order). A :class:`FeatureLayout` records what a fit saw: the
dimensions, their sizes and coordinates, the positions kept (a fixed mask,
NaN at every sample such as land, is dropped) and the weights each kept
feature is multiplied by before the kernel (docs/design.md §12). Outputs over
the features (pre-images, patterns) are put back into the field with
:func:`as_field`, NaN on the mask.

The mask and the check of every block as it is read are in
:mod:`kpca_dask.io.preprocessing.field_rows`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

import dask
import dask.array as da
import numpy as np
import xarray as xr

from ...errors import InvalidInputError, InvalidParameterError
from ...validation import DEFAULT_BLOCK_ROWS
from .latitude import coslat_weights, field_coslat_weights, is_coslat

__all__ = ["FeatureLayout", "layout_of", "resolved_sample_dim", "check_weights",
           "check_same_field", "stacked", "as_field", "positions_of", "scattered",
           "scattered_chunk", "shown_value", "coslat_weights", "KEPT_ATTRS"]

#: The attributes of the input a field's outputs keep where they still hold.
KEPT_ATTRS = ("units", "long_name")


@dataclass(frozen=True, eq=False)
class FeatureLayout:
    """How the features of a fit are laid out, masked and weighted.

    Parameters
    ----------
    sample_dim : str or None
        The dimension of the samples; None for unlabelled (array) input.
    dims : tuple of str
        The feature dimensions, in the order they are stacked (C order).
    shape : tuple of int
        Their sizes; for unlabelled input, ``(n_features,)``.
    coords : dict
        The index coordinate of each feature dimension that has one.
    kept : ndarray of int64 or None
        Flat positions kept as features, ascending; None: every position.
    weights : ndarray of float64 or None
        The weight of each kept feature, applied before the kernel.
    weight_dims : tuple of str
        The dimensions the weights were given over (broadcast over the others).
    name : str or None
        The field's name among several
        (:mod:`kpca_dask.io.preprocessing.multiple_fields`), for messages.
    parts : tuple of FeatureLayout
        Several fields fitted together: the layout of each, in order; their positions
        follow one another along this layout's one feature axis.
    container : str
        How several fields came: ``"list"`` or ``"dataset"`` (``""`` for one field).
    variable : str or None
        The input DataArray's name: a reconstruction goes back under it.
    attrs : dict
        The input's ``units`` and ``long_name``, which outputs in its units keep.
    sample_dim_from : str
        How the sample dimension was chosen: ``"given"`` (``sample_dim=``),
        ``"time"`` (the dimension named so) or ``"first"`` (the first of two).

    Examples
    --------
    >>> layout = FeatureLayout("time", ("lat", "lon"), (2, 3), {"lat": np.array([0.0, 10.0])},
    ...                        kept=np.array([0, 1, 2, 4]))
    >>> layout.n_positions, layout.n_features, layout.describe(4)
    (6, 4, 'lat=10.0, lon index 1')
    """

    sample_dim: str | None
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    coords: Mapping[str, np.ndarray] = field(default_factory=dict)
    kept: np.ndarray | None = None
    weights: np.ndarray | None = None
    weight_dims: tuple[str, ...] = ()
    name: str | None = None
    parts: tuple["FeatureLayout", ...] = ()
    container: str = ""
    variable: str | None = None
    attrs: Mapping[str, object] = field(default_factory=dict)
    sample_dim_from: str = ""

    def __repr__(self) -> str:
        """One line: the dims and sizes, the mask, the weights and the sample dimension."""
        if self.parts:
            fields = ", ".join(f"{part.name}: {part._shape_text()}" for part in self.parts)
            body = f"{len(self.parts)} fields as a {self.container} ({fields})"
        else:
            body = self._shape_text()
        masked = f", {self.masked.size} masked" if self.kept is not None else ""
        weights = (f", weighted over {self.weight_dims or 'features'}"
                   if self.weights is not None else "")
        sample = ""
        if self.sample_dim is not None:
            chosen = {"time": ", the dimension named time", "first": ", the first of two"}
            sample = f", sample_dim={self.sample_dim!r}{chosen.get(self.sample_dim_from, '')}"
        return (f"FeatureLayout({body}: {self.n_features} features of {self.n_positions} "
                f"positions{masked}{weights}{sample})")

    def _shape_text(self) -> str:
        if not self.dims:
            return f"{self.shape[0]} features"
        return " x ".join(f"{dim}={size}" for dim, size in zip(self.dims, self.shape))

    @property
    def n_positions(self) -> int:
        """Positions of the field, masked or not."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def n_features(self) -> int:
        """Features the kernel sees: the positions kept."""
        return self.n_positions if self.kept is None else int(self.kept.size)

    @cached_property
    def masked(self) -> np.ndarray:
        """The flat positions dropped (NaN at every sample), ascending."""
        if self.kept is None:
            return np.empty(0, np.int64)
        return np.setdiff1d(np.arange(self.n_positions), self.kept)

    def mask(self) -> xr.DataArray:
        """The mask over the feature dimensions: True where the field is NaN at every sample.

        Examples
        --------
        >>> FeatureLayout("t", ("x",), (3,), kept=np.array([0, 2])).mask().values.tolist()
        [False, True, False]
        """
        flat = np.zeros(self.n_positions, bool)
        flat[self.masked] = True
        return xr.DataArray(flat.reshape(self.shape), dims=self.dims, coords=dict(self.coords),
                            name="mask")

    def describe(self, position: int) -> str:
        """The flat ``position`` by its coordinates (and its field's name), for messages."""
        for part, offset in zip(self.parts, np.cumsum([0] + [p.n_positions for p in self.parts])):
            if position < offset + part.n_positions:
                return part.describe(position - offset)
        where = self._describe(position)
        return where if self.name is None else f"field {self.name!r}, {where}"

    def _describe(self, position: int) -> str:
        if not self.dims:
            return f"feature {int(position)}"
        index = np.unravel_index(int(position), self.shape)
        parts = []
        for dim, i in zip(self.dims, index):
            values = self.coords.get(dim)
            parts.append(f"{dim}={shown_value(values[i])}" if values is not None
                         else f"{dim} index {int(i)}")
        return ", ".join(parts)


def shown_value(value) -> str:
    value = np.asarray(value)
    return str(value) if value.dtype.kind in "MmUSO" else repr(value.item())


def layout_of(X: xr.DataArray, sample_dim: str | None, weights=None) -> FeatureLayout:
    """The layout of the field ``X`` (no mask yet), checking its dims, dtype and ``weights``.

    Examples
    --------
    >>> X = xr.DataArray(np.zeros((4, 2, 3)), dims=("time", "lat", "lon"),
    ...                  coords={"lat": [-10.0, 10.0]})
    >>> w = xr.DataArray([0.5, 1.0], dims="lat", coords={"lat": [-10.0, 10.0]})
    >>> layout = layout_of(X, None, w)
    >>> layout.sample_dim, layout.dims, layout.weights.tolist()
    ('time', ('lat', 'lon'), [0.5, 0.5, 0.5, 1.0, 1.0, 1.0])
    """
    if X.ndim < 2:
        raise InvalidInputError(
            f"The DataArray has dims {X.dims}; a sample dimension and at least one feature "
            "dimension are needed.")
    sample_dim, chosen = resolved_sample_dim(X.dims, sample_dim)
    if np.dtype(X.dtype).kind not in "biuf":
        from ...errors import NonNumericInputError

        raise NonNumericInputError(
            f"The DataArray {X.name or ''} has dtype {X.dtype}; kernel PCA needs numbers "
            "(convert it, e.g. X.astype('float64'), or select a numeric variable).")
    dims = tuple(str(d) for d in X.dims if d != sample_dim)
    shape = tuple(int(X.sizes[d]) for d in dims)
    coords = {d: np.asarray(X.indexes[d]) for d in dims if d in X.indexes}
    # Text only (CF's units and long_name are): a model file keeps them as JSON.
    attrs = {key: X.attrs[key] for key in KEPT_ATTRS if isinstance(X.attrs.get(key), str)}
    layout = FeatureLayout(str(sample_dim), dims, shape, coords,
                           variable=None if X.name is None else str(X.name), attrs=attrs,
                           sample_dim_from=chosen)
    if is_coslat(weights):
        weights = field_coslat_weights(X, layout.sample_dim)
    return layout if weights is None else _with_weights(layout, X, weights)


def resolved_sample_dim(dims, sample_dim: str | None) -> tuple[str, str]:
    """The sample dimension of a DataArray with ``dims``, and how it was chosen.

    ``sample_dim`` if given; else the first of two dimensions, or among more
    the one named ``time``; otherwise an error that lists the dimensions: a
    field ordered (lat, lon, time) must not be fitted with latitude as its
    samples without a word.

    Examples
    --------
    >>> resolved_sample_dim(("lat", "lon", "time"), None)
    ('time', 'time')
    >>> resolved_sample_dim(("lat", "lon", "level"), None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: The DataArray has 3 dimensions ('lat', ...
    """
    dims = tuple(str(d) for d in dims)
    if sample_dim is not None:
        if sample_dim not in dims:
            raise InvalidParameterError(
                f"sample_dim={sample_dim!r} is not a dimension of the DataArray (its dims are "
                f"{dims}); pass one of them.")
        return str(sample_dim), "given"
    if len(dims) <= 2:
        return dims[0], "first"
    if "time" in dims:
        return "time", "time"
    raise InvalidParameterError(
        f"The DataArray has {len(dims)} dimensions {dims} and none is named 'time': which "
        "one indexes the samples? Pass it as sample_dim= (KernelPCA(..., sample_dim=NAME), "
        f"NAME one of {', '.join(map(repr, dims))}); every other dimension becomes a "
        "feature dimension.")


def _with_weights(layout: FeatureLayout, X: xr.DataArray, weights) -> FeatureLayout:
    if not isinstance(weights, xr.DataArray):
        raise InvalidParameterError(
            "weights for a DataArray must be a DataArray over its feature dimensions "
            f"{layout.dims}, or \"coslat\" for √cos(latitude) of X's latitude; got "
            f"{type(weights).__name__}.")
    extra = [d for d in weights.dims if d not in layout.dims]
    if extra:
        raise InvalidParameterError(
            f"weights have dims {weights.dims}, but {extra} are not feature dimensions of X "
            f"(those are {layout.dims}; {layout.sample_dim!r} is the sample dimension).")
    for dim in weights.dims:
        if weights.sizes[dim] != X.sizes[dim] or (
                dim in weights.indexes and dim in X.indexes
                and not weights.indexes[dim].equals(X.indexes[dim])):
            raise InvalidParameterError(
                f"weights and X differ along {dim!r}: the weights need X's coordinates "
                "there (e.g. weights.reindex_like(X) or build them from X's coordinates).")
    weights = weights.transpose(*[d for d in layout.dims if d in weights.dims])
    values = np.asarray(weights.values, dtype=np.float64)
    _check_weight_values(values, weights)
    shaped = values.reshape([layout.shape[i] if d in weights.dims else 1
                             for i, d in enumerate(layout.dims)])
    flat = np.broadcast_to(shaped, layout.shape).reshape(-1).copy()
    check_weights(flat)
    return replace(layout, weights=flat, weight_dims=tuple(str(d) for d in weights.dims))


def _check_weight_values(values: np.ndarray, weights: xr.DataArray) -> None:
    """Refuse NaN, infinite or negative weights, naming the first by its coordinates."""
    for bad, what in ((~np.isfinite(values), "NaN or infinite"), (values < 0, "negative")):
        if not bad.any():
            continue
        index = np.unravel_index(int(np.flatnonzero(bad)[0]), values.shape)
        where = ", ".join(
            f"{dim}={shown_value(weights.indexes[dim][i])}" if dim in weights.indexes
            else f"{dim} index {int(i)}" for dim, i in zip(weights.dims, index))
        hint = (" (the square root of cos(latitude) is NaN at the poles when the cosine "
                "rounds below 0: clip it, np.sqrt(np.cos(np.deg2rad(lat)).clip(0)), or use "
                "weights=\"coslat\")" if what != "negative" else "")
        raise InvalidParameterError(
            f"weights must be finite and >= 0; {int(bad.sum())} of {values.size} are {what}, "
            f"the first at {where or 'its one value'}: {values[index]}{hint}.")


def check_weights(flat: np.ndarray) -> None:
    """Refuse weights that are NaN, infinite or negative.

    Examples
    --------
    >>> check_weights(np.array([1.0, -0.5]))
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: weights must be finite and >= 0; 1 of 2 are \
negative (the first at position 1: -0.5).
    """
    for bad, what in ((~np.isfinite(flat), "NaN or infinite"), (flat < 0, "negative")):
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise InvalidParameterError(
                f"weights must be finite and >= 0; {int(bad.sum())} of {flat.size} are {what} "
                f"(the first at position {first}: {flat[first]}).")


def check_same_field(X: xr.DataArray, layout: FeatureLayout, what: str = "X") -> xr.DataArray:
    """``X`` with the sample dimension first, if its feature dims and coordinates are the fit's.

    Examples
    --------
    >>> layout = FeatureLayout("time", ("lat",), (2,), {"lat": np.array([0.0, 1.0])})
    >>> X = xr.DataArray(np.zeros((3, 2)), dims=("time", "lat"), coords={"lat": [0.0, 2.0]})
    >>> check_same_field(X, layout)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidInputError: X has other 'lat' coordinates than the fit's ...
    """
    if layout.sample_dim not in X.dims:
        raise InvalidInputError(
            f"{what} has dims {X.dims}, without the model's sample dimension "
            f"{layout.sample_dim!r}; rename its sample dimension to it.")
    dims = tuple(d for d in X.dims if d != layout.sample_dim)
    if dims != layout.dims:
        order = (" (the same dimensions in another order: X.transpose("
                 f"{', '.join(map(repr, (layout.sample_dim,) + layout.dims))}))"
                 if sorted(dims) == sorted(layout.dims) else "")
        raise InvalidInputError(
            f"{what} has the feature dimensions {dims}, but the model was fitted on "
            f"{layout.dims}{order}.")
    for dim, size in zip(dims, layout.shape):
        stored = layout.coords.get(dim)
        given = np.asarray(X.indexes[dim]) if dim in X.indexes else None
        same = (X.sizes[dim] == size and (stored is None) == (given is None)
                and (stored is None or _equal_coords(stored, given)))
        if not same:
            raise InvalidInputError(
                f"{what} has other {dim!r} coordinates than the fit's ({X.sizes[dim]} values "
                f"{_range(given)}; the fit had {size} {_range(stored)}). Select or interpolate "
                f"{what} onto the fit's grid first (e.g. X.sel({dim}=model.feature_layout_"
                f".coords[{dim!r}]).")
    return X.transpose(layout.sample_dim, *dims)


def _equal_coords(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype.kind == b.dtype.kind and bool(np.all(a == b))


def _range(values) -> str:
    if values is None:
        return "without coordinates"
    if not len(values):
        return "(none)"
    return f"from {shown_value(values[0])} to {shown_value(values[-1])}"


def stacked(X: xr.DataArray) -> da.Array:
    """The sample-first DataArray ``X`` as lazy rows (n, positions), features stacked in C order.

    The chunks of the feature dimensions are kept as far as a lazy reshape
    allows: chunks of the outer feature dimension stay chunks of positions
    (docs/design.md §12). Inner feature dimensions split into chunks are made
    whole by dask's reshape, a bounded rechunk that keeps chunks about the
    size they were stored in (the outer dimension's chunks are cut finer to
    make room), so no task ever holds more than about one stored chunk.
    In-memory DataArrays become blocks of whole rows, as a numpy array does.

    Examples
    --------
    >>> X = xr.DataArray(np.arange(12.0).reshape(2, 2, 3), dims=("t", "a", "b"))
    >>> stacked(X).compute()[1].tolist()
    [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    >>> stacked(X.chunk({"a": 1})).chunks
    ((2,), (3, 3))
    """
    data = X.data
    if not isinstance(data, da.Array):  # in memory: blocks of rows, as for a numpy array
        data = da.from_array(np.asarray(data),
                             chunks=(DEFAULT_BLOCK_ROWS,) + (-1,) * (X.ndim - 1))
    return data.reshape(data.shape[0], -1)


def as_field(values, layout: FeatureLayout, leading: Mapping[str, np.ndarray | None],
             *, name: str, attrs: Mapping | None = None, keep: tuple[str, ...] = ()
             ) -> xr.DataArray:
    """Values over the features (..., n_features) as a DataArray over the field, NaN on the mask.

    ``keep`` names the attributes of the input (among ``layout.attrs``: its
    ``units`` and ``long_name``) that still hold for these values.

    ``leading`` names the dimensions before the features and their
    coordinates (None: none), e.g. ``{"mode": np.arange(1, q + 1)}`` or the
    sample dimension with its coordinate. Lazy for dask ``values``.

    Examples
    --------
    >>> layout = FeatureLayout("t", ("x",), (3,), {"x": np.array([5, 6, 7])},
    ...                        kept=np.array([0, 2]))
    >>> as_field(np.array([[1.0, 2.0]]), layout, {"mode": None}, name="p").values.tolist()
    [[1.0, nan, 2.0]]
    """
    if isinstance(values, da.Array):
        values = positions_of(values, layout)
    elif layout.kept is not None:
        values = scattered(np.asarray(values), layout.kept, layout.n_positions)
    shape = tuple(values.shape[:-1]) + layout.shape
    values = values.reshape(shape)
    coords = {dim: coord for dim, coord in leading.items() if coord is not None}
    coords.update(layout.coords)
    attrs = {**{key: layout.attrs[key] for key in keep if key in layout.attrs},
             **dict(attrs or {})}
    return xr.DataArray(values, dims=tuple(leading) + layout.dims, coords=coords, name=name,
                        attrs=attrs)


def scattered(values: np.ndarray, kept: np.ndarray, n_positions: int) -> np.ndarray:
    """``values`` (..., kept) placed at the ``kept`` positions of (..., n_positions), NaN elsewhere.

    Examples
    --------
    >>> scattered(np.array([1.0, 2.0]), np.array([0, 2]), 3).tolist()
    [1.0, nan, 2.0]
    """
    dtype = values.dtype if values.dtype.kind == "f" else np.float64
    out = np.full(values.shape[:-1] + (n_positions,), np.nan, dtype)
    out[..., kept] = values
    return out


def positions_of(values: da.Array, layout: FeatureLayout) -> da.Array:
    """Lazy ``values`` (..., n_features) over every position of the field, NaN on the mask.

    Chunk by chunk: each chunk of features becomes one chunk of positions,
    its own and the masked ones up to the next chunk's; two chunks part at
    the start of a row of the field's outer dimension where one lies between
    them (chunks of whole rows stay so), else at the later one's first kept
    position. No task holds more than its chunk's positions.

    Examples
    --------
    >>> layout = FeatureLayout("t", ("x", "y"), (2, 2), kept=np.array([0, 2, 3]))
    >>> out = positions_of(da.from_array(np.array([[1.0, 2.0, 3.0]]), chunks=(1, (1, 2))),
    ...                    layout)
    >>> out.chunks[1], out.compute().tolist()
    ((2, 2), [[1.0, nan, 2.0, 3.0]])
    """
    if layout.kept is None:
        return values
    if 0 in values.chunks[-1]:
        values = values.rechunk({-1: tuple(c for c in values.chunks[-1] if c)})
    kept_edges = np.cumsum((0,) + values.chunks[-1])
    inner = int(np.prod(layout.shape[1:], dtype=np.int64))
    edges = [0]
    for k in kept_edges[1:-1]:
        after, first = int(layout.kept[k - 1]), int(layout.kept[k])
        row_start = (after // inner + 1) * inner
        edges.append(row_start if row_start <= first else first)
    edges.append(layout.n_positions)
    return values.map_blocks(
        scattered_chunk, kept=dask.delayed(layout.kept, pure=True),
        kept_edges=kept_edges, edges=np.asarray(edges),
        chunks=values.chunks[:-1] + (tuple(np.diff(edges).tolist()),),
        dtype=values.dtype if values.dtype.kind == "f" else np.float64)


def scattered_chunk(values: np.ndarray, kept: np.ndarray, kept_edges: np.ndarray,
                    edges: np.ndarray, block_info=None) -> np.ndarray:
    """One chunk of :func:`positions_of`: its features at their positions, NaN elsewhere."""
    k = block_info[0]["chunk-location"][-1]
    local = kept[kept_edges[k]:kept_edges[k + 1]] - edges[k]
    return scattered(values, local, int(edges[k + 1] - edges[k]))
