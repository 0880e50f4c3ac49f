"""Readers of array files: ``.npy`` (local or URL), HDF5 and netCDF (local).

Each returns a lazy dask array of row blocks (a Dataset for netCDF, so that
the labels survive) whose row counts are known before any pass. Nothing
holds a file handle across tasks: a block opens the file itself, so graphs
pickle to distributed workers as a path plus an offset. The table that
chooses among them is :data:`kpca_dask.io.formats.READERS`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np

from ..errors import InvalidInputError, NonNumericInputError

__all__ = ["ReadRequest", "read_npy_file", "read_hdf5_file", "read_netcdf_file",
           "require_package"]


@dataclass(frozen=True)
class ReadRequest:
    """What :func:`kpca_dask.io.formats.open_file` was asked to read, as every reader takes it.

    Readers raise without naming the file: ``open_file`` names it once
    (:func:`kpca_dask.errors.about`).
    """

    kind: str  # the format
    source: str  # the path or URL as given (a URL is read from it)
    path: Path | None  # the local file, or None for a URL
    array: str | None
    columns: Sequence[str | int] | None
    header: bool | None
    filters: Any
    sample_dim: str | None
    block_rows: int
    storage_options: dict | None


def require_package(module: str, kind: str):
    """Import the optional package ``module`` that reading ``kind`` files needs."""
    try:
        return __import__(module)
    except ImportError:
        raise InvalidInputError(
            f"Reading {kind} files needs the package {module!r}, which is not installed: "
            "pip install 'kpca-dask[formats]'.") from None


def _name(path: Path) -> str:
    return f"{path.name}-{os.stat(path).st_mtime_ns}-{os.stat(path).st_size}"


def _from_blocks(read_block, pieces: list, rows: list[int], n_features: int, dtype,
                 name: str) -> da.Array:
    """A dask array whose block i is ``read_block(pieces[i])`` with ``rows[i]`` rows.

    The key names the reader (``npy_block-<token>``...), so the dashboard says
    what runs; the token covers the file's name, size and modification time,
    so a changed file is never taken for the one a checkpoint read.
    """
    if not pieces:
        return da.zeros((0, n_features), dtype=dtype)
    token = dask.base.tokenize(name, pieces, rows, n_features, str(dtype))
    key = f"{read_block.__name__.lstrip('_')}-{token}"
    graph = {(key, i, 0): (read_block, piece) for i, piece in enumerate(pieces)}
    return da.Array(graph, key, (tuple(rows), (n_features,)), dtype=dtype)


def _row_ranges(n: int, step: int) -> list[tuple[int, int]]:
    return [(start, min(start + step, n)) for start in range(0, n, step)]


def _two_d(shape, what: str = "the array") -> None:
    if len(shape) != 2:
        raise InvalidInputError(
            f"{what} has shape {tuple(shape)}; a 2-D (n_samples, n_features) array is needed.")


def _numeric_dtype(dtype: np.dtype, what: str = "the array") -> np.dtype:
    if dtype.kind not in "biuf":
        raise NonNumericInputError(
            f"{what} holds {dtype} values; kernel PCA needs numbers (int or float).")
    return dtype


# -- .npy --------------------------------------------------------------------


def read_npy_file(request: ReadRequest) -> da.Array:
    """A ``.npy`` file: memory-mapped locally, by ranged reads from a URL."""
    if request.path is None:
        return _read_remote_npy(request.source, request.storage_options, request.block_rows)
    return _read_npy(request.path, request.block_rows)


def _read_npy(path: Path, block_rows: int) -> da.Array:
    try:
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise InvalidInputError(f"not a readable .npy array: {exc}") from None
    _two_d(data.shape)
    dtype = _numeric_dtype(data.dtype)
    n, p = data.shape
    pieces = [(str(path), start, stop) for start, stop in _row_ranges(n, block_rows)]
    return _from_blocks(_npy_block, pieces, [b - a for _, a, b in pieces], p, dtype,
                        _name(path))


def _npy_block(piece) -> np.ndarray:
    path, start, stop = piece
    return np.array(np.load(path, mmap_mode="r")[start:stop])


def _read_remote_npy(url: str, storage_options: dict | None, block_rows: int) -> da.Array:
    """A ``.npy`` file at a URL: its header read once, then one ranged read per block."""
    from .tables import url_filesystem

    fs, path = url_filesystem(url, storage_options)
    if not fs.exists(path):  # a builtin error: it names the file itself
        raise FileNotFoundError(f"No such file: {url}: check the path or URL.")
    with fs.open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(f)
        except ValueError as exc:
            raise InvalidInputError(f"not a readable .npy array: {exc}") from None
        offset = f.tell()
    _two_d(shape)
    dtype = _numeric_dtype(dtype)
    if fortran:
        raise InvalidInputError(
            "the array is stored in Fortran order, so its rows are not contiguous; save it in "
            "C order (np.save(path, np.ascontiguousarray(X))) or as Zarr.")
    n, p = shape
    row_bytes = p * dtype.itemsize
    pieces = [(fs, path, offset + start * row_bytes, stop - start, p, dtype.str)
              for start, stop in _row_ranges(n, block_rows)]
    return _from_blocks(_remote_npy_block, pieces, [piece[3] for piece in pieces], p, dtype,
                        f"{url}-{fs.info(path).get('ETag', fs.info(path).get('size'))}")


def _remote_npy_block(piece) -> np.ndarray:
    fs, path, start, rows, p, dtype = piece
    dtype = np.dtype(dtype)
    data = fs.cat_file(path, start=start, end=start + rows * p * dtype.itemsize)
    return np.frombuffer(data, dtype=dtype).reshape(rows, p).copy()


# -- HDF5 ----------------------------------------------------------------------


def read_hdf5_file(request: ReadRequest) -> da.Array:
    """An HDF5 dataset, a row slice per block (whole stored chunks)."""
    path, array, block_rows = request.path, request.array, request.block_rows
    h5py = require_package("h5py", "hdf5")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise InvalidInputError(f"not a readable HDF5 file: {exc}") from None
    with f:
        name = _hdf5_dataset(f, array, h5py)
        dataset = f[name]
        _two_d(dataset.shape, f"the dataset {name!r}")
        dtype = _numeric_dtype(dataset.dtype, f"the dataset {name!r}")
        n, p = dataset.shape
        step = block_rows
        if dataset.chunks:  # whole stored chunks per block
            step = max(1, round(block_rows / dataset.chunks[0])) * dataset.chunks[0]
    pieces = [(str(path), name, start, stop) for start, stop in _row_ranges(n, step)]
    return _from_blocks(_hdf5_block, pieces, [b - a for _, _, a, b in pieces], p, dtype,
                        f"{_name(path)}-{name}")


def _hdf5_dataset(f, array, h5py) -> str:
    found = []
    f.visititems(lambda key, node: found.append(key)
                 if isinstance(node, h5py.Dataset) else None)
    if array is not None:
        if array.strip("/") not in found:
            raise InvalidInputError(f"the file has no dataset {array!r}; it has {found}.")
        return array.strip("/")
    two_d = [key for key in found if f[key].ndim == 2]
    if len(two_d) != 1:
        raise InvalidInputError(
            f"the file holds {len(two_d)} 2-D datasets ({two_d}); say which one to use "
            "(array=..., or --array).")
    return two_d[0]


def _hdf5_block(piece) -> np.ndarray:
    import h5py

    path, name, start, stop = piece
    with h5py.File(path, "r") as f:
        return f[name][start:stop]


# -- netCDF --------------------------------------------------------------------


def read_netcdf_file(request: ReadRequest):
    """A netCDF file as a Dataset chunked by rows, its labels kept."""
    import xarray as xr

    path, sample_dim, block_rows = request.path, request.sample_dim, request.block_rows
    try:
        ds = xr.open_dataset(path)  # lazily indexed: nothing is read yet
    except (OSError, ValueError) as exc:
        raise InvalidInputError(
            f"could not be opened as netCDF ({' '.join(str(exc).split())}); netCDF-4 files "
            "need h5netcdf: pip install 'kpca-dask[formats]'.") from None
    chunks = {}
    for var in ds.data_vars.values():
        if var.ndim == 2:
            rows = sample_dim if sample_dim in var.dims else var.dims[0]
            stored = (var.encoding.get("chunksizes") or (None,))[var.dims.index(rows)]
            step = max(1, round(block_rows / stored)) * stored if stored else block_rows
            chunks.setdefault(rows, step)
    return ds.chunk({**{dim: -1 for dim in ds.sizes}, **chunks})
