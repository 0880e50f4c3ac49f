"""Opening inputs: Zarr and xarray, and every other source through one entry point.

Inputs (:func:`open_array`) are Zarr arrays by path or fsspec URL, a Zarr
group plus an array name, xarray DataArrays and Dataset variables, dask
arrays and numpy arrays, and the files of :mod:`kpca_dask.io.formats`
(``.npy``, Parquet, CSV, HDF5, netCDF). Chunks are kept as stored, along
the features too: the kernels are sums over feature chunks (docs/design.md
§12).

:func:`open_array` and :func:`open_group` refuse an output that kpca-dask is
still writing (:mod:`kpca_dask.io.atomic`); the writers are in
:mod:`kpca_dask.io.zarr_out`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np
import xarray as xr
import zarr
from dask.array.core import PerformanceWarning

from ..errors import InvalidInputError, InvalidParameterError, about
from ..validation import DEFAULT_BLOCK_ROWS, one_feature_chunk
from .atomic import COMPLETE, WRITE_STATE_ATTR
from .formats import open_file
from .frames import frame_to_array, frame_to_numpy, is_dask_frame, is_frame, select_columns
from .locations import PathOrURL, StoreLocation, store_location
from .sparse_files import is_sparse_source, open_sparse

__all__ = ["open_array", "open_group"]


# -- reading -----------------------------------------------------------------


def _open_node(where: StoreLocation, text: str):
    """The Zarr array or group at ``where`` (given as ``text``), refusing an incomplete output.

    Its errors name no place: the caller names it (:func:`kpca_dask.errors.about`),
    but for the builtin FileNotFoundError, which names ``text`` itself.
    """
    if not where.exists():
        raise FileNotFoundError(f"No Zarr store at {text}: check the path or URL.")
    try:
        node = zarr.open(where.url, mode="r", **where.zarr_kwargs())
    except zarr.errors.NodeNotFoundError:
        raise InvalidInputError(
            "it exists but is not a Zarr array or group (no zarr.json / .zarray found)."
        ) from None
    state = node.attrs.get(WRITE_STATE_ATTR)
    if state is not None and state != COMPLETE:
        raise InvalidInputError(
            "an incomplete kpca-dask output: its writer stopped before finishing (or is "
            "still writing). Delete it and write it again."
        )
    return node


def open_group(path: PathOrURL, *, storage_options: dict | None = None) -> zarr.Group:
    """Open a Zarr group read-only, refusing one kpca-dask has not finished writing.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from kpca_dask.io import write_group
    >>> out = tempfile.mkdtemp() + "/g.zarr"
    >>> _ = write_group({"x": np.arange(3.0)}, out, attrs={"note": "hi"})
    >>> open_group(out).attrs["note"], open_group(out)["x"][:].tolist()
    ('hi', [0.0, 1.0, 2.0])
    """
    text = os.fspath(path)
    with about(text):
        node = _open_node(store_location(path, storage_options), text)
        if not isinstance(node, zarr.Group):
            raise InvalidInputError("a Zarr array, but a Zarr group was expected.")
    return node


def open_array(
    source: Any, *, array: str | None = None, sample_dim: str | None = None,
    feature_dim: str | None = None, storage_options: dict | None = None,
    block_rows: int = DEFAULT_BLOCK_ROWS, format: str | None = None,
    columns: Sequence[str | int] | None = None, header: bool | None = None, filters: Any = None,
    whole_rows: bool = False,
) -> da.Array | xr.DataArray:
    """Open data for fitting or transforming as a lazy (n_samples, n_features) array.

    Parameters
    ----------
    source : path, URL, Zarr node, xarray object, array, DataFrame or sparse matrix
        Zarr by path or fsspec URL; a file of :mod:`kpca_dask.io.formats`
        (Parquet, CSV, ``.npy``, HDF5, netCDF); a pandas or dask DataFrame; a
        scipy.sparse matrix or ``.npz`` file (CSR blocks).
    array : str, optional
        The array of a Zarr group or HDF5 file, or variable of a Dataset or
        netCDF file (needed only when there are several 2-D ones).
    sample_dim, feature_dim : str, optional
        Dimension names of xarray input (default: samples first).
    storage_options : dict, optional
        Passed to fsspec for URLs (credentials, endpoint...).
    block_rows : int, default=20000
        Rows per block of numpy input and of files (whole stored chunks).
    format : {"zarr", "npy", "parquet", "csv", "hdf5", "netcdf"}, optional
        The format of a path, when its extension does not say it.
    columns, filters, header
        Tables: the columns to use, in order (default: all, numeric); Parquet
        row filters (as ``dask.dataframe.read_parquet``); whether a CSV's
        first line names the columns. See the guide's "Data formats" page.
    whole_rows : bool, default=False
        One chunk of features. By default the stored chunks along the
        features of a Zarr array or dask array are kept: the named kernels
        sum over them, and a precomputed kernel matrix reads only the
        landmark columns.

    Returns
    -------
    dask.array.Array or xarray.DataArray
        A DataArray (sample_dim, feature_dim) for labelled input, else a dask
        array with the stored chunks.

    Examples
    --------
    >>> import tempfile, numpy as np, zarr
    >>> path = tempfile.mkdtemp() + "/x.zarr"
    >>> _ = zarr.create_array(path, data=np.arange(30.0).reshape(10, 3), chunks=(4, 3))
    >>> open_array(path).chunks
    ((4, 4, 2), (3,))
    """
    if isinstance(source, (xr.Dataset, xr.DataArray)):
        return _open_labelled(source, array, sample_dim, feature_dim)
    if isinstance(source, da.Array):
        return one_feature_chunk(source, "The dask array", stacklevel=4) if whole_rows else source
    if is_frame(source):  # pandas or dask DataFrame: kpca_dask.io.frames
        return _open_frame(select_columns(source, columns), block_rows)
    if is_sparse_source(source):  # a scipy.sparse matrix or a save_npz file
        return open_sparse(source, block_rows=block_rows)
    if isinstance(source, (str, os.PathLike)):
        with about(os.fspath(source)):
            return _open_path(source, format=format, array=array, columns=columns,
                              header=header, sample_dim=sample_dim, feature_dim=feature_dim,
                              block_rows=block_rows, filters=filters,
                              storage_options=storage_options, whole_rows=whole_rows)
    if isinstance(source, (zarr.Array, zarr.Group)):
        with about(repr(source)):
            return _from_zarr_node(source, repr(source), array, None, sample_dim, feature_dim,
                                   whole_rows)
    return _wrap_numpy(np.asarray(source), block_rows)


def _open_labelled(source, array, sample_dim, feature_dim) -> xr.DataArray:
    if isinstance(source, xr.Dataset):
        source = _dataset_variable(source, array)
    return _oriented(source, sample_dim, feature_dim)


def _wrap_numpy(data: np.ndarray, block_rows: int) -> da.Array:
    return da.from_array(data, chunks=(min(block_rows, max(len(data), 1)),) + data.shape[1:])


def _open_frame(frame, block_rows: int) -> da.Array:
    if is_dask_frame(frame):
        return frame_to_array(frame)
    return da.from_array(frame_to_numpy(frame), chunks=(block_rows, -1))


def _open_path(source, *, format, array, columns, header, sample_dim, feature_dim, block_rows,
               filters, storage_options, whole_rows=False):
    """A path or URL: a file of :mod:`kpca_dask.io.formats`, else a Zarr store."""
    opened = open_file(source, format=format, array=array, columns=columns, header=header,
                       sample_dim=sample_dim, block_rows=block_rows, filters=filters,
                       storage_options=storage_options)
    if isinstance(opened, xr.Dataset):  # netCDF: labelled like a Dataset
        return open_array(opened, array=array, sample_dim=sample_dim, feature_dim=feature_dim)
    if opened is not None:
        return one_feature_chunk(opened, os.fspath(source), stacklevel=4) if whole_rows else opened
    text = os.fspath(source)
    where = store_location(source, storage_options)
    return _from_zarr_node(_open_node(where, text), text, array, where, sample_dim,
                           feature_dim, whole_rows)


def _from_zarr_node(node, label, name, where, sample_dim, feature_dim, whole_rows=False):
    """``node`` (named ``label``: in the dask name, and in the warning, which no
    :func:`~kpca_dask.errors.about` names) as a dask array or a labelled DataArray."""
    if isinstance(node, zarr.Group):
        z = _group_array(node, name)
        if z.metadata.zarr_format == 3 and z.metadata.dimension_names and where is not None:
            # Written by xarray: open it as labelled data, coordinates and all.
            ds = xr.open_zarr(where.url, consolidated=False, zarr_format=3,
                              storage_options=where.storage_options)
            return _oriented(ds[z.basename], sample_dim, feature_dim)
    elif name is not None:
        raise InvalidInputError(f"a Zarr array, not a group; drop array={name!r}.")
    else:
        z = node
    if z.ndim != 2:
        raise InvalidInputError(
            f"the Zarr array has shape {z.shape}; a 2-D (n_samples, n_features) array is "
            "needed.")
    if whole_rows and z.chunks[1] < z.shape[1]:
        warnings.warn(
            f"The Zarr array {label} is chunked along the feature axis ({z.chunks[1]} of "
            f"{z.shape[1]} columns per chunk); each row block reads several chunks. Store it "
            f"with chunks=({z.chunks[0]}, {z.shape[1]}) to avoid this.",
            PerformanceWarning, stacklevel=3)
    chunks = (z.chunks[0], z.shape[1]) if whole_rows else z.chunks
    return da.from_array(z, chunks=chunks, name=f"zarr-{_token(z, label)}", inline_array=True)


def _token(z, label) -> str:
    return dask.base.tokenize(label, z.shape, z.chunks, str(z.dtype), z.attrs.asdict())


def _group_array(group: zarr.Group, name: str | None):
    arrays = dict(group.arrays())
    if name is not None:
        if name not in arrays:
            raise InvalidInputError(
                f"the Zarr group has no array {name!r}; it has {sorted(arrays)}.")
        return arrays[name]
    candidates = [k for k, v in arrays.items() if v.ndim == 2]
    if not candidates:  # a field written by xarray: its one array of more dimensions
        candidates = [k for k, v in arrays.items() if v.ndim > 2]
    if len(candidates) != 1:
        raise InvalidInputError(
            f"the Zarr group holds {len(candidates)} 2-D arrays "
            f"({sorted(candidates)}); say which one to use (array=..., or --array).")
    return arrays[candidates[0]]


def _dataset_variable(ds: xr.Dataset, name: str | None) -> xr.DataArray:
    if name is not None:
        if name not in ds.data_vars:
            raise InvalidInputError(
                f"the Dataset has no data variable {name!r}; it has "
                f"{sorted(map(str, ds.data_vars))}.")
        return ds[name]
    # Cell bounds of coordinates (CF's "bounds" attribute) are not data.
    bounds = {v.attrs.get("bounds") for v in ds.variables.values()}
    data = {k: v for k, v in ds.data_vars.items() if k not in bounds}
    two_d = [k for k, v in data.items() if v.ndim == 2]
    if not two_d:  # a field: the one variable of two or more dimensions
        two_d = [k for k, v in data.items() if v.ndim >= 2]
    if len(two_d) != 1:
        raise InvalidInputError(
            f"the Dataset holds {len(two_d)} data variables of two or more dimensions "
            f"({sorted(map(str, two_d))}); say which one to use (array=...).")
    return ds[two_d[0]]


def _oriented(X: xr.DataArray, sample_dim, feature_dim) -> xr.DataArray:
    """``X`` with dims (sample_dim, feature_dim), chunked as it comes; a field of more
    dimensions with ``sample_dim`` first (its feature dimensions are stacked by
    :mod:`kpca_dask.io.preprocessing.fields`)."""
    if X.ndim > 2 and feature_dim is None:
        if sample_dim is not None and sample_dim not in X.dims:
            raise InvalidParameterError(f"sample_dim={sample_dim!r} is not a dimension of the "
                                        f"DataArray (its dims are {X.dims}).")
        return X.transpose(sample_dim or X.dims[0], ...)
    if X.ndim != 2:
        raise InvalidInputError(
            f"The DataArray has dims {X.dims}; a 2-D (sample, feature) array is needed.")
    sample_dim = sample_dim or (X.dims[0] if feature_dim != X.dims[0] else X.dims[1])
    feature_dim = feature_dim or next(d for d in X.dims if d != sample_dim)
    for role, dim in (("sample_dim", sample_dim), ("feature_dim", feature_dim)):
        if dim not in X.dims:
            raise InvalidInputError(f"{role}={dim!r} is not a dimension of the DataArray "
                                    f"(its dims are {X.dims}).")
    if sample_dim == feature_dim:
        raise InvalidInputError(f"sample_dim and feature_dim are both {sample_dim!r}.")
    return X.transpose(sample_dim, feature_dim)
