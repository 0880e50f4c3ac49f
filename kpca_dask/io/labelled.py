"""Labelled outputs, built in one place: xarray DataArrays and pandas or dask DataFrames.

An output keeps the labels of the input it came from, row for row:

* a DataArray input gives a DataArray on its sample dimension with its
  coordinates (:func:`label_rows`, :func:`label_embedding`);
* a pandas DataFrame gives a DataFrame or Series on its index, a dask
  DataFrame a lazy one on its index and divisions, one partition per block
  (:func:`frame_like`, :func:`series_like`); key columns of the input can
  come first (``keep``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr
from dask.base import tokenize

from .._compat import frame_from_graph, meta_of
from .frames import Partitions

__all__ = ["MODE_DIM", "modes", "label_rows", "label_embedding", "frame_like", "series_like"]

#: The dimension of the components in labelled outputs, numbered from 1 (xeofs' convention).
MODE_DIM = "mode"


def modes(q: int) -> np.ndarray:
    """The labels of ``q`` modes along :data:`MODE_DIM`: 1..q, as xeofs numbers them.

    Examples
    --------
    >>> modes(3).tolist()
    [1, 2, 3]
    """
    return np.arange(1, int(q) + 1)


def label_rows(values, like: xr.DataArray, *, name: str, column_dim: str | None = None,
               columns=None, attrs: Mapping[str, Any] | None = None) -> xr.DataArray:
    """Per-row ``values`` as a DataArray on the sample dimension of ``like`` (its first).

    Coordinates of ``like`` along that dimension are carried over. Values
    with a second axis get the dimension ``column_dim``, labelled by
    ``columns`` when given.

    Examples
    --------
    >>> like = xr.DataArray(np.zeros((3, 2)), dims=("time", "x"), coords={"time": [5, 6, 7]})
    >>> label_rows(np.ones(3), like, name="score").coords["time"].values.tolist()
    [5, 6, 7]
    """
    sample_dim = like.dims[0]
    coords = {key: coord for key, coord in like.coords.items()
              if set(coord.dims) <= {sample_dim}}
    dims: tuple = (sample_dim,)
    if column_dim is not None:
        dims += (column_dim,)
        if columns is not None:
            coords[column_dim] = columns
    return xr.DataArray(values, dims=dims, coords=coords, attrs=dict(attrs or {}), name=name)


def label_embedding(Y, like: xr.DataArray, attrs: Mapping[str, Any]) -> xr.DataArray:
    """The embedding ``Y`` as DataArray ``scores`` shaped like ``like`` (sample dim, "mode").

    Coordinates along the sample dimension of ``like`` are carried over; the
    modes are numbered 1..q (xeofs' ``scores``).

    Examples
    --------
    >>> like = xr.DataArray(np.zeros((3, 2)), dims=("time", "x"), coords={"time": [5, 6, 7]})
    >>> Y = label_embedding(np.ones((3, 1)), like, {"kernel": "rbf"})
    >>> Y.name, Y.dims, Y["mode"].values.tolist()
    ('scores', ('time', 'mode'), [1])
    """
    return label_rows(Y, like, name="scores", column_dim=MODE_DIM,
                      columns=modes(Y.shape[1]), attrs=attrs)


def frame_like(Y: da.Array | np.ndarray, like: Any, columns: Sequence[str],
               keep: Sequence[str] = ()):
    """Rows of ``Y`` as a frame with the index of ``like`` (and its divisions if dask).

    ``like`` is a pandas DataFrame, or the :class:`Partitions` of a dask
    DataFrame whose partition i gave block i of ``Y``. The columns ``keep``
    of ``like`` (keys such as an id) come first, row for row.

    Examples
    --------
    >>> import pandas as pd, numpy as np
    >>> df = pd.DataFrame({"a": [1.0, 2.0]}, index=[10, 20])
    >>> frame_like(np.ones((2, 1)), df, ["pc0"]).index.tolist()
    [10, 20]
    """

    columns, keep = list(columns), list(keep)
    if not isinstance(like, Partitions):
        return _labelled(np.asarray(Y), like, columns, keep)
    meta = _labelled(np.empty((0, len(columns)), Y.dtype), meta_of(like.frame), columns, keep)
    return _by_partition(Y, like, meta, (columns, keep))


def series_like(e: da.Array | np.ndarray, like: Any, name: str):
    """Per-row values ``e`` as a Series on the index of ``like`` (as :func:`frame_like`).

    Examples
    --------
    >>> import pandas as pd, numpy as np
    >>> series_like(np.array([0.5]), pd.DataFrame({"a": [1.0]}, index=[7]), "score").to_dict()
    {7: 0.5}
    """
    import pandas as pd

    if not isinstance(like, Partitions):
        return pd.Series(np.asarray(e), index=like.index, name=name)
    meta = pd.Series(np.empty(0, e.dtype), index=meta_of(like.frame).index, name=name)
    return _by_partition(e, like, meta, (name,))


def _by_partition(Y: da.Array, like: Partitions, meta, args: tuple):
    """Block i of ``Y`` beside the index of partition i: one graph, each partition read once."""
    name = "kpca-" + tokenize(Y.name, like.keys, args)
    graph = {**like.graph, **dict(Y.__dask_graph__())}
    keys = []
    for i, key in enumerate(like.keys):
        block = (Y.name, i) + (0,) * (Y.ndim - 1)
        graph[(name, i)] = (_labelled, block, key, *args)
        keys.append((name, i))
    return frame_from_graph(graph, meta, like.divisions, keys, "kpca")


def _labelled(values: np.ndarray, part, label, keep=()):
    import pandas as pd

    if values.ndim == 1:
        return pd.Series(values, index=part.index, name=label)
    out = pd.DataFrame(values, index=part.index, columns=label)
    if keep:
        out = pd.concat([part[list(keep)], out], axis=1)
    return out
