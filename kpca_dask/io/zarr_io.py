"""Zarr and xarray in and out: opening inputs, writing outputs atomically.

Inputs (:func:`open_array`) are Zarr arrays by path or fsspec URL, a Zarr
group plus an array name, xarray DataArrays and Dataset variables, dask
arrays and numpy arrays, and the files of :mod:`kpca_dask.io.formats`
(``.npy``, Parquet, CSV, HDF5, netCDF). Row chunks are kept as stored; the feature axis is
made one chunk (each task must see whole rows), with a warning when the store
splits it.

Outputs (:func:`write_array`, :func:`write_embedding`, :func:`write_group`)
are written block by block, never held whole, and never appear half-written:

* **local paths** are written into a hidden temporary sibling
  ``.<name>.tmp-<random>`` and renamed into place only once complete (a
  rename within one directory is atomic). A writer killed half-way leaves at
  most that hidden sibling, never anything at the final path.
* **fsspec URLs** (``s3://``, ``gs://``, ``memory://`` ...) cannot rename a
  directory atomically, so the output is written in place and carries the
  attribute ``kpca_dask_write = "incomplete"`` from its first metadata write;
  it is set to ``"complete"`` last. :func:`open_array` and
  :func:`open_group` refuse an output marked incomplete. One process at a
  time writes a URL: the others stand back before writing anything
  (:mod:`kpca_dask.io.claims`).

An existing output is never replaced unless ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import dask
import dask.array as da
import numpy as np
import xarray as xr
import zarr
from dask.array.core import PerformanceWarning

from .._parallel import capped_blas
from ..errors import InvalidInputError, OutputExistsError
from ..validation import DEFAULT_BLOCK_ROWS, one_feature_chunk
from .checksums import checksummed_codecs
from .claims import exclusive_writer
from .formats import open_file
from .frames import frame_to_array, frame_to_numpy, is_dask_frame, is_frame, select_columns
from .sparse_files import is_sparse_source, open_sparse

__all__ = [
    "open_array",
    "open_group",
    "write_array",
    "write_embedding",
    "write_group",
    "label_embedding",
    "check_can_write",
    "WRITE_STATE_ATTR",
]

PathOrURL = Union[str, os.PathLike]

#: Attribute that marks an output of kpca-dask as being written or complete.
WRITE_STATE_ATTR = "kpca_dask_write"
_INCOMPLETE, _COMPLETE = "incomplete", "complete"

#: Name of the variable when an unnamed DataArray is written to Zarr.
DEFAULT_VARIABLE = "embedding"


# -- where a store lives -----------------------------------------------------


@dataclass(frozen=True)
class _Location:
    """A Zarr store location: a local directory or an fsspec URL."""

    url: str  # what zarr is given: a local path or the URL
    local: bool
    storage_options: dict | None = None

    @property
    def path(self) -> Path:
        return Path(self.url)

    def exists(self) -> bool:
        if self.local:
            return self.path.exists()
        fs, root = self._fs()
        return fs.exists(root)

    def remove(self) -> None:
        if self.local:
            if self.path.is_dir():
                shutil.rmtree(self.path)
            elif self.path.exists():
                self.path.unlink()
            return
        fs, root = self._fs()
        if fs.exists(root):
            fs.rm(root, recursive=True)

    def _fs(self):
        import fsspec

        return fsspec.core.url_to_fs(self.url, **(self.storage_options or {}))

    def zarr_kwargs(self) -> dict:
        return {} if self.local else {"storage_options": self.storage_options or {}}


def store_location(path: PathOrURL, storage_options: dict | None = None) -> _Location:
    """Where ``path`` lives: an absolute local directory (``~`` expanded, ``file://``
    dropped) or an fsspec URL with its ``storage_options``."""
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://"):]
    if "://" in text:
        return _Location(text, local=False, storage_options=storage_options)
    if storage_options:
        raise InvalidInputError(
            f"storage_options were given for the local path {text!r}; they apply to fsspec "
            "URLs (s3://, gs://, memory://...) only.")
    # Absolute, because worker processes need not share our working directory.
    return _Location(str(Path(text).expanduser().absolute()), local=True)


# -- reading -----------------------------------------------------------------


def _open_node(where: _Location, shown: str):
    """The Zarr array or group at ``where``, refusing an incomplete output."""
    if not where.exists():
        raise FileNotFoundError(f"No Zarr store at {shown}: check the path or URL.")
    try:
        node = zarr.open(where.url, mode="r", **where.zarr_kwargs())
    except zarr.errors.NodeNotFoundError:
        raise InvalidInputError(
            f"{shown} exists but is not a Zarr array or group (no zarr.json / .zarray found)."
        ) from None
    state = node.attrs.get(WRITE_STATE_ATTR)
    if state is not None and state != _COMPLETE:
        raise InvalidInputError(
            f"{shown} is an incomplete kpca-dask output: its writer stopped before finishing "
            "(or is still writing). Delete it and write it again."
        )
    return node


def open_group(path: PathOrURL, *, storage_options: dict | None = None) -> zarr.Group:
    """Open a Zarr group read-only, refusing one kpca-dask has not finished writing.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> out = tempfile.mkdtemp() + "/g.zarr"
    >>> _ = write_group({"x": np.arange(3.0)}, out, attrs={"note": "hi"})
    >>> open_group(out).attrs["note"], open_group(out)["x"][:].tolist()
    ('hi', [0.0, 1.0, 2.0])
    """
    shown = os.fspath(path)
    node = _open_node(store_location(path, storage_options), shown)
    if not isinstance(node, zarr.Group):
        raise InvalidInputError(f"{shown} is a Zarr array, but a Zarr group was expected.")
    return node


def open_array(
    source: Any,
    *,
    array: str | None = None,
    sample_dim: str | None = None,
    feature_dim: str | None = None,
    storage_options: dict | None = None,
    block_rows: int = DEFAULT_BLOCK_ROWS,
    format: str | None = None,
    columns: Sequence[str | int] | None = None,
    header: bool | None = None,
    filters: Any = None,
) -> da.Array | xr.DataArray:
    """Open data for fitting or transforming as a lazy (n_samples, n_features) array.

    Parameters
    ----------
    source : path, URL, zarr.Array, zarr.Group, xarray.DataArray, xarray.Dataset, \
dask array or numpy array
        A Zarr array, or a Zarr group holding the array, by local path or fsspec
        URL (``s3://bucket/data.zarr``, ``memory://data.zarr``); a Parquet
        (file or directory), CSV or ``.npy`` file by local path or URL, or a
        local HDF5 or netCDF file, chosen by its extension or by ``format``;
        a pandas or dask DataFrame (:mod:`kpca_dask.io.frames`). A scipy.sparse matrix, or a
        local ``.npz`` file written by ``scipy.sparse.save_npz``, becomes a dask
        array of CSR blocks (:mod:`kpca_dask.io.sparse_files`).
    array : str, optional
        Name of the array in a Zarr group or an HDF5 file, or of the variable
        in a Dataset or a netCDF file; may be omitted when there is exactly
        one 2-D one.
    sample_dim, feature_dim : str, optional
        Dimension names of xarray input. Default: the first dimension holds
        the samples and the other one the features.
    storage_options : dict, optional
        Passed to fsspec for URLs (credentials, endpoint...), for every format.
    block_rows : int, default=20000
        Rows per block when numpy input is wrapped or a ``.npy``, CSV, HDF5 or
        netCDF file is read (rounded to whole stored chunks); Parquet blocks
        are whole row groups, merged up to about this many rows.
    format : {"zarr", "npy", "parquet", "csv", "hdf5", "netcdf"}, optional
        The format of a path, when its extension does not say it.
    columns : list of str or int, optional
        Parquet, CSV and DataFrames: the columns to use, in this order (default: all,
        which must then be numeric). CSV columns without a header are numbered
        from 0.
    filters : list of tuples, optional
        Parquet: row filters, as ``dask.dataframe.read_parquet`` takes them
        (``[("year", ">=", 2020)]``). The rows left are unknown until read, so
        their count per block is computed when the data are opened (only the
        counts reach the client).
    header : bool, optional
        CSV: whether the first line names the columns. Default: it does
        unless every field of it is a number (``0,1,2,...``, pandas' names
        for unnamed columns, is a header).

    Returns
    -------
    dask.array.Array or xarray.DataArray
        Labelled input stays an xarray.DataArray with dims
        ``(sample_dim, feature_dim)``, so that transform can label its output;
        a Zarr group written by xarray opens as one. Everything else becomes a
        dask array with the stored row chunks and one chunk of features.

    Examples
    --------
    >>> import tempfile, numpy as np, zarr
    >>> path = tempfile.mkdtemp() + "/x.zarr"
    >>> z = zarr.create_array(path, shape=(10, 3), chunks=(4, 3), dtype="f8")
    >>> z[:] = np.arange(30.0).reshape(10, 3)
    >>> open_array(path).chunks
    ((4, 4, 2), (3,))
    """
    if isinstance(source, xr.Dataset):
        return _oriented(_dataset_variable(source, array, "the Dataset"), sample_dim, feature_dim)
    if isinstance(source, xr.DataArray):
        return _oriented(source, sample_dim, feature_dim)
    if isinstance(source, da.Array):
        return one_feature_chunk(source, "The dask array", stacklevel=4)
    if is_frame(source):  # pandas or dask DataFrame: kpca_dask.io.frames
        if is_dask_frame(source):
            return frame_to_array(select_columns(source, columns))
        return da.from_array(frame_to_numpy(select_columns(source, columns)),
                             chunks=(block_rows, -1))
    if is_sparse_source(source):  # a scipy.sparse matrix or a save_npz file
        return open_sparse(source, block_rows=block_rows)
    if isinstance(source, (str, os.PathLike)):
        opened = open_file(source, format=format, array=array, columns=columns, header=header,
                           sample_dim=sample_dim, block_rows=block_rows, filters=filters,
                           storage_options=storage_options)
        if isinstance(opened, xr.Dataset):  # netCDF: labelled like a Dataset
            return open_array(opened, array=array, sample_dim=sample_dim,
                              feature_dim=feature_dim)
        if opened is not None:
            return one_feature_chunk(opened, os.fspath(source), stacklevel=3)
        shown = os.fspath(source)
        where = store_location(source, storage_options)
        return _from_zarr_node(_open_node(where, shown), shown, array, where,
                               sample_dim, feature_dim)
    if isinstance(source, (zarr.Array, zarr.Group)):
        return _from_zarr_node(source, repr(source), array, None, sample_dim, feature_dim)
    data = np.asarray(source)
    return da.from_array(data, chunks=(min(block_rows, max(len(data), 1)),) + data.shape[1:])


def _from_zarr_node(node, shown, name, where, sample_dim, feature_dim):
    if isinstance(node, zarr.Group):
        z = _group_array(node, name, shown)
        if z.metadata.zarr_format == 3 and z.metadata.dimension_names and where is not None:
            # Written by xarray: open it as labelled data, coordinates and all.
            ds = xr.open_zarr(where.url, consolidated=False, zarr_format=3,
                              storage_options=where.storage_options)
            return _oriented(ds[z.basename], sample_dim, feature_dim)
    elif name is not None:
        raise InvalidInputError(f"{shown} is a Zarr array, not a group; drop array={name!r}.")
    else:
        z = node
    if z.ndim != 2:
        raise InvalidInputError(
            f"The Zarr array {shown} has shape {z.shape}; a 2-D (n_samples, n_features) "
            "array is needed.")
    if z.chunks[1] < z.shape[1]:
        warnings.warn(
            f"The Zarr array {shown} is chunked along the feature axis ({z.chunks[1]} of "
            f"{z.shape[1]} columns per chunk); each row block reads several chunks. Store it "
            f"with chunks=({z.chunks[0]}, {z.shape[1]}) to avoid this.",
            PerformanceWarning, stacklevel=3)
    return da.from_array(z, chunks=(z.chunks[0], z.shape[1]), name=f"zarr-{_token(z, shown)}",
                         inline_array=True)


def _token(z, shown) -> str:
    return dask.base.tokenize(shown, z.shape, z.chunks, str(z.dtype), z.attrs.asdict())


def _group_array(group: zarr.Group, name: str | None, shown: str):
    arrays = dict(group.arrays())
    if name is not None:
        if name not in arrays:
            raise InvalidInputError(
                f"The Zarr group {shown} has no array {name!r}; it has {sorted(arrays)}.")
        return arrays[name]
    candidates = [k for k, v in arrays.items() if v.ndim == 2]
    if len(candidates) != 1:
        raise InvalidInputError(
            f"The Zarr group {shown} holds {len(candidates)} 2-D arrays "
            f"({sorted(candidates)}); say which one to use (array=..., or --array).")
    return arrays[candidates[0]]


def _dataset_variable(ds: xr.Dataset, name: str | None, shown: str) -> xr.DataArray:
    if name is not None:
        if name not in ds.data_vars:
            raise InvalidInputError(
                f"{shown} has no data variable {name!r}; it has {sorted(map(str, ds.data_vars))}.")
        return ds[name]
    two_d = [k for k, v in ds.data_vars.items() if v.ndim == 2]
    if len(two_d) != 1:
        raise InvalidInputError(
            f"{shown} holds {len(two_d)} 2-D data variables ({sorted(map(str, two_d))}); "
            "say which one to use (array=...).")
    return ds[two_d[0]]


def _oriented(X: xr.DataArray, sample_dim, feature_dim) -> xr.DataArray:
    """``X`` with dims (sample_dim, feature_dim) and one chunk of features."""
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
    X = X.transpose(sample_dim, feature_dim)
    if isinstance(X.data, da.Array):
        X = X.copy(data=one_feature_chunk(X.data, f"The DataArray {X.name or ''}".rstrip(),
                                              stacklevel=4))
    return X


# -- labelled output ---------------------------------------------------------


def label_embedding(Y, like: xr.DataArray, attrs: Mapping[str, Any]) -> xr.DataArray:
    """The embedding ``Y`` as a DataArray shaped like ``like`` (sample dim, "component").

    Coordinates along the sample dimension of ``like`` are carried over; the
    components are numbered 0..q-1.

    Examples
    --------
    >>> like = xr.DataArray(np.zeros((3, 2)), dims=("time", "x"), coords={"time": [5, 6, 7]})
    >>> label_embedding(np.ones((3, 1)), like, {"kernel": "rbf"}).coords["time"].values.tolist()
    [5, 6, 7]
    """
    sample_dim = like.dims[0]
    coords = {name: coord for name, coord in like.coords.items()
              if set(coord.dims) <= {sample_dim}}
    coords["component"] = np.arange(Y.shape[1])
    return xr.DataArray(Y, dims=(sample_dim, "component"), coords=coords, attrs=dict(attrs),
                        name=DEFAULT_VARIABLE)


# -- writing -----------------------------------------------------------------


@contextlib.contextmanager
def _staged_output(path: PathOrURL, overwrite: bool,
                   storage_options: dict | None) -> Iterator[_Location]:
    """Yield where to write ``path``; put it in place only if the block succeeds.

    The writer must create its root node with ``WRITE_STATE_ATTR`` set to
    "incomplete"; this sets it to "complete" and, for local paths, renames
    the hidden staging directory onto ``path``.
    """
    final = store_location(path, storage_options)
    shown = os.fspath(path)
    _refuse_existing(final, shown, overwrite)
    with contextlib.ExitStack() as claimed:
        if final.local:
            final.path.parent.mkdir(parents=True, exist_ok=True)
            staging = _Location(str(final.path.with_name(
                f".{final.path.name}.tmp-{uuid.uuid4().hex[:12]}")), local=True)
        else:
            # Written in place: first make sure no other process writes here too.
            claimed.enter_context(exclusive_writer(*final._fs(), shown))
            if overwrite:
                final.remove()
            staging = final
        try:
            yield staging
            _mark_complete(staging)
            if final.local:
                _rename_into_place(staging.path, final.path, shown, overwrite)
        except BaseException:
            # Also on KeyboardInterrupt: leave nothing behind that could be mistaken for output.
            _remove_after_failure(staging)
            raise


#: How long to keep removing a failed output while straggling blocks still write.
_STRAGGLER_SECONDS = 10.0


def _remove_after_failure(staging: _Location) -> None:
    """Remove a failed output, again, until no straggling block writes into it.

    A scheduler raises the first block error at once, while blocks already
    running on other threads or workers finish and may write their chunk
    after the first removal, recreating the directory.
    """
    deadline = time.monotonic() + _STRAGGLER_SECONDS
    while True:
        with contextlib.suppress(OSError):
            staging.remove()
        time.sleep(0.2)
        if not staging.exists() or time.monotonic() > deadline:
            return


def _refuse_existing(final: _Location, shown: str, overwrite: bool) -> None:
    if not overwrite and final.exists():
        raise OutputExistsError(
            f"{shown} exists already; choose another output path or pass overwrite=True "
            "(--overwrite on the command line) to replace it.")


def check_can_write(path: PathOrURL, *, overwrite: bool = False,
                    storage_options: dict | None = None) -> None:
    """Raise :class:`~kpca_dask.errors.OutputExistsError` now if writing ``path`` would be refused.

    Lets a caller fail before hours of work instead of after; the writers
    check again when they start.

    Examples
    --------
    >>> import tempfile
    >>> check_can_write(tempfile.mkdtemp() + "/new.zarr")
    """
    _refuse_existing(store_location(path, storage_options), os.fspath(path), overwrite)


def _mark_complete(where: _Location) -> None:
    node = zarr.open(where.url, mode="r+", **where.zarr_kwargs())
    node.attrs[WRITE_STATE_ATTR] = _COMPLETE


def _rename_into_place(staging: Path, final: Path, shown: str, overwrite: bool) -> None:
    """Rename the complete ``staging`` onto ``final``; with ``overwrite``, retire the old one.

    Safe against another process doing the same at the same instant: each
    rename is atomic, so ``final`` is always one writer's complete output,
    never a mixture. Without ``overwrite`` the second writer finds ``final``
    taken and gets :class:`~kpca_dask.errors.OutputExistsError`; with it, the
    writers take turns and the last one's output stays.
    """
    retired: list[Path] = []  # old outputs moved aside, deleted once ours is in place
    try:
        for _ in range(_SWAP_ATTEMPTS):
            try:
                os.rename(staging, final)  # fails if final is a non-empty directory
                return
            except OSError:
                if not final.exists():  # not a race with another writer
                    raise
            if not overwrite:
                raise OutputExistsError(
                    f"{shown} appeared while it was being written (another writer finished "
                    "first); the new output was discarded.")
            # Move the old output aside first so that the final path is never half-old,
            # half-new.
            aside = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:12]}")
            try:
                os.rename(final, aside)
            except FileNotFoundError:
                continue  # another writer moved it aside first: try again
            retired.append(aside)
        raise OutputExistsError(
            f"{shown} was replaced by other writers {_SWAP_ATTEMPTS} times while this one "
            "tried to put its output in place; the new output was discarded. Write to "
            "another path.")
    except BaseException:
        if retired and not final.exists():
            with contextlib.suppress(OSError):  # put the newest old output back
                os.rename(retired.pop(), final)
        raise
    finally:
        for aside in retired:
            shutil.rmtree(aside, ignore_errors=True)


#: How often a writer with overwrite=True retries the swap while others race for the path.
_SWAP_ATTEMPTS = 20


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
    >>> open_array(out).sum().compute()
    np.float64(20.0)
    """
    with _staged_output(path, overwrite, storage_options) as target:
        if isinstance(data, xr.DataArray):
            _write_data_array(data, target, name, attrs)
        else:
            X = _as_lazy(data)
            z = zarr.create_array(
                target.url, shape=X.shape, dtype=X.dtype,
                chunks=tuple(c[0] if c else 1 for c in X.chunks),
                attributes={**(attrs or {}), WRITE_STATE_ATTR: _INCOMPLETE},
                zarr_format=3, **target.zarr_kwargs())
            with capped_blas(X):
                da.store(X, z, lock=False, compute=True)
    return os.fspath(path)


def _write_data_array(data: xr.DataArray, target: _Location, name, attrs) -> None:
    variable = name or (str(data.name) if data.name is not None else DEFAULT_VARIABLE)
    ds = data.to_dataset(name=variable)
    if isinstance(data.data, da.Array):
        ds[variable] = ds[variable].copy(data=_regular_chunks(data.data))
    ds[variable].attrs.update(attrs or {})
    ds.attrs[WRITE_STATE_ATTR] = _INCOMPLETE
    for var in ds.variables.values():
        var.encoding.pop("chunks", None)  # chunks follow the dask blocks being written
    with capped_blas(ds[variable].data):
        ds.to_zarr(target.url, mode="w-", zarr_format=3, consolidated=False,
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
    >>> sorted(open_group(out).array_keys())
    ['a']
    """
    with _staged_output(path, overwrite, storage_options) as target:
        group = zarr.open_group(target.url, mode="w-", zarr_format=3,
                                attributes={**(attrs or {}), WRITE_STATE_ATTR: _INCOMPLETE},
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
