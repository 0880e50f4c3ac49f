"""What the estimator's methods take: every kind of input as a validated dask array.

Arrays, dask arrays, scipy.sparse rows, xarray DataArrays, Zarr paths and URLs,
pandas and dask DataFrames all arrive here; the methods see a float dask
array, chunked along the features as it was given (docs/design.md §12).
"""

from __future__ import annotations

import numbers
import os
from typing import Any

import dask
import dask.array as da
import zarr

from .._parallel import capped_blas
from ..errors import InvalidParameterError
from ..io.frames import Partitions, frame_to_array, frame_to_numpy, is_dask_frame, is_frame
from ..validation import as_dask_array

__all__ = ["is_xarray", "computed", "as_rows", "open_input", "as_fit_input", "row_range"]


def is_xarray(X: Any) -> bool:
    """Whether ``X`` is an xarray object (without importing xarray).

    Examples
    --------
    >>> is_xarray([[1.0]])
    False
    """
    return type(X).__module__.split(".")[0] == "xarray"


def computed(Y: da.Array):
    """``Y`` computed in the client, with the BLAS threads capped as in the pass.

    Examples
    --------
    >>> import dask.array as da
    >>> computed(da.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """
    with capped_blas(Y):
        return Y.compute()


def as_rows(X: Any, frame: Any, what: str = "X", whole_rows: bool = False
            ) -> tuple[da.Array, bool]:
    """``X`` as a lazy float array and whether the input was lazy.

    Row blocks may have unknown lengths (a dask frame's, or an array made
    from one): a lazy projection does not need them.

    Examples
    --------
    >>> Y, is_lazy = as_rows([[1.0, 2.0]], None)
    >>> Y.shape, is_lazy
    ((1, 2), False)
    """
    if isinstance(frame, Partitions):
        return X, True
    return as_dask_array(X, what=what, min_samples=1, unknown_rows=True, whole_rows=whole_rows)


def open_input(X: Any, whole_rows: bool = False, sample_dim: str | None = None) -> Any:
    """Zarr paths and xarray objects go through :mod:`kpca_dask.io`; anything else unchanged.

    A labelled input comes back as a DataArray with ``sample_dim`` (default:
    its first dimension) first.

    Examples
    --------
    >>> open_input([[1.0]])
    [[1.0]]
    """
    if isinstance(X, (str, os.PathLike)) or is_xarray(X):
        from ..io import open_array

        return open_array(X, whole_rows=whole_rows, sample_dim=sample_dim)
    return X


def as_fit_input(X: Any, min_samples: int = 2, whole_rows: bool = False) -> da.Array:
    """The training data as a validated dask array, with the chunks it was stored in
    (``whole_rows=True``: one chunk of features).

    Examples
    --------
    >>> as_fit_input([[1.0, 2.0], [3.0, 4.0]]).shape
    (2, 2)
    """
    if is_dask_frame(X):
        X = frame_to_array(X, lengths=True)  # row counts from metadata where kept
    elif is_frame(X):
        X = frame_to_numpy(X)
    X = open_input(X, whole_rows)
    X, _ = as_dask_array(X.data if is_xarray(X) else X, min_samples=min_samples,
                         whole_rows=whole_rows)
    return X


def row_range(rows: Any, n: int) -> tuple[int, int]:
    """``rows`` as a checked (start, stop) of an input of ``n`` rows; None means every row.

    Examples
    --------
    >>> row_range(None, 10), row_range((2, 5), 10)
    ((0, 10), (2, 5))
    """
    if rows is None:
        return 0, n
    valid = (isinstance(rows, (tuple, list)) and len(rows) == 2
             and all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in rows))
    if not valid or not 0 <= rows[0] < rows[1] <= n:
        raise InvalidParameterError(
            f"rows must be (start, stop) with 0 <= start < stop <= {n} (the rows of X); "
            f"got {rows!r}.")
    return int(rows[0]), int(rows[1])


def held_in_memory(X: Any) -> bool:
    """Whether ``X`` is data in this process (numpy, pandas, scipy.sparse, lists, an
    xarray object without dask), not a dask collection, a store or a path.

    Examples
    --------
    >>> import dask.array as da, numpy as np
    >>> held_in_memory(np.eye(2)), held_in_memory(da.eye(2)), held_in_memory("x.zarr")
    (True, False, False)
    """
    if isinstance(X, (str, os.PathLike)) or dask.is_dask_collection(X):
        return False
    if is_xarray(X):
        return X.chunks is None
    return not isinstance(X, (zarr.Array, zarr.Group))
