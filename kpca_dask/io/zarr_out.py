"""Zarr outputs, written block by block and never seen half-written.

A dask array is computed one block per task and each block written as one
Zarr chunk; it is never held whole. Every output goes through
:func:`kpca_dask.io.atomic.staged_output`: local outputs appear at their
path complete or not at all, outputs on object storage carry an
"incomplete" mark until their last chunk is written.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr
import zarr

from .._parallel import capped_blas
from .atomic import INCOMPLETE, WRITE_STATE_ATTR, staged_output
from .checksums import checksummed_codecs
from .locations import PathOrURL, StoreLocation

__all__ = ["write_array", "write_embedding", "write_group"]

#: Name of the variable when an unnamed DataArray is written to Zarr.
DEFAULT_VARIABLE = "embedding"



def _regular_chunks(X: da.Array) -> da.Array:
    """Zarr needs equal chunks (the last may be shorter); rechunk only if not so."""
    regular = all(all(c == chunks[0] for c in chunks[:-1]) and chunks[-1] <= chunks[0]
                  for chunks in X.chunks)
    return X if regular else X.rechunk(tuple(max(chunks) for chunks in X.chunks))


def _as_lazy(data) -> da.Array:
    if isinstance(data, da.Array):
        return _regular_chunks(data)
    data = np.asarray(data)
    return da.from_array(data, chunks=data.shape or ())


def write_array(
    data,
    path: PathOrURL,
    *,
    overwrite: bool = False,
    name: str | None = None,
    attrs: Mapping[str, Any] | None = None,
    storage_options: dict | None = None,
) -> str:
    """Write an array to Zarr block by block, atomically.

    Parameters
    ----------
    data : dask array, numpy array or xarray.DataArray
        A dask array is computed one block per task and each block written
        as one Zarr chunk; it is never held whole. A DataArray is written as
        an xarray Zarr group (with its coordinates); other input as a plain
        Zarr array.
    path : str or path-like
        Local path or fsspec URL of the store to create.
    overwrite : bool, default=False
        Replace an existing store at ``path``; otherwise raise
        :class:`~kpca_dask.errors.OutputExistsError`.
    name : str, optional
        Variable name for DataArray input (default: its name or "embedding").
    attrs : mapping, optional
        JSON-serialisable attributes for the array.
    storage_options : dict, optional
        Passed to fsspec for URLs.

    Returns
    -------
    str
        The path written.

    Examples
    --------
    >>> import tempfile
    >>> out = tempfile.mkdtemp() + "/y.zarr"
    >>> _ = write_array(da.ones((10, 2), chunks=(4, 2)), out)
    >>> from kpca_dask.io import open_array
    >>> open_array(out).sum().compute()
    np.float64(20.0)
    """
    with staged_output(path, overwrite, storage_options) as target:
        if isinstance(data, xr.DataArray):
            _write_data_array(data, target, name, attrs)
        else:
            X = _as_lazy(data)
            z = zarr.create_array(
                target.url, shape=X.shape, dtype=X.dtype,
                chunks=tuple(c[0] if c else 1 for c in X.chunks),
                attributes={**(attrs or {}), WRITE_STATE_ATTR: INCOMPLETE},
                zarr_format=3, **target.zarr_kwargs())
            with capped_blas(X):
                da.store(X, z, lock=False, compute=True)
    return os.fspath(path)


def _write_data_array(data: xr.DataArray, target: StoreLocation, name, attrs) -> None:
    variable = name or (str(data.name) if data.name is not None else DEFAULT_VARIABLE)
    ds = data.to_dataset(name=variable)
    if isinstance(data.data, da.Array):
        ds[variable] = ds[variable].copy(data=_regular_chunks(data.data))
    ds[variable].attrs.update(attrs or {})
    ds.attrs[WRITE_STATE_ATTR] = INCOMPLETE
    for var in ds.variables.values():
        var.encoding.pop("chunks", None)  # chunks follow the dask blocks being written
    with capped_blas(ds[variable].data), warnings.catch_warnings():
        # Consolidated (the children's metadata inline in the root's zarr.json, written once
        # the data are): xarray.open_zarr(path) then opens the output without its warning
        # that it fell back to reading each array's metadata. zarr warns that the Zarr 3
        # specification has no such field yet; zarr-python and xarray read it.
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not "
                                "part", category=UserWarning)
        ds.to_zarr(target.url, mode="w-", zarr_format=3, consolidated=True,
                   storage_options=target.storage_options, compute=True)


def write_embedding(Y, path: PathOrURL, *, overwrite: bool = False,
                    storage_options: dict | None = None) -> str:
    """Write the output of ``KernelPCA.transform`` to Zarr, block by block, atomically.

    A dask array is written as a plain (n_samples, n_components) Zarr array;
    a DataArray as an xarray group that keeps its sample coordinates. See
    :func:`write_array` for the parameters.

    Examples
    --------
    >>> import tempfile
    >>> from kpca_dask import KernelPCA
    >>> X = da.random.default_rng(0).normal(size=(400, 3), chunks=(100, 3))
    >>> Y = KernelPCA(n_components=2, n_landmarks=50, random_state=0).fit(X).transform(X)
    >>> out = write_embedding(Y, tempfile.mkdtemp() + "/embedding.zarr")
    >>> from kpca_dask.io import open_array
    >>> open_array(out).shape
    (400, 2)
    """
    return write_array(Y, path, overwrite=overwrite, storage_options=storage_options)


def write_group(
    arrays: Mapping[str, Any],
    path: PathOrURL,
    *,
    attrs: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    storage_options: dict | None = None,
) -> str:
    """Write named arrays and JSON attributes as one Zarr group, atomically.

    numpy arrays are stored as one chunk each; dask arrays keep their chunks
    and are computed together in one pass. Every chunk carries a crc32c
    checksum (:mod:`kpca_dask.io.checksums`).

    Examples
    --------
    >>> import tempfile
    >>> out = write_group({"a": np.eye(2)}, tempfile.mkdtemp() + "/g.zarr", attrs={"k": 1})
    >>> from kpca_dask.io import open_group
    >>> sorted(open_group(out).array_keys())
    ['a']
    """
    with staged_output(path, overwrite, storage_options) as target:
        group = zarr.open_group(target.url, mode="w-", zarr_format=3,
                                attributes={**(attrs or {}), WRITE_STATE_ATTR: INCOMPLETE},
                                **target.zarr_kwargs())
        sources, targets = [], []
        for key, value in arrays.items():
            if isinstance(value, da.Array):
                value = _regular_chunks(value)
                z = group.create_array(key, shape=value.shape, dtype=value.dtype,
                                       chunks=tuple(c[0] if c else 1 for c in value.chunks),
                                       compressors=checksummed_codecs())
                sources.append(value)
                targets.append(z)
            else:
                value = np.asarray(value)
                group.create_array(key, data=value, compressors=checksummed_codecs())
        if sources:
            da.store(sources, targets, lock=False, compute=True)
    return os.fspath(path)
