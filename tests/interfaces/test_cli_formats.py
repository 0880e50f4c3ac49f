"""The command line on data files beyond Zarr, and the checks it makes before computing."""

from __future__ import annotations

import subprocess

import dask
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import kpca_dask
from kpca_dask import cli

h5py = pytest.importorskip("h5py")
pytest.importorskip("pyarrow")
pytest.importorskip("h5netcdf")

#: Nothing listens there: reaching for it would end in a connection error.
UNREACHABLE = "tcp://127.0.0.1:1"
FIT = ["--n-components", "2", "--n-landmarks", "30", "--seed", "0"]


def _data(n=240, p=3):
    return np.random.default_rng(7).normal(size=(n, p))


def _write(kind, folder, X):
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    path = folder / {"npy": "x.npy", "parquet": "x.parquet", "csv": "x.csv", "hdf5": "x.h5",
                     "netcdf": "x.nc"}[kind]
    if kind == "npy":
        np.save(path, X)
    elif kind == "parquet":
        frame.assign(name="row").to_parquet(path, row_group_size=50)
    elif kind == "csv":
        frame.to_csv(path, index=False, float_format="%.17g")
    elif kind == "hdf5":
        with h5py.File(path, "w") as f:
            f["X"] = X
    else:
        xr.Dataset({"X": (("sample", "feature"), X)}).to_netcdf(path, engine="h5netcdf")
    return path


def main(*args, capsys):
    """``kpca-dask ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        status = cli.main([str(a) for a in args])
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, status, out, err)


def assert_user_error(result, match):
    """Exit status 2 and a single ``kpca-dask: error: ...`` line, no traceback."""
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0], result.stderr
    assert match in lines[0], lines[0]


@pytest.mark.parametrize("kind", ["npy", "parquet", "csv", "hdf5", "netcdf"])
def test_fit_and_transform_a_file(kind, tmp_path, capsys):
    """fit and transform read each format and give the model the library gives on numpy."""
    X = _data()
    path = _write(kind, tmp_path, X)
    columns = ["--columns", "a,b,c"] if kind == "parquet" else []
    done = main("fit", path, "--model", tmp_path / "m.zarr", *FIT, *columns,
                "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    done = main("transform", tmp_path / "m.zarr", path, "--out", tmp_path / "y.zarr", *columns,
                "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr

    with dask.config.set(scheduler="threads"):
        same = kpca_dask.KernelPCA(n_components=2, n_landmarks=30, random_state=0).fit(X)
    model = kpca_dask.load(tmp_path / "m.zarr")
    np.testing.assert_allclose(model.eigenvalues_, same.eigenvalues_, rtol=1e-10)
    written = kpca_dask.io.open_array(tmp_path / "y.zarr")
    np.testing.assert_allclose(np.asarray(written), same.transform(X), rtol=1e-9, atol=1e-12)


def test_parquet_fit_by_its_columns(tmp_path, capsys, monkeypatch):
    """`kpca-dask fit data.parquet --columns ...` saves the library's model."""
    monkeypatch.chdir(tmp_path)
    X = _data()
    _write("parquet", tmp_path, X)
    done = main("fit", "x.parquet", "--model", "m.zarr", *FIT, "--columns", "a,b,c",
                "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "trained on   n = 240 rows x 3 features" in done.stdout
    same = kpca_dask.KernelPCA(n_components=2, n_landmarks=30, random_state=0).fit(X)
    np.testing.assert_allclose(kpca_dask.load(tmp_path / "m.zarr").eigenvalues_,
                               same.eigenvalues_, rtol=1e-10)


@pytest.mark.parametrize("args, message", [
    (["fit", "gone.parquet", "--model", "new.zarr"], "No such file: gone.parquet"),
    (["fit", "gone.zarr", "--model", "new.zarr"], "No Zarr store at gone.zarr"),
    (["fit", "x.txt", "--model", "new.zarr"], "not a known data format"),
    (["fit", "x.parquet", "--model", "new.zarr"], "non-numeric column(s) 'name'"),
    (["fit", "x.parquet", "--model", "new.zarr", "--columns", "a,z"], "no column(s) ['z']"),
    (["fit", "x.parquet", "--model", "old.zarr", "--columns", "a"],
     "old.zarr: the output exists already"),
    (["fit", "x.npy", "--model", "new.zarr", "--gamma", "wide"],
     "argument --gamma: 'wide' is neither a number nor a rule (median, scale)"),
    (["fit", "x.npy", "--model", "new.zarr", "--gamma", "-1"], "gamma must be a positive"),
    (["fit", "x.npy", "--model", "new.zarr", "--landmarks", "bogus"],
     "Unknown landmarks strategy 'bogus'"),
    (["fit", "x.npy", "--model", "new.zarr", "--tol", "2"], "tol must be a number in (0, 1)"),
    (["transform", "old.zarr", "x.npy", "--out", "y.zarr"], "not a kpca-dask model"),
    (["transform", "model.zarr", "x.h5", "--out", "y.zarr"], "X has 2 features, but"),
    (["transform", "model.zarr", "x.npy", "--out", "old.zarr"],
     "old.zarr: the output exists already"),
])
def test_mistakes_are_found_before_the_scheduler_is_reached(args, message, tmp_path, capsys,
                                                            monkeypatch):
    """Missing or unreadable input, an existing output and bad parameters are reported
    without reaching for a scheduler: given an unreachable one, the error is still about
    the mistake, not the connection."""
    monkeypatch.chdir(tmp_path)
    X = _data()
    _write("npy", tmp_path, X)
    _write("parquet", tmp_path, X)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["X"] = X[:, :2]
    (tmp_path / "x.txt").write_text("1,2\n")
    kpca_dask.io.write_array(X, tmp_path / "old.zarr")
    kpca_dask.KernelPCA(n_components=2, n_landmarks=20).fit(X).save(tmp_path / "model.zarr")
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        assert_user_error(main(*args, "--scheduler", UNREACHABLE, capsys=capsys), message)
    assert not (tmp_path / "new.zarr").exists() and not (tmp_path / "y.zarr").exists()


def test_missing_input_starts_no_cluster(tmp_path, capsys, monkeypatch):
    """With --workers a fit would start a local cluster; a missing input is reported first,
    so no cluster is started (its description line never appears)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    done = main("fit", "gone.csv", "--model", "m.zarr", "--workers", "2", capsys=capsys)
    assert_user_error(done, "No such file: gone.csv")
    assert "Dask:" not in done.stderr and "worker" not in done.stderr


def test_gamma_help_names_the_rules(capsys):
    """`fit --help` says that --gamma takes median and scale."""
    done = main("fit", "--help", capsys=capsys)
    text = " ".join(done.stdout.split())
    assert "'median' (median heuristic" in text and "'scale'" in text
