"""Inputs beyond Zarr: ``.npy``, Parquet, CSV, HDF5 and netCDF files.

Each reader returns a lazy dask array of row blocks (a Dataset for netCDF,
so that the labels survive), with every block's row count known before any
pass over the data: the landmarks are drawn from global row indices
(DESIGN §2, reproducibility), which needs the row count up front.

* ``.npy``: the header gives shape and dtype; each block reads its rows
  through a memory map.
* Parquet (a file or a directory of files): the file footers give the row
  count of every row group; each block reads whole row groups (neighbours
  merged up to about ``block_rows`` rows), only the chosen columns.
* CSV: one scan counts the line ends (bytes only, nothing parsed); each block
  parses its own byte range with pandas.
* HDF5: the dataset's shape, dtype and chunks come from the file; each block
  reads a row slice.
* netCDF: opened with xarray (lazily indexed variables), chunked by rows.

Nothing holds a file handle across tasks: a block opens the file itself, so
graphs pickle to distributed workers as a path plus an offset.
"""

from __future__ import annotations

import io
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

#: Bytes read at a time while counting CSV lines.
_SCAN_BYTES = 16 * 2**20


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
    if kind == "zarr":
        return None
    if "://" in shown:
        raise InvalidInputError(
            f"{shown}: {kind} files are read from local paths only; copy it locally or "
            "convert it to Zarr, which is read from URLs.")
    path = Path(shown).expanduser().absolute()
    if not path.exists():
        raise FileNotFoundError(f"No such file: {shown}: check the path.")
    if kind in ("npy", "parquet", "csv") and array is not None:
        raise InvalidInputError(
            f"array={array!r} names an array in a Zarr group or an HDF5/netCDF file; "
            f"{shown} holds one table: drop it.")
    if block_rows < 1:
        raise InvalidInputError(f"block_rows must be >= 1; got {block_rows}.")
    if kind == "npy":
        return _read_npy(path, shown, block_rows)
    if kind == "parquet":
        return _read_parquet(path, shown, columns, block_rows)
    if kind == "csv":
        return _read_csv(path, shown, columns, header, block_rows)
    if kind == "hdf5":
        return _read_hdf5(path, shown, array, block_rows)
    return _read_netcdf(path, shown, sample_dim, block_rows)


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


# -- Parquet -----------------------------------------------------------------


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.parquet")
                  if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts))


def _read_parquet(path: Path, shown: str, columns, block_rows: int) -> da.Array:
    _require("parquet")
    import pyarrow.parquet as pq

    files = _parquet_files(path)
    if not files:
        raise InvalidInputError(f"The directory {shown} holds no .parquet files.")
    schema = pq.read_schema(files[0])
    names = _chosen_columns(list(schema.names), columns, shown)
    dtype = _table_dtype({name: schema.field(name).type for name in names}, shown, columns)
    pieces, rows = [], []
    for file in files:
        meta = pq.ParquetFile(file).metadata
        file_names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        missing = [name for name in names if name not in file_names]
        if missing:
            raise InvalidInputError(
                f"{file.name} in {shown} has no column(s) {missing}: every file of a Parquet "
                "data set must hold the chosen columns.")
        # Neighbouring row groups merged up to about block_rows rows per block.
        group, count = [], 0
        for i in range(meta.num_row_groups):
            group.append(i)
            count += meta.row_group(i).num_rows
            if count >= block_rows:
                pieces.append((str(file), tuple(group), tuple(names), dtype.str))
                rows.append(count)
                group, count = [], 0
        if group and count:
            pieces.append((str(file), tuple(group), tuple(names), dtype.str))
            rows.append(count)
    return _from_blocks(_parquet_block, pieces, rows, len(names), dtype,
                        "-".join(_name(f) for f in files))


def _parquet_block(piece) -> np.ndarray:
    import pyarrow.parquet as pq

    file, groups, names, dtype = piece
    table = pq.ParquetFile(file).read_row_groups(list(groups), columns=list(names))
    return _table_to_array(table.to_pandas(), names, dtype)


def _table_dtype(types: dict, shown: str, columns) -> np.dtype:
    """float32 when every chosen column is float32, else float64 (ints and bools too)."""
    import pyarrow as pa

    bad = [name for name, t in types.items()
           if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))]
    if bad:
        numeric = [name for name in types if name not in bad]
        raise NonNumericInputError(_non_numeric_message(shown, bad, types, numeric, columns))
    single = all(pa.types.is_float32(t) for t in types.values())
    return np.dtype(np.float32 if single else np.float64)


def _non_numeric_message(shown, bad, types, numeric, columns) -> str:
    listed = ", ".join(f"{name!r} ({types[name]})" for name in bad)
    hint = (f"choose numeric columns with columns={numeric!r} (--columns "
            f"{','.join(map(str, numeric))})" if numeric and columns is None
            else "drop them from columns= or encode them as numbers first")
    return f"{shown} has non-numeric column(s) {listed}; {hint}."


def _chosen_columns(available: list, columns, shown: str) -> list:
    if columns is None:
        return available
    if isinstance(columns, (str, int)):
        columns = [columns]
    missing = [c for c in columns if c not in available]
    if missing:
        raise InvalidInputError(
            f"{shown} has no column(s) {missing}; its columns are {available}.")
    if not columns:
        raise InvalidInputError("columns= is empty; name at least one column.")
    return list(columns)


def _table_to_array(frame, names, dtype: str) -> np.ndarray:
    values = frame[list(names)] if list(frame.columns) != list(names) else frame
    return values.to_numpy(dtype=np.dtype(dtype), na_value=np.nan)


# -- CSV ---------------------------------------------------------------------


def _read_csv(path: Path, shown: str, columns, header: bool | None,
              block_rows: int) -> da.Array:
    with open(path, "rb") as f:
        first = f.readline()
    if not first.strip():
        raise InvalidInputError(f"{shown} is empty or starts with a blank line.")
    fields = _csv_fields(first, shown)
    if header is None:
        header = _looks_like_header(fields)
    names = fields if header else list(range(len(fields)))
    if columns is not None:
        # Numbered columns match as numbers or as text (as named on the command line).
        columns = [_column_key(c, names) for c in
                   ([columns] if isinstance(columns, (str, int)) else columns)]
    chosen = _chosen_columns(names, columns, shown)
    ranges = _csv_ranges(path, len(first) if header else 0, block_rows)
    if not ranges:
        raise InvalidInputError(f"{shown} has a header line but no rows.")
    # The first rows tell a non-numeric column (or a ragged line) before any pass.
    start, stop, _ = ranges[0]
    sample = _parse_csv(path, shown, names, chosen, start, min(stop, start + 2**20), None)
    bad = [name for name in chosen if sample[name].dtype.kind not in "biuf"]
    if bad:
        numeric = [name for name in chosen if name not in bad]
        types = {name: sample[name].dtype for name in chosen}
        raise NonNumericInputError(_non_numeric_message(shown, bad, types, numeric, columns))
    pieces = [(str(path), shown, tuple(names), tuple(chosen), a, b, rows)
              for a, b, rows in ranges]
    return _from_blocks(_csv_block, pieces, [r for _, _, r in ranges], len(chosen),
                        np.dtype(np.float64), _name(path))


def _csv_fields(line: bytes, shown: str) -> list[str]:
    import pandas as pd

    row = pd.read_csv(io.BytesIO(line), header=None, dtype=str, keep_default_na=False)
    return [str(value).strip() for value in row.iloc[0]]


def _looks_like_header(fields: list[str]) -> bool:
    """A header unless every field is a number; ``0,1,2,...`` (what pandas writes for
    unnamed columns) is a header too."""
    if not all(_is_number(field) for field in fields):
        return True
    return fields == [str(i) for i in range(len(fields))]


def _column_key(column, names: list):
    if column in names:
        return column
    for other in (str(column), int(column) if str(column).isdigit() else None):
        if other is not None and other in names:
            return other
    return column


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _csv_ranges(path: Path, skip: int, block_rows: int) -> list[tuple[int, int, int]]:
    """Byte ranges (start, stop, rows) of ``block_rows`` lines each (the last may be shorter).

    Counts line ends only, nothing is parsed; the block that parses a range
    checks that it finds as many rows as were counted.
    """
    ranges, start, rows, offset, last = [], skip, 0, skip, b"\n"
    with open(path, "rb") as f:
        f.seek(skip)
        while chunk := f.read(_SCAN_BYTES):
            # The byte after each line end, as an offset in the file.
            ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == ord("\n"))
            ends += offset + 1
            while len(ends) >= block_rows - rows:
                stop = int(ends[block_rows - rows - 1])
                ranges.append((start, stop, block_rows))
                ends, start, rows = ends[block_rows - rows:], stop, 0
            rows += len(ends)
            offset += len(chunk)
            last = chunk[-1:]
    if offset > start:
        rows += last != b"\n"  # a last line without its line end
        ranges.append((start, offset, rows))
    return ranges


def _parse_csv(path, shown, names, chosen, start, stop, rows):
    import pandas as pd

    with open(path, "rb") as f:
        f.seek(start)
        text = f.read(stop - start)
    if rows is None:  # a sample: up to the last whole line
        text = text[:text.rfind(b"\n") + 1] or text
    try:
        # All fields, unnamed: the parser then refuses a line with more fields than the first.
        frame = pd.read_csv(io.BytesIO(text), header=None, skip_blank_lines=False,
                            index_col=False)
    except pd.errors.ParserError as exc:
        raise InvalidInputError(_ragged(shown, start, " ".join(str(exc).split()))) from None
    except ValueError as exc:
        raise InvalidInputError(f"{shown} could not be read near byte {start}: {exc}") from None
    if frame.shape[1] != len(names):
        raise InvalidInputError(_ragged(
            shown, start, f"{frame.shape[1]} fields where the first line has {len(names)}"))
    frame.columns = list(names)
    frame = frame[list(chosen)]
    if rows is not None and len(frame) != rows:
        raise InvalidInputError(
            f"{shown}: {len(frame)} rows parsed near byte {start} where {rows} lines were "
            "counted; quoted fields with line breaks are not supported.")
    return frame


def _ragged(shown: str, start: int, detail: str) -> str:
    return (f"{shown} is ragged or malformed near byte {start}: {detail}. Every line must "
            "have the same number of fields.")


def _csv_block(piece) -> np.ndarray:
    path, shown, names, chosen, start, stop, rows = piece
    frame = _parse_csv(path, shown, names, chosen, start, stop, rows)
    bad = [name for name in chosen if frame[name].dtype.kind not in "biuf"]
    if bad:
        raise NonNumericInputError(
            f"{shown} has non-numeric values in column(s) {bad} near byte {start}.")
    return _table_to_array(frame, chosen, "f8")


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
