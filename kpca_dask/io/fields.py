"""Labelled fields as rows: a DataArray of any dimensions, its mask and weights, and back.

A field such as (time, lat, lon) becomes rows of features: the sample
dimension indexes the rows, every other dimension is a feature dimension,
and the feature dimensions are stacked lazily, in their order, into one
feature axis (C order). A :class:`FeatureLayout` records what a fit saw: the
dimensions, their sizes and coordinates, the positions kept (a fixed mask,
NaN at every sample such as land, is dropped) and the weights each kept
feature is multiplied by before the kernel (docs/design.md §13). Outputs over
the features (pre-images, patterns) are put back into the field with
:func:`as_field`, NaN on the mask.

The mask is found without a pass of its own: the positions that are NaN in
the first rows are its candidates, and every block the fit reads is checked
by :func:`checked_features` as it is read: a candidate that holds a value in
some row, or a NaN (or an infinity) at a position that is not masked, is a
NaN that is not fixed, and an error names it by its coordinates. A position
NaN at every sample is NaN in the first rows, so the candidates found are
the mask exactly whenever the check passes.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

import dask
import dask.array as da
import numpy as np
import xarray as xr
from dask.array.core import PerformanceWarning

from ..errors import InvalidInputError, InvalidParameterError, NonFiniteInputError

__all__ = ["FeatureLayout", "layout_of", "field_rows", "checked_features", "as_field",
           "candidate_mask", "with_mask", "sample_labels", "CANDIDATE_ROWS"]

#: Rows read before the pass for the mask's candidates (all in the first row block).
CANDIDATE_ROWS = 4


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

    def describe(self, position: int) -> str:
        """The flat ``position`` by its coordinates, for messages."""
        if not self.dims:
            return f"feature {int(position)}"
        index = np.unravel_index(int(position), self.shape)
        parts = []
        for dim, i in zip(self.dims, index):
            values = self.coords.get(dim)
            parts.append(f"{dim}={_shown(values[i])}" if values is not None
                         else f"{dim} index {int(i)}")
        return ", ".join(parts)


def _shown(value) -> str:
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
    if sample_dim is None:
        sample_dim = X.dims[0]
    elif sample_dim not in X.dims:
        raise InvalidParameterError(
            f"sample_dim={sample_dim!r} is not a dimension of the DataArray (its dims are "
            f"{X.dims}); pass one of them, or None for the first.")
    if np.dtype(X.dtype).kind not in "biuf":
        from ..errors import NonNumericInputError

        raise NonNumericInputError(
            f"The DataArray {X.name or ''} has dtype {X.dtype}; kernel PCA needs numbers "
            "(convert it, e.g. X.astype('float64'), or select a numeric variable).")
    dims = tuple(str(d) for d in X.dims if d != sample_dim)
    shape = tuple(int(X.sizes[d]) for d in dims)
    coords = {d: np.asarray(X.indexes[d]) for d in dims if d in X.indexes}
    layout = FeatureLayout(str(sample_dim), dims, shape, coords)
    return layout if weights is None else _with_weights(layout, X, weights)


def _with_weights(layout: FeatureLayout, X: xr.DataArray, weights) -> FeatureLayout:
    if not isinstance(weights, xr.DataArray):
        raise InvalidParameterError(
            "weights for a DataArray must be a DataArray over its feature dimensions "
            f"{layout.dims} (e.g. np.sqrt(np.cos(np.deg2rad(X.lat)))); got "
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
    values = np.asarray(weights.transpose(*[d for d in layout.dims if d in weights.dims])
                        .values, dtype=np.float64)
    shaped = values.reshape([layout.shape[i] if d in weights.dims else 1
                             for i, d in enumerate(layout.dims)])
    flat = np.broadcast_to(shaped, layout.shape).reshape(-1).copy()
    check_weights(flat)
    return replace(layout, weights=flat, weight_dims=tuple(str(d) for d in weights.dims))


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
    return f"from {_shown(values[0])} to {_shown(values[-1])}" if len(values) else "(none)"


def stacked(X: xr.DataArray) -> da.Array:
    """The sample-first DataArray ``X`` as lazy rows (n, positions), features stacked in C order.

    The feature dimensions are made one chunk first (with a warning when they
    were split, as for any input), so the reshape is one task per row block.

    Examples
    --------
    >>> X = xr.DataArray(np.arange(12.0).reshape(2, 2, 3), dims=("t", "a", "b"))
    >>> stacked(X).compute()[1].tolist()
    [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    """
    data = X.data
    if not isinstance(data, da.Array):
        data = da.from_array(np.asarray(data), chunks=-1)
    if any(n > 1 for n in data.numblocks[1:]):
        warnings.warn(
            f"The DataArray {X.name or ''} has {data.numblocks[1:]} chunks along its feature "
            f"dimensions {X.dims[1:]}; rechunking them to one (each row block must hold whole "
            "rows). Store it with one chunk per sample block (e.g. "
            f"X.chunk({{{', '.join(f'{d!r}: -1' for d in X.dims[1:])}}})) to avoid this.",
            PerformanceWarning, stacklevel=4)
        data = data.rechunk({i: -1 for i in range(1, X.ndim)})
    return data.reshape(data.shape[0], -1)


def candidate_mask(rows: np.ndarray) -> np.ndarray:
    """Flat positions NaN in every one of ``rows`` (k, positions): the mask's candidates.

    Examples
    --------
    >>> candidate_mask(np.array([[np.nan, 1.0, np.nan], [np.nan, np.nan, 2.0]])).tolist()
    [0]
    """
    return np.flatnonzero(np.isnan(rows).all(axis=0)).astype(np.int64)


def with_mask(layout: FeatureLayout, masked: np.ndarray, first_label=None) -> FeatureLayout:
    """``layout`` with the ``masked`` positions dropped (their weights with them).

    Examples
    --------
    >>> layout = FeatureLayout("time", ("x",), (3,), weights=np.array([1.0, 2.0, 3.0]))
    >>> masked = with_mask(layout, np.array([1]))
    >>> masked.kept.tolist(), masked.weights.tolist()
    ([0, 2], [1.0, 3.0])
    """
    if masked.size == 0:
        return layout
    kept = np.setdiff1d(np.arange(layout.n_positions), masked).astype(np.int64)
    if kept.size == 0:
        at = "" if first_label is None else f" (the first rows, from {first_label})"
        raise NonFiniteInputError(
            f"Every position of the field is NaN in the first samples{at}: an all-NaN sample "
            "has no features to embed. Drop the all-NaN samples first, e.g. "
            f"X.dropna({layout.sample_dim!r}, how='all').")
    weights = None if layout.weights is None else layout.weights[kept]
    return replace(layout, kept=kept, weights=weights)


def sample_labels(X: xr.DataArray, chunks) -> da.Array:
    """The sample coordinate of the sample-first ``X`` (or positions) as (n, 1), in ``chunks``.

    Examples
    --------
    >>> X = xr.DataArray(np.zeros((3, 1)), dims=("t", "x"), coords={"t": [7, 8, 9]})
    >>> sample_labels(X, ((2, 1),)).compute().ravel().tolist()
    [7, 8, 9]
    """
    dim = X.dims[0]
    values = np.asarray(X.indexes[dim]) if dim in X.indexes else np.arange(X.shape[0])
    if values.dtype.kind == "O":
        values = values.astype(str)
    return da.from_array(values[:, None], chunks=(chunks[0], 1))


def field_rows(X: xr.DataArray, layout: FeatureLayout, *, weighted: bool = True) -> da.Array:
    """The features of the sample-first field ``X``: masked positions dropped, checked, weighted.

    Lazy rows (n, ``layout.n_features``) in the row chunks of ``X``; each block
    is checked as it is read (:func:`checked_features`).

    Examples
    --------
    >>> X = xr.DataArray([[1.0, np.nan, 2.0], [3.0, np.nan, 4.0]], dims=("t", "x"))
    >>> layout = with_mask(layout_of(X, None), np.array([1]))
    >>> field_rows(X, layout).compute().tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    rows = stacked(X)
    labels = sample_labels(X, rows.chunks)
    dtype = rows.dtype if not (weighted and layout.weights is not None) else (
        rows.dtype if rows.dtype == np.float32 else np.dtype(np.float64))
    # One key for the layout (its kept positions and weights are p-sized), not one per task.
    shared = dask.delayed(replace(layout, weights=layout.weights if weighted else None),
                          pure=True)
    return da.map_blocks(checked_features, rows, labels, layout=shared,
                         chunks=(rows.chunks[0], (layout.n_features,)), dtype=dtype,
                         meta=np.empty((0, 0), dtype), name="kpca-field-rows-"
                         + dask.base.tokenize(rows.name, labels.name, layout, weighted))


def checked_features(block: np.ndarray, labels: np.ndarray, layout: FeatureLayout) -> np.ndarray:
    """One row block of a stacked field as features; a NaN that is not fixed raises.

    Raises :class:`~kpca_dask.errors.NonFiniteInputError` naming the sample
    and the position by their coordinates when a masked position holds a
    value, a kept position holds NaN or an infinity, or a sample is NaN at
    every kept position.
    """
    block = np.asarray(block)
    masked = layout.masked
    if masked.size:
        held = ~np.isnan(block[:, masked])
        if held.any():
            i, j = np.argwhere(held)[0]
            raise NonFiniteInputError(
                f"The field is NaN at {layout.describe(masked[j])} in its first samples but "
                f"holds a value at {_sample(layout, labels[i, 0])}: only positions NaN at every "
                "sample (a fixed mask, such as land) are dropped. Fill or drop the NaN there "
                "(e.g. X.fillna(...) or X.where(mask)).")
    x = block if layout.kept is None else block[:, layout.kept]
    bad = ~np.isfinite(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    if bad.any():
        empty = bad.all(axis=1) & np.isnan(x).all(axis=1)
        if empty.any():
            raise NonFiniteInputError(
                f"The sample {_sample(layout, labels[np.flatnonzero(empty)[0], 0])} is NaN at "
                "every position: it has no features to embed. Drop the all-NaN samples first, "
                f"e.g. X.dropna({layout.sample_dim!r}, how='all').")
        i, j = np.argwhere(bad)[0]
        position = j if layout.kept is None else layout.kept[j]
        what = "NaN" if np.isnan(x[i, j]) else "infinite"
        raise NonFiniteInputError(
            f"The field is {what} at {_sample(layout, labels[i, 0])}, {layout.describe(position)}"
            ", a position that holds values at other samples: only positions NaN at every "
            "sample (a fixed mask, such as land) are dropped. Fill or drop it first.")
    if layout.weights is not None:
        x = x * layout.weights.astype(x.dtype if x.dtype == np.float32 else np.float64)
    return x


def _sample(layout: FeatureLayout, label) -> str:
    return f"{layout.sample_dim}={_shown(label)}"


def as_field(values, layout: FeatureLayout, leading: Mapping[str, np.ndarray | None],
             *, name: str, attrs: Mapping | None = None) -> xr.DataArray:
    """Values over the features (..., n_features) as a DataArray over the field, NaN on the mask.

    ``leading`` names the dimensions before the features and their
    coordinates (None: none), e.g. ``{"component": np.arange(q)}`` or the
    sample dimension with its coordinate. Lazy for dask ``values``.

    Examples
    --------
    >>> layout = FeatureLayout("t", ("x",), (3,), {"x": np.array([5, 6, 7])},
    ...                        kept=np.array([0, 2]))
    >>> as_field(np.array([[1.0, 2.0]]), layout, {"component": None}, name="p").values.tolist()
    [[1.0, nan, 2.0]]
    """
    if layout.kept is not None:
        if isinstance(values, da.Array):
            values = values.map_blocks(
                scattered, kept=layout.kept, n_positions=layout.n_positions,
                chunks=values.chunks[:-1] + ((layout.n_positions,),), dtype=values.dtype)
        else:
            values = scattered(np.asarray(values), layout.kept, layout.n_positions)
    shape = tuple(values.shape[:-1]) + layout.shape
    values = values.reshape(shape)
    coords = {dim: coord for dim, coord in leading.items() if coord is not None}
    coords.update(layout.coords)
    return xr.DataArray(values, dims=tuple(leading) + layout.dims, coords=coords, name=name,
                        attrs=dict(attrs or {}))


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
