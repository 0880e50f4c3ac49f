"""Several fields in, several fields out: a list of DataArrays or a Dataset fitted as one.

The fields share the sample dimension (and its coordinate); each has its own
feature dimensions, mask and weights (``weights=`` a list matching the fields,
or a dict by name). At fit each field's layout is found as for one field
(:mod:`kpca_dask.io.preprocessing.fields`; the masks' candidates of every field in one
read), and the fields' checked, weighted features are joined lazily along one
feature axis (:func:`joined_rows`), chunk by chunk as each is stored. The
joined layout (:func:`~kpca_dask.io.preprocessing.multiple_fields.combined_layout`) is the
model's: later inputs must be the same fields, and outputs over the features
come back as the fields came, a list or a Dataset (:func:`field_output`;
docs/design.md §15). :mod:`kpca_dask.model.inputs` calls these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from ..._parallel import computed
from ...errors import InvalidInputError, InvalidParameterError
from .field_rows import CANDIDATE_ROWS, candidate_mask, field_rows, with_mask
from .fields import (
    FeatureLayout,
    as_field,
    check_same_field,
    layout_of,
    resolved_sample_dim,
    stacked,
)
from .latitude import is_coslat
from .multiple_fields import as_fields, combined_layout, field_names

__all__ = ["is_fields", "fields_of", "fit_fields", "fields_rows", "joined_rows",
           "field_output", "weights_of_fields"]


def is_fields(X: Any) -> bool:
    """Whether ``X`` is several fields: a Dataset, or a list or tuple of DataArrays.

    Examples
    --------
    >>> X = xr.DataArray(np.zeros((2, 1)), dims=("t", "x"))
    >>> is_fields([X, X]), is_fields(X.to_dataset(name="a")), is_fields(X)
    (True, True, False)
    """
    if isinstance(X, xr.Dataset):
        return True
    return (isinstance(X, (list, tuple)) and len(X) > 0
            and all(isinstance(each, xr.DataArray) for each in X))


def fields_of(X: Any) -> tuple[list[xr.DataArray], list[str], str]:
    """The fields of ``X``, their names and how they came (``"list"`` or ``"dataset"``).

    A DataArray of a list without a name is called ``field<i>`` by its place.

    Examples
    --------
    >>> X = xr.DataArray(np.zeros((2, 1)), dims=("t", "x"))
    >>> fields_of([X.rename("sst"), X])[1:]
    (['sst', 'field1'], 'list')
    """
    if isinstance(X, xr.Dataset):
        names = [str(name) for name in X.data_vars]
        if not names:
            raise InvalidInputError("The Dataset has no data variables: nothing to fit.")
        return [X[name] for name in names], names, "dataset"
    names = [str(each.name) if each.name is not None else f"field{i}" for i, each in enumerate(X)]
    if len(set(names)) != len(names):
        raise InvalidInputError(
            f"The fields are named {names}: two share a name. Give each its own, e.g. "
            "[a.rename('sst'), b.rename('slp')].")
    return list(X), names, "list"


def weights_of_fields(weights: Any, names: list[str]) -> list[Any]:
    """The weights of each field: ``weights`` None, a list in the fields' order, or a dict
    by name (a field left out is not weighted).

    Examples
    --------
    >>> weights_of_fields({"b": 1}, ["a", "b"]), weights_of_fields("coslat", ["a", "b"])
    ([None, 1], ['coslat', 'coslat'])
    """
    if weights is None or is_coslat(weights):
        return [weights] * len(names)  # "coslat": each field's own latitude
    if isinstance(weights, Mapping):
        unknown = sorted(set(map(str, weights)) - set(names))
        if unknown:
            raise InvalidParameterError(
                f"weights names {unknown}, which are not among the fields {names}.")
        return [weights.get(name) for name in names]
    if isinstance(weights, (list, tuple)) and len(weights) == len(names):
        return list(weights)
    raise InvalidParameterError(
        f"weights for {len(names)} fields must be a list of {len(names)} (a DataArray or "
        f"None for each, in order) or a dict by field name ({names}); got "
        f"{type(weights).__name__}" + (f" of {len(weights)}" if isinstance(
            weights, (list, tuple)) else "") + ".")


def fit_fields(X: Any, sample_dim: str | None, weights: Any
               ) -> tuple[da.Array, FeatureLayout]:
    """The joined rows of the fields ``X`` and their joined layout, for a fit.

    Each field's mask is taken from its first rows, every field's in one read
    before the pass, and checked by every block the fit reads.

    Examples
    --------
    >>> a = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("time", "x"), name="a")
    >>> b = xr.DataArray(np.ones((3, 1)), dims=("time", "y"), name="b")
    >>> rows, layout = fit_fields([a, b], None, [None, b.isel(time=0) * 2])
    >>> rows.compute()[1].tolist(), [part.dims for part in layout.parts]
    ([2.0, 3.0, 2.0], [('x',), ('y',)])
    """
    fields, names, container = fields_of(X)
    sample_dim, chosen = resolved_sample_dim(fields[0].dims, sample_dim)
    layouts, arrays = [], []
    for field, name, w in zip(fields, names, weights_of_fields(weights, names)):
        layout = replace(layout_of(field, sample_dim, w), name=name, sample_dim_from=chosen)
        arrays.append(field.transpose(layout.sample_dim, *layout.dims))
        layouts.append(layout)
    _check_same_samples(arrays, names, sample_dim)
    candidates = computed(da.concatenate(
        [candidate_mask(stacked(each)[:CANDIDATE_ROWS]) for each in arrays]))
    first = arrays[0]
    first_label = (f"{sample_dim}={first[sample_dim].values[0]}" if sample_dim in first.coords
                   else None)
    start = 0
    for i, layout in enumerate(layouts):
        mine = candidates[start:start + layout.n_positions]
        start += layout.n_positions
        layouts[i] = with_mask(layout, np.flatnonzero(mine).astype(np.int64), first_label)
    return joined_rows(arrays, layouts, fitting=True), combined_layout(layouts, container)


def _check_same_samples(fields: list[xr.DataArray], names: list[str], sample_dim: str) -> None:
    """Refuse fields whose samples differ: in number, or in their coordinate."""
    first = fields[0]
    for field, name in zip(fields[1:], names[1:]):
        same = field.sizes[sample_dim] == first.sizes[sample_dim] and (
            sample_dim not in first.indexes or sample_dim not in field.indexes
            or first.indexes[sample_dim].equals(field.indexes[sample_dim]))
        if not same:
            raise InvalidInputError(
                f"The fields {names[0]!r} and {name!r} have other samples along "
                f"{sample_dim!r} ({first.sizes[sample_dim]} and {field.sizes[sample_dim]}, or "
                "other coordinates): fields fitted together need the same samples; align "
                "them first (e.g. xr.align(a, b, join='inner')).")


def joined_rows(fields: list[xr.DataArray], layouts, *, weighted: bool = True,
                fitting: bool = False) -> da.Array:
    """Each sample-first field's checked features side by side, lazily, in the first
    field's row blocks (each field keeps its chunks of positions)."""
    parts = [field_rows(field, layout, weighted=weighted, fitting=fitting)
             for field, layout in zip(fields, layouts)]
    blocks = parts[0].chunks[0]
    parts = [part if part.chunks[0] == blocks else part.rechunk({0: blocks}) for part in parts]
    return da.concatenate(parts, axis=1)


def fields_rows(layout: FeatureLayout, X: Any, *, weighted: bool = True
                ) -> tuple[da.Array, xr.DataArray]:
    """The fields ``X`` as the joined rows of the model's ``layout``, and the field the
    outputs over the samples are labelled like (the first).

    A Dataset's fields are taken by name, a list's by place; each must have
    its field's dimensions, coordinates and mask, as one field must.

    Examples
    --------
    >>> a = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("time", "x"), name="a")
    >>> _, layout = fit_fields([a, a.rename("b")], None, None)
    >>> rows, like = fields_rows(layout, xr.Dataset({"b": a, "a": a}))
    >>> rows.shape, like.dims
    ((3, 4), ('time', 'x'))
    """
    names = field_names(layout)
    if isinstance(X, xr.Dataset):
        missing = [name for name in names if name not in X.data_vars]
        if missing:
            raise InvalidInputError(
                f"The Dataset has no variable {missing}: the model was fitted on the fields "
                f"{names}.")
        fields = [X[name] for name in names]
    elif is_fields(X) and len(X) == len(names):
        fields = list(X)
    else:
        given = (f"{len(X)} fields" if is_fields(X) else type(X).__name__)
        raise InvalidInputError(
            f"The model was fitted on {len(names)} fields {names}; got {given}. Pass them "
            "as a list in that order or a Dataset of those variables (or their stacked "
            "positions as one array).")
    fields = [check_same_field(field, part, what=f"The field {name!r}")
              for field, part, name in zip(fields, layout.parts, names)]
    _check_same_samples(fields, names, layout.sample_dim)
    return joined_rows(fields, layout.parts, weighted=weighted), fields[0]


def field_output(values, layout: FeatureLayout, leading: Mapping[str, np.ndarray | None], *,
                 name: str, attrs: Mapping | None = None, keep: tuple[str, ...] = ()):
    """Values over the model's features on its field: a DataArray for one field, a list of
    DataArrays or a Dataset for several, as they were fitted. ``keep``: the input's
    attributes that still hold (:func:`~kpca_dask.io.preprocessing.fields.as_field`).

    Examples
    --------
    >>> layout = FeatureLayout("t", ("x",), (2,))
    >>> field_output(np.ones((1, 2)), layout, {"mode": None}, name="p").dims
    ('mode', 'x')
    """
    if layout.parts:
        return as_fields(values, layout, leading, attrs=attrs, keep=keep)
    return as_field(values, layout, leading, name=name, attrs=attrs, keep=keep)
