"""Inputs beyond Zarr: ``.npy``, Parquet, CSV, HDF5 and netCDF files.

Each reader returns a lazy dask array of row blocks (a Dataset for netCDF,
so that the labels survive), with every block's row count known before any
pass over the data: the landmarks are drawn from global row indices
(docs/design.md §2, reproducibility), which needs the row count up front.

* Parquet and CSV, from local paths or any fsspec URL: read by
  dask.dataframe (:mod:`kpca_dask.io.tables`), made an array by
  :mod:`kpca_dask.io.frames`.
* ``.npy``, local or from a URL: the header gives shape and dtype; each block
  reads its rows (a memory map locally, one ranged read from a URL).
* HDF5: the dataset's shape, dtype and chunks come from the file; each block
  reads a row slice. Local paths only.
* netCDF: opened with xarray (lazily indexed variables), chunked by rows.
  Local paths only.

HDF5 and netCDF stay local: their libraries read a file by many small seeks
(the chunk index, then each chunk), one request each on object storage, and
xarray keeps a netCDF file open across tasks, which a remote file object
cannot be shared for with worker processes. Convert them to Zarr (e.g.
``xarray.open_dataset(path).to_zarr(url)``), which reads from URLs by whole
chunks.

Nothing holds a file handle across tasks: a block opens the file itself, so
graphs pickle to distributed workers as a path plus an offset.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import dask
import dask.array as da
import numpy as np

from ..errors import InvalidInputError, NonNumericInputError
from ..validation import DEFAULT_BLOCK_ROWS

__all__ = ["FORMATS", "EXTENSIONS", "file_format", "open_file"]

Format = Literal["zarr", "npy", "parquet", "csv", "hdf5", "netcdf"]

#: The formats ``open_array(..., format=...)`` and ``--format`` accept.
FORMATS: tuple[str, ...] = ("zarr", "npy", "parquet", "csv", "hdf5", "netcdf")

#: File extensions and the format each one means.
EXTENSIONS: dict[str, str] = {
    ".zarr": "zarr", ".npy": "npy", ".parquet": "parquet", ".pq": "parquet", ".csv": "csv",
    ".h5": "hdf5", ".hdf5": "hdf5", ".hdf": "hdf5", ".he5": "hdf5",
    ".nc": "netcdf", ".nc4": "netcdf", ".netcdf": "netcdf",
}

#: Which optional package each format needs, for the error when it is missing.
_NEEDS = {"parquet": "pyarrow", "hdf5": "h5py"}


def file_format(source: str | os.PathLike, format: str | None = None) -> str:
    """The format of ``source``: ``format`` if given, else from the extension.

    A local directory is Parquet when it holds ``.parquet`` files and no Zarr
    metadata; anything without a known extension (a URL, a directory, a path
    that does not exist yet) is taken for Zarr, whose own errors then apply.

    Examples
    --------
    >>> file_format("data.parquet"), file_format("x.h5"), file_format("s3://b/x.zarr")
    ('parquet', 'hdf5', 'zarr')
    >>> file_format("table.txt", format="csv")
    'csv'
    """
    if format is not None:
        if format not in FORMATS:
            raise InvalidInputError(
                f"format={format!r} is not known; use one of {', '.join(FORMATS)}.")
        return format
    text = os.fspath(source)
    suffix = Path(text.rstrip("/")).suffix.lower()
    if suffix in EXTENSIONS:
        return EXTENSIONS[suffix]
    if "://" in text:
        return "zarr"
    path = Path(text).expanduser()
    if path.is_dir():
        zarr_metadata = any((path / name).exists() for name in ("zarr.json", ".zarray", ".zgroup"))
        return "parquet" if not zarr_metadata and _parquet_files(path) else "zarr"
    if path.is_file():
        known = ", ".join(sorted(EXTENSIONS))
        raise InvalidInputError(
            f"{text} has the extension {suffix or '(none)'!r}, which is not a known data "
            f"format ({known}); rename the file or say which format it is (format=..., or "
            "--format on the command line).")
    return "zarr"


def open_file(
    source: str | os.PathLike,
    *,
    format: str | None = None,
    array: str | None = None,
    columns: Sequence[str | int] | None = None,
    header: bool | None = None,
    sample_dim: str | None = None,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    filters: Any = None,
    storage_options: dict | None = None,
) -> Any:
    """Open a data file lazily by row blocks, or return None for Zarr.

    Returns a dask array for ``.npy``, Parquet, CSV and HDF5, an
    ``xarray.Dataset`` chunked by rows for netCDF (its labels kept), and None
    when ``source`` is Zarr (the caller opens it). See
    :func:`kpca_dask.io.open_array` for the parameters.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> path = tempfile.mkdtemp() + "/x.npy"
    >>> np.save(path, np.arange(12.0).reshape(6, 2))
    >>> open_file(path, block_rows=4).chunks
    ((4, 2), (2,))
    """
    kind = file_format(source, format)
    shown = os.fspath(source)
    if kind not in ("parquet", "csv") and (columns is not None or header is not None):
        option = "columns=" if columns is not None else "header="
        raise InvalidInputError(f"{option} applies to Parquet and CSV files, not to {shown}.")
    if filters is not None and kind != "parquet":
        raise InvalidInputError(f"filters= applies to Parquet files, not to {shown}.")
    if kind == "zarr":
        return None
    if kind in ("npy", "parquet", "csv") and array is not None:
        raise InvalidInputError(
            f"array={array!r} names an array in a Zarr group or an HDF5/netCDF file; "
            f"{shown} holds one table: drop it.")
    if block_rows < 1:
        raise InvalidInputError(f"block_rows must be >= 1; got {block_rows}.")
    remote = "://" in shown and not shown.startswith("file://")
    if kind in ("parquet", "csv"):
        return _read_table(shown, kind, columns, header, filters, storage_options, block_rows)
    if remote and kind in ("hdf5", "netcdf"):
        raise InvalidInputError(
            f"{shown}: {kind} files are read from local paths only (their libraries read by "
            "many small seeks, one request each on object storage); copy it locally or "
            "convert it to Zarr (xarray.open_dataset(path).to_zarr(url)), which is read from "
            "URLs. Parquet, CSV, .npy and Zarr are read from URLs.")
    if remote:
        return _read_remote_npy(shown, storage_options, block_rows)
    if storage_options:
        raise InvalidInputError(
            f"storage_options were given for the local path {shown!r}; they apply to fsspec "
            "URLs (s3://, gs://, memory://...) only.")
    path = Path(shown.removeprefix("file://")).expanduser().absolute()
    if not path.exists():
        raise FileNotFoundError(f"No such file: {shown}: check the path.")
    if kind == "npy":
        return _read_npy(path, shown, block_rows)
    if kind == "hdf5":
        return _read_hdf5(path, shown, array, block_rows)
    return _read_netcdf(path, shown, sample_dim, block_rows)


def _read_table(shown, kind, columns, header, filters, storage_options, block_rows):
    """Parquet or CSV through dask.dataframe, as a row-blocked array (row counts known)."""
    import pandas as pd

    from .frames import frame_to_array
    from .tables import read_table

    if kind == "parquet":
        _require("parquet")
    frame = read_table(shown, kind, columns=columns, header=header, filters=filters,
                       storage_options=storage_options, block_rows=block_rows)
    try:
        return frame_to_array(frame, what=shown, file=True)
    except pd.errors.ParserError as exc:  # CSV lengths are computed: the parse runs here
        raise InvalidInputError(
            f"{shown} is ragged or malformed: {' '.join(str(exc).split())}. Every line must "
            "have the same number of fields.") from None


def _require(kind: str):
    module = _NEEDS[kind]
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


def _two_d(shape, shown: str, what: str) -> None:
    if len(shape) != 2:
        raise InvalidInputError(
            f"{what} in {shown} has shape {tuple(shape)}; a 2-D (n_samples, n_features) "
            "array is needed.")


def _numeric_dtype(dtype: np.dtype, shown: str) -> np.dtype:
    if dtype.kind not in "biuf":
        raise NonNumericInputError(
            f"{shown} holds {dtype} values; kernel PCA needs numbers (int or float).")
    return dtype


# -- .npy --------------------------------------------------------------------


def _read_npy(path: Path, shown: str, block_rows: int) -> da.Array:
    try:
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise InvalidInputError(f"{shown} is not a readable .npy array: {exc}") from None
    _two_d(data.shape, shown, "The array")
    dtype = _numeric_dtype(data.dtype, shown)
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
    if not fs.exists(path):
        raise FileNotFoundError(f"No such file: {url}: check the path or URL.")
    with fs.open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(f)
        except ValueError as exc:
            raise InvalidInputError(f"{url} is not a readable .npy array: {exc}") from None
        offset = f.tell()
    _two_d(shape, url, "The array")
    dtype = _numeric_dtype(dtype, url)
    if fortran:
        raise InvalidInputError(
            f"{url} is stored in Fortran order, so its rows are not contiguous; save it in C "
            "order (np.save(path, np.ascontiguousarray(X))) or as Zarr.")
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


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.parquet")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts))


# -- HDF5 ----------------------------------------------------------------------


def _read_hdf5(path: Path, shown: str, array: str | None, block_rows: int) -> da.Array:
    h5py = _require("hdf5")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise InvalidInputError(f"{shown} is not a readable HDF5 file: {exc}") from None
    with f:
        name = _hdf5_dataset(f, array, shown, h5py)
        dataset = f[name]
        _two_d(dataset.shape, shown, f"The dataset {name!r}")
        dtype = _numeric_dtype(dataset.dtype, f"The dataset {name!r} in {shown}")
        n, p = dataset.shape
        step = block_rows
        if dataset.chunks:  # whole stored chunks per block
            step = max(1, round(block_rows / dataset.chunks[0])) * dataset.chunks[0]
    pieces = [(str(path), name, start, stop) for start, stop in _row_ranges(n, step)]
    return _from_blocks(_hdf5_block, pieces, [b - a for _, _, a, b in pieces], p, dtype,
                        f"{_name(path)}-{name}")


def _hdf5_dataset(f, array, shown, h5py) -> str:
    found = []
    f.visititems(lambda key, node: found.append(key)
                 if isinstance(node, h5py.Dataset) else None)
    if array is not None:
        if array.strip("/") not in found:
            raise InvalidInputError(f"{shown} has no dataset {array!r}; it has {found}.")
        return array.strip("/")
    two_d = [key for key in found if f[key].ndim == 2]
    if len(two_d) != 1:
        raise InvalidInputError(
            f"{shown} holds {len(two_d)} 2-D datasets ({two_d}); say which one to use "
            "(array=..., or --array).")
    return two_d[0]


def _hdf5_block(piece) -> np.ndarray:
    import h5py

    path, name, start, stop = piece
    with h5py.File(path, "r") as f:
        return f[name][start:stop]


# -- netCDF --------------------------------------------------------------------


def _read_netcdf(path: Path, shown: str, sample_dim: str | None, block_rows: int):
    import xarray as xr

    try:
        ds = xr.open_dataset(path)  # lazily indexed: nothing is read yet
    except (OSError, ValueError) as exc:
        raise InvalidInputError(
            f"{shown} could not be opened as netCDF ({' '.join(str(exc).split())}); netCDF-4 "
            "files need h5netcdf: pip install 'kpca-dask[formats]'.") from None
    chunks = {}
    for var in ds.data_vars.values():
        if var.ndim == 2:
            rows = sample_dim if sample_dim in var.dims else var.dims[0]
            stored = (var.encoding.get("chunksizes") or (None,))[var.dims.index(rows)]
            step = max(1, round(block_rows / stored)) * stored if stored else block_rows
            chunks.setdefault(rows, step)
    return ds.chunk({**{dim: -1 for dim in ds.sizes}, **chunks})
