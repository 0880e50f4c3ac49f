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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.array as da

from ..errors import InvalidInputError, about
from ..validation import DEFAULT_BLOCK_ROWS
from .array_files import (
    ReadRequest,
    read_hdf5_file,
    read_netcdf_file,
    read_npy_file,
    require_package,
)

__all__ = ["READERS", "Reader", "FORMATS", "EXTENSIONS", "file_format", "open_file"]

@dataclass(frozen=True)
class Reader:
    """How one format is read: its extensions, where from, which options apply."""

    title: str  # its name in messages
    extensions: tuple[str, ...]
    from_urls: bool  # False: local paths only (see the module docstring)
    options: frozenset[str]  # the options of open_array that apply (array, columns, ...)
    read: Callable[[ReadRequest], Any] | None  # None: Zarr, opened by the caller
    package: str | None = None  # the optional package it needs


def _reader_table() -> dict[str, Reader]:
    # Built by a function so the readers below are defined first.
    return {
        "zarr": Reader("Zarr", (".zarr",), True, frozenset({"array"}), None),
        "npy": Reader(".npy", (".npy",), True, frozenset(), read_npy_file),
        "parquet": Reader("Parquet", (".parquet", ".pq"), True,
                          frozenset({"columns", "filters"}), _read_table, "pyarrow"),
        "csv": Reader("CSV", (".csv",), True, frozenset({"columns", "header"}), _read_table),
        "hdf5": Reader("HDF5", (".h5", ".hdf5", ".hdf", ".he5"), False, frozenset({"array"}),
                       read_hdf5_file, "h5py"),
        "netcdf": Reader("netCDF", (".nc", ".nc4", ".netcdf"), False, frozenset({"array"}),
                         _read_netcdf),
    }


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
        with about(text):
            raise InvalidInputError(
                f"the extension {suffix or '(none)'!r} is not a known data format ({known}); "
                "rename the file or say which format it is (format=..., or --format on the "
                "command line).")
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
    text = os.fspath(source)
    with about(text):
        kind = file_format(source, format)
        reader = READERS[kind]
        _check_options(reader, array=array, columns=columns, header=header, filters=filters)
        if reader.read is None:
            return None
        if block_rows < 1:
            raise InvalidInputError(f"block_rows must be >= 1; got {block_rows}.")
        remote = "://" in text and not text.startswith("file://")
        if remote and not reader.from_urls:
            raise InvalidInputError(
                f"{kind} files are read from local paths only (their libraries read by many "
                "small seeks, one request each on object storage); copy it locally or "
                "convert it to Zarr (xarray.open_dataset(path).to_zarr(url)), which is read "
                "from URLs. Parquet, CSV, .npy and Zarr are read from URLs.")
        if reader.package is not None:
            require_package(reader.package, kind)
        path = None if remote else _local_file(text, storage_options)
        return reader.read(ReadRequest(kind, text, path, array, columns, header, filters,
                                       sample_dim, block_rows, storage_options))


def _check_options(reader: Reader, **given) -> None:
    """Refuse an option that does not apply to the format, saying which formats it applies to."""
    for option, value in given.items():
        if value is None or option in reader.options:
            continue
        if option == "array":
            raise InvalidInputError(
                f"array={value!r} names an array in a Zarr group or an HDF5/netCDF file; "
                f"a {reader.title} file holds one table: drop it.")
        takers = " and ".join(r.title for r in READERS.values() if option in r.options)
        raise InvalidInputError(
            f"{option}= applies to {takers} files, not to {reader.title} files.")


def _local_file(text: str, storage_options: dict | None) -> Path:
    if storage_options:
        raise InvalidInputError(
            "storage_options were given for a local path; they apply to fsspec URLs "
            "(s3://, gs://, memory://...) only.")
    path = Path(text.removeprefix("file://")).expanduser().absolute()
    if not path.exists():  # a builtin error: it names the file itself
        raise FileNotFoundError(f"No such file: {text}: check the path.")
    return path


def _read_table(request: ReadRequest) -> da.Array:
    """Parquet or CSV through dask.dataframe, as a row-blocked array (row counts known)."""
    import pandas as pd

    from .frames import frame_to_array
    from .tables import TableLocation, read_table

    frame = read_table(request.source, request.kind, columns=request.columns, header=request.header,
                       filters=request.filters, storage_options=request.storage_options,
                       block_rows=request.block_rows)
    try:
        return frame_to_array(frame, what=TableLocation.of(request.source), file=True)
    except pd.errors.ParserError as exc:  # CSV lengths are computed: the parse runs here
        raise InvalidInputError(
            f"the table is ragged or malformed: {' '.join(str(exc).split())}. Every line "
            "must have the same number of fields.") from None


def _read_netcdf(request: ReadRequest):
    """:func:`~kpca_dask.io.array_files.read_netcdf_file`, naming times that cannot be decoded
    as the cause when the file opens without decoding them."""
    try:
        return read_netcdf_file(request)
    except InvalidInputError:
        why = _undecodable_times(request.path)
        if why is None:
            raise
        import importlib.util

        cftime = ("" if importlib.util.find_spec("cftime") is not None else
                  ", or install cftime, which decodes calendars that numpy does not")
        raise InvalidInputError(
            f"its times could not be decoded ({why}). Read them as the numbers stored: "
            "xarray.open_dataset(path, decode_times=False), then pass the Dataset (on the "
            f"command line, --no-decode-times){cftime}.") from None


def _undecodable_times(path: Path) -> str | None:
    """Why decoding the times of the netCDF file at ``path`` fails, or None when the file does
    not open without decoding them either (then its times are not the cause)."""
    import xarray as xr

    try:
        xr.open_dataset(path, decode_times=False).close()
    except (OSError, ValueError):
        return None
    try:
        xr.open_dataset(path).close()
    except ValueError as exc:
        # Without xarray's hint ("Try opening your dataset with decode_times=False or
        # installing cftime"): the message above gives the options that apply here.
        return " ".join(str(exc).split(" Try opening")[0].split()).rstrip(".")
    return None


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.parquet")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts))


#: The one table of readers: format name -> :class:`Reader`.
READERS: dict[str, Reader] = _reader_table()
#: The formats ``open_array(..., format=...)`` and ``--format`` accept.
FORMATS: tuple[str, ...] = tuple(READERS)
#: File extensions and the format each one means.
EXTENSIONS: dict[str, str] = {ext: kind for kind, reader in READERS.items()
                              for ext in reader.extensions}
