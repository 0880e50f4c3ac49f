"""Data files beyond Zarr (.npy, Parquet, CSV, HDF5, netCDF), written for real in tmp_path."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from _counting import CountComputes

from kpca_dask import KernelPCA
from kpca_dask.errors import InvalidInputError, NonNumericInputError
from kpca_dask.io import open_array
from kpca_dask.io.formats import file_format

h5py = pytest.importorskip("h5py")
pytest.importorskip("pyarrow")
pytest.importorskip("h5netcdf")

N, P = 503, 3
NAMES = ["a", "b", "c"]


def _data(n=N, p=P, seed=0):
    return np.random.default_rng(seed).normal(size=(n, p))


def _write(kind: str, folder, X, rows_per_piece=64):
    """Write X in the format ``kind``; return (path, open_array keyword arguments) that read
    it in blocks of ``rows_per_piece`` rows (Parquet: row groups of that many rows)."""
    frame = pd.DataFrame(X, columns=NAMES[:X.shape[1]])
    if kind == "npy":
        np.save(folder / "x.npy", X)
        return folder / "x.npy", {"block_rows": rows_per_piece}
    if kind == "parquet":
        frame.to_parquet(folder / "x.parquet", row_group_size=rows_per_piece)
        return folder / "x.parquet", {"block_rows": rows_per_piece}
    if kind == "parquet-directory":
        (folder / "parts").mkdir()
        for i, start in enumerate(range(0, len(X), 200)):
            frame.iloc[start:start + 200].to_parquet(folder / "parts" / f"part-{i:03d}.parquet",
                                                     row_group_size=rows_per_piece)
        return folder / "parts", {"block_rows": rows_per_piece}
    if kind == "csv":
        frame.to_csv(folder / "x.csv", index=False, float_format="%.17g")
        return folder / "x.csv", {"block_rows": rows_per_piece}
    if kind == "csv-no-header":
        np.savetxt(folder / "x.csv", X, delimiter=",", fmt="%.17g")
        return folder / "x.csv", {"block_rows": rows_per_piece}
    if kind == "hdf5":
        with h5py.File(folder / "x.h5", "w") as f:
            f.create_dataset("data/X", data=X, chunks=(rows_per_piece, X.shape[1]))
            f.create_dataset("data/label", data=np.arange(len(X)))
        return folder / "x.h5", {"block_rows": rows_per_piece}
    if kind == "netcdf":
        xr.Dataset({"X": (("time", "feature"), X)},
                   coords={"time": np.arange(len(X)) * 10}).to_netcdf(
            folder / "x.nc", engine="h5netcdf")
        return folder / "x.nc", {"block_rows": rows_per_piece}
    raise AssertionError(kind)


KINDS = ["npy", "parquet", "parquet-directory", "csv", "csv-no-header", "hdf5", "netcdf"]


def _assert_read(actual, expected, kind: str = "csv") -> None:
    """Values read back are those written: exactly, but for CSV text, which pandas' default
    float parser rounds by up to 4e-16 on values of order 1 before pandas 3.1 (exact from 3.1
    on; kpca-dask takes the pandas that dask brings)."""
    if kind.startswith("csv"):
        np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-15, atol=1e-15)
    else:
        np.testing.assert_array_equal(np.asarray(actual), expected)


@pytest.mark.parametrize("kind", KINDS)
def test_file_holds_the_same_values(kind, tmp_path):
    """Each format opens lazily with its row counts known, to the source values. Only CSV,
    which keeps no row counts, computes on opening (the rows of each block)."""
    X = _data()
    path, options = _write(kind, tmp_path, X)
    with CountComputes() as counted:
        opened = open_array(path, **options)
    data = opened.data if isinstance(opened, xr.DataArray) else opened
    assert isinstance(data, da.Array)
    assert data.shape == X.shape and not any(np.isnan(data.chunks[0]))
    assert counted.computes == (1 if kind.startswith("csv") else 0)
    # CSV blocks are cut by bytes, so about block_rows rows each.
    most = 64 * 1.5 if kind.startswith("csv") else 64
    assert data.numblocks[0] > 1 and max(data.chunks[0]) <= most and data.numblocks[1] == 1
    _assert_read(opened.compute(), X, kind)


def test_netcdf_keeps_labels(tmp_path):
    """A netCDF variable opens as a DataArray with its sample coordinate, chunked by rows."""
    path, _ = _write("netcdf", tmp_path, _data())
    opened = open_array(path, block_rows=100)
    assert opened.dims == ("time", "feature")
    np.testing.assert_array_equal(opened["time"].values, np.arange(N) * 10)
    assert opened.data.chunks == ((100,) * 5 + (3,), (P,))


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_columns_choose_and_order(kind, tmp_path):
    """columns= picks the named columns, in the order given."""
    X = _data()
    path, options = _write(kind, tmp_path, X)
    opened = open_array(path, columns=["c", "a"], **options)
    _assert_read(opened.compute(), X[:, [2, 0]], kind)


def test_headerless_csv_columns_are_numbered(tmp_path):
    """Without a header, CSV columns are numbered from 0 (also given as strings)."""
    X = _data()
    path, options = _write("csv-no-header", tmp_path, X)
    _assert_read(open_array(path, columns=["2"], **options).compute(), X[:, [2]])


def test_parquet_ints_and_float32(tmp_path):
    """Integer columns read as float64; all-float32 columns stay float32."""
    pd.DataFrame({"i": np.arange(5), "f": np.ones(5)}).to_parquet(tmp_path / "a.parquet")
    pd.DataFrame({"f": np.ones(5, np.float32)}).to_parquet(tmp_path / "b.parquet")
    assert open_array(tmp_path / "a.parquet").dtype == np.float64
    assert open_array(tmp_path / "b.parquet").dtype == np.float32


@pytest.mark.slow
def test_fit_is_independent_of_format_and_chunking(tmp_path):
    """A fit on Parquet, CSV and HDF5 (odd row blocks) gives the eigenvalues of the numpy fit."""
    X = _data(n=600, seed=1)
    params = dict(n_components=3, gamma="median", n_landmarks=40, random_state=0)
    with dask.config.set(scheduler="threads"):
        reference = KernelPCA(**params).fit(X).eigenvalues_
        for kind, rows in [("parquet", 70), ("csv", 113), ("hdf5", 97)]:
            folder = tmp_path / kind
            folder.mkdir()
            path, options = _write(kind, folder, X, rows_per_piece=rows)
            fitted = KernelPCA(**params).fit(open_array(path, **options))
            np.testing.assert_allclose(fitted.eigenvalues_, reference, rtol=1e-10)


def test_fit_and_transform_take_a_path(tmp_path):
    """fit and transform accept a file path; transform of a path is lazy."""
    X = _data()
    path, _ = _write("npy", tmp_path, X)
    with dask.config.set(scheduler="threads"):
        kpca = KernelPCA(n_components=2, n_landmarks=30, random_state=0).fit(str(path))
        Y = kpca.transform(str(path))
        assert isinstance(Y, da.Array)
        np.testing.assert_allclose(Y.compute(), kpca.transform(X), rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_blocks_read_on_worker_processes(tmp_path, process_cluster):
    """The file readers' graphs travel to worker processes (a path per block, no handle)."""
    from distributed import Client

    X = _data()
    opened, kinds = [], ("npy", "csv", "parquet", "hdf5", "netcdf")
    for kind in kinds:
        folder = tmp_path / kind
        folder.mkdir()
        path, options = _write(kind, folder, X, rows_per_piece=200)
        opened.append(open_array(path, **options))
    with Client(process_cluster):
        for kind, values in zip(kinds, dask.compute(*opened)):
            _assert_read(values, X, kind)


# -- errors ------------------------------------------------------------------


def test_non_numeric_parquet_column(tmp_path):
    """A text column is refused, naming it and the numeric columns to choose instead."""
    frame = pd.DataFrame({"a": [1.0, 2.0], "name": ["x", "y"]})
    frame.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(NonNumericInputError, match=r"'name'.*columns=\['a'\]"):
        open_array(tmp_path / "t.parquet")


def test_non_numeric_csv_column(tmp_path):
    """A CSV text column is refused before any pass, naming it."""
    (tmp_path / "t.csv").write_text("a,name\n1,x\n2,y\n")
    with pytest.raises(NonNumericInputError, match=r"'name'.*--columns a"):
        open_array(tmp_path / "t.csv")


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_missing_column(kind, tmp_path):
    """Asking for a column that is not there lists the columns that are."""
    path, options = _write(kind, tmp_path, _data())
    with pytest.raises(InvalidInputError, match=r"no column\(s\) \['z'\]; its columns are"):
        open_array(path, columns=["a", "z"], **options)


def test_ragged_csv(tmp_path):
    """A line with more fields than the first is refused as ragged when the file is opened
    (counting its rows parses it), in whichever block."""
    lines = ["1,2,3"] * 10 + ["1,2,3,4"] + ["1,2,3"] * 5
    (tmp_path / "r.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidInputError, match="ragged"):
        open_array(tmp_path / "r.csv", block_rows=4)


def test_unknown_extension(tmp_path):
    """A file with an unknown extension is refused, naming format= as the way out."""
    X = _data()
    np.savetxt(tmp_path / "x.txt", X, delimiter=",", fmt="%.17g")
    with pytest.raises(InvalidInputError, match=r"'\.txt'.*format="):
        open_array(tmp_path / "x.txt")
    _assert_read(open_array(tmp_path / "x.txt", format="csv").compute(), X)


def test_missing_file(tmp_path):
    """A file that does not exist is a FileNotFoundError naming it."""
    with pytest.raises(FileNotFoundError, match="No such file: .*gone.parquet"):
        open_array(tmp_path / "gone.parquet")


def test_several_hdf5_datasets_need_a_name(tmp_path):
    """An HDF5 file with several 2-D datasets needs array=; a wrong name lists them."""
    X = _data()
    with h5py.File(tmp_path / "two.h5", "w") as f:
        f["X"], f["Y"] = X, X + 1
    with pytest.raises(InvalidInputError, match="2 2-D datasets"):
        open_array(tmp_path / "two.h5")
    with pytest.raises(InvalidInputError, match=r"no dataset 'Z'"):
        open_array(tmp_path / "two.h5", array="Z")
    np.testing.assert_array_equal(open_array(tmp_path / "two.h5", array="Y").compute(), X + 1)


def test_options_that_do_not_apply(tmp_path):
    """columns= on a format without columns, and array= on a single-table file, are refused."""
    path, _ = _write("npy", tmp_path, _data())
    with pytest.raises(InvalidInputError, match="columns= applies to Parquet and CSV"):
        open_array(path, columns=["a"])
    with pytest.raises(InvalidInputError, match="holds one table"):
        open_array(path, array="X")
    with pytest.raises(InvalidInputError, match="format='xlsx' is not known"):
        open_array(path, format="xlsx")


def test_format_from_extension_and_directory(tmp_path):
    """Extensions name formats; a directory of Parquet files is Parquet, others are Zarr."""
    _write("parquet-directory", tmp_path, _data())
    assert file_format(tmp_path / "parts") == "parquet"
    assert file_format(tmp_path / "data.zarr") == "zarr"
    assert file_format("memory://data") == "zarr"
    assert file_format("x.NC") == "netcdf"


def test_csv_numbered_header_is_a_header(tmp_path):
    """A first line 0,1,2 (pandas' names for unnamed columns) is taken for a header."""
    X = _data()
    pd.DataFrame(X).to_csv(tmp_path / "x.csv", index=False, float_format="%.17g")
    _assert_read(open_array(tmp_path / "x.csv").compute(), X)
    _assert_read(open_array(tmp_path / "x.csv", columns=[2]).compute(), X[:, [2]])
    opened = open_array(tmp_path / "x.csv", header=False)
    assert opened.shape == (N + 1, P)
