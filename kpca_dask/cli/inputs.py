"""What a command reads: its data (:func:`open_data`) and the weights of ``fit --weights``.

Both are opened lazily before any worker starts, so that a wrong path, format
or coordinate fails at once. ``--no-decode-times`` opens a netCDF file with
xarray's ``decode_times=False``, as a Python user would, and hands the Dataset
to :func:`kpca_dask.io.open_array`. The weights become the ``weights``
parameter of :class:`~kpca_dask.KernelPCA`: a DataArray over a field's feature
dimensions, or one weight per column of an array.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from .parser import CommandError

__all__ = ["open_data", "fit_weights", "coslat_weights"]

def open_data(args: argparse.Namespace):
    """The data, opened lazily before any worker starts: a bad path fails here, at once.

    Examples
    --------
    >>> import tempfile
    >>> path = tempfile.mkdtemp() + "/x.npy"
    >>> np.save(path, np.ones((4, 2)))
    >>> args = argparse.Namespace(data=path, array=None, format=None, columns=None,
    ...                           header=None)
    >>> open_data(args).shape
    (4, 2)
    """
    from ..io import open_array

    sample_dim = getattr(args, "sample_dim", None)
    if not getattr(args, "decode_times", True):
        return open_array(_undecoded_netcdf(args), array=args.array, sample_dim=sample_dim)
    return open_array(args.data, array=args.array, format=args.format, columns=args.columns,
                      header=args.header, sample_dim=sample_dim)


def _undecoded_netcdf(args: argparse.Namespace):
    """A netCDF file as a Dataset whose times are the numbers stored, chunked by rows as
    :func:`kpca_dask.io.open_array` chunks a netCDF file (whole stored chunks)."""
    import xarray as xr

    from ..errors import InvalidInputError, about
    from ..io.formats import file_format
    from ..validation import DEFAULT_BLOCK_ROWS

    kind = file_format(args.data, args.format)
    if kind != "netcdf":
        raise CommandError(f"--no-decode-times applies to netCDF files; {args.data} is {kind}: "
                           "leave it out.")
    if args.columns is not None or args.header is not None:
        raise CommandError("--columns and --header apply to Parquet and CSV files, not to "
                           f"the netCDF file {args.data}: leave them out.")
    if not os.path.isfile(args.data):
        raise FileNotFoundError(f"No such file: {args.data}: check the path.")
    with about(os.fspath(args.data)):
        try:
            ds = xr.open_dataset(args.data, decode_times=False)  # lazily indexed
        except (OSError, ValueError) as exc:
            raise InvalidInputError(
                f"could not be opened as netCDF ({' '.join(str(exc).split())}).") from None
    chunks = {}
    for var in ds.data_vars.values():
        rows = args.sample_dim if args.sample_dim in var.dims else var.dims[0] if var.dims else None
        if rows is not None and var.ndim >= 2:
            stored = (var.encoding.get("chunksizes") or (None,) * var.ndim)[var.dims.index(rows)]
            step = max(1, round(DEFAULT_BLOCK_ROWS / stored)) * stored if stored else (
                DEFAULT_BLOCK_ROWS)
            chunks.setdefault(rows, step)
    return ds.chunk({**{dim: -1 for dim in ds.sizes}, **chunks})


def fit_weights(spec: str | None, X: Any) -> Any:
    """The ``weights`` of the fit that ``--weights spec`` asks for, over the opened data ``X``.

    ``"coslat"``: :func:`coslat_weights` of ``X``. A file: netCDF or xarray
    Zarr (its one variable, over some of ``X``'s feature dimensions), or a
    ``.npy`` or plain Zarr array of the feature dimensions' shape (one weight a
    column for an array or table).

    Examples
    --------
    >>> import xarray as xr
    >>> X = xr.DataArray(np.zeros((5, 2, 3)), dims=("time", "lat", "lon"),
    ...                  coords={"lat": [0.0, 60.0]})
    >>> fit_weights("coslat", X).values.round(4).tolist()
    [1.0, 0.7071]
    >>> fit_weights(None, X) is None
    True
    """
    if spec is None:
        return None
    if spec == "coslat":
        return coslat_weights(X)
    values = _read_weights(spec)
    if type(values).__module__.split(".")[0] == "xarray" or not _is_labelled(X):
        return values  # the library checks them against X's dimensions and coordinates
    import xarray as xr

    dims = X.dims[1:]  # open_array puts the sample dimension first
    shape = tuple(X.sizes[d] for d in dims)
    if values.shape != shape:
        raise CommandError(
            f"--weights {spec} has shape {values.shape}, but the feature dimensions "
            f"{', '.join(map(str, dims))} of {X.name or 'the data'} have shape {shape}; give "
            "the weights in that shape, or as a netCDF or xarray Zarr variable whose "
            "dimensions are named.")
    return xr.DataArray(values, dims=dims, coords={d: X.indexes[d] for d in dims
                                                   if d in X.indexes})


def coslat_weights(X: Any):
    """sqrt(cos(latitude)), from the latitude coordinate of the field ``X``
    (:func:`kpca_dask.io.preprocessing.latitude.field_coslat_weights`, its sample dimension first).

    Examples
    --------
    >>> import xarray as xr
    >>> X = xr.DataArray(np.zeros((5, 3)), dims=("time", "lat"),
    ...                  coords={"lat": np.float32([-90.0, 0.0, 90.0])})
    >>> coslat_weights(X).values.round(6).tolist()
    [0.0, 1.0, 0.0]
    """
    from ..errors import InvalidInputError
    from ..io.preprocessing.latitude import field_coslat_weights

    if not _is_labelled(X):
        raise CommandError("--weights coslat needs a field with a latitude coordinate "
                           "(netCDF or xarray Zarr); this data has no coordinates. Give a "
                           "file of weights instead.")
    try:
        return field_coslat_weights(X, X.dims[0], option="--weights coslat",
                                    instead="give a file of weights instead")
    except InvalidInputError as error:
        raise CommandError(str(error)) from None


def _is_labelled(X) -> bool:
    return type(X).__module__.split(".")[0] == "xarray"


def _read_weights(path: str):
    """The weights stored at ``path``: a DataArray (netCDF, xarray Zarr) or a numpy array."""
    import xarray as xr

    from ..errors import InvalidInputError, about
    from ..io.formats import file_format

    kind = file_format(path)
    if kind not in ("netcdf", "zarr", "npy"):
        raise CommandError(f"--weights takes 'coslat', or a netCDF, Zarr or .npy file; {path} "
                           f"is {kind}.")
    if kind != "zarr" and not os.path.isfile(path):
        raise FileNotFoundError(f"No such file: {path}: check the path of --weights.")
    with about(path):
        if kind == "npy":
            return np.load(path)
        if kind == "netcdf":
            ds = xr.open_dataset(path)
        else:
            import zarr

            node = zarr.open(path, mode="r")
            if isinstance(node, zarr.Array):
                return np.asarray(node[...])
            ds = xr.open_zarr(path, consolidated=False)  # read as stored, with or without
        names = list(ds.data_vars)
        if len(names) != 1:
            raise InvalidInputError(f"a file of --weights must hold one variable; it holds "
                                    f"{len(names)} ({', '.join(map(str, names)) or 'none'}).")
        return ds[names[0]].load()
