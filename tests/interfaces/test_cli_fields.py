"""The command line on a netCDF field: --sample-dim, its mask, and the field given back;
--weights, --no-decode-times, and outputs that xarray opens without a warning."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import xarray as xr
from test_cli import main  # kpca-dask ARGS in this process

import kpca_dask

pytest.importorskip("h5netcdf")


@pytest.fixture
def field_file(tmp_path):
    """A (lat, time, lon) netCDF field with one masked position: time is not first."""
    values = np.random.default_rng(0).normal(size=(4, 30, 5))
    values[1, :, 2] = np.nan
    field = xr.DataArray(values, dims=("lat", "time", "lon"),
                         coords={"lat": [-10.0, 0.0, 10.0, 20.0], "time": np.arange(30)})
    path = tmp_path / "field.nc"
    field.to_dataset(name="t").to_netcdf(path, engine="h5netcdf")
    return field, path


def test_fit_transform_and_inverse_transform_a_field(field_file, tmp_path, capsys):
    """fit --sample-dim time stacks (lat, lon); info shows the field; inverse-transform
    writes the field back over (time, lat, lon) with NaN on the mask."""
    field, path = field_file
    model, embedding, field_out = (tmp_path / name for name in ("m.zarr", "y.zarr", "x.zarr"))
    done = main("fit", path, "--model", model, "--sample-dim", "time", "--kernel", "linear",
                "--n-components", "3", "--n-landmarks", "30", "--landmarks", "uniform",
                "--fit-inverse-transform", "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "samples along 'time'; features lat 4 x lon 5, 1 masked" in done.stdout
    assert kpca_dask.load(model).n_features_in_ == 19
    done = main("transform", model, path, "--out", embedding, "--scheduler", "threads",
                capsys=capsys)
    assert done.returncode == 0, done.stderr
    done = main("inverse-transform", model, embedding, "--out", field_out, "--scheduler",
                "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "30 x 4 x 5" in done.stdout
    back = xr.open_zarr(field_out, consolidated=False)
    back = back[list(back.data_vars)[0]]
    assert np.isnan(back.values[:, 1, 2]).all()
    fitted = kpca_dask.load(model)
    expected = fitted.inverse_transform(fitted.transform(field.transpose("time", "lat", "lon")))
    assert back.dims == expected.dims == ("time", "lat", "lon")
    np.testing.assert_allclose(back.values, expected.values, rtol=1e-10)


def test_another_sample_dim_at_transform_is_refused(field_file, tmp_path, capsys):
    """--sample-dim at transform must be the model's."""
    _, path = field_file
    model = tmp_path / "m.zarr"
    assert main("fit", path, "--model", model, "--sample-dim", "time", "--n-landmarks", "10",
                "--scheduler", "threads", capsys=capsys).returncode == 0
    done = main("transform", model, path, "--out", tmp_path / "y.zarr", "--sample-dim", "lat",
                "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 2 and "differs from the model's sample dimension 'time'" in (
        done.stderr)


def test_patterns_writes_the_maps_of_the_field(field_file, tmp_path, capsys):
    """patterns --kind correlation writes the library's maps, over (mode, lat, lon)."""
    field, path = field_file
    model, maps_path = tmp_path / "m.zarr", tmp_path / "maps.zarr"
    assert main("fit", path, "--model", model, "--sample-dim", "time", "--n-components", "2",
                "--n-landmarks", "30", "--landmarks", "uniform", "--scheduler", "threads",
                capsys=capsys).returncode == 0
    done = main("patterns", model, path, "--kind", "correlation", "--out", maps_path,
                "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "2 x 4 x 5 correlation maps" in done.stdout
    written = xr.open_zarr(maps_path, consolidated=False)
    written = written[list(written.data_vars)[0]]
    expected = kpca_dask.load(model).patterns(field.transpose("time", "lat", "lon"),
                                              kind="correlation")
    assert written.dims == ("mode", "lat", "lon")
    np.testing.assert_allclose(written.values, expected.values, rtol=1e-10, equal_nan=True)
    done = main("patterns", model, path, "--kind", "eof", "--out", tmp_path / "eofs.zarr",
                "--scheduler", "threads", capsys=capsys)
    assert done.returncode == 0, done.stderr
    written = xr.open_zarr(tmp_path / "eofs.zarr", consolidated=False)
    expected = kpca_dask.load(model).patterns(field.transpose("time", "lat", "lon"), kind="eof")
    np.testing.assert_allclose(written[list(written.data_vars)[0]].values, expected.values,
                               rtol=1e-10, equal_nan=True)
    done = main("patterns", model, "--out", tmp_path / "none.zarr", capsys=capsys)
    assert done.returncode == 2 and "takes its maps over DATA" in done.stderr


def test_update_adds_time_steps_of_a_field(tmp_path, capsys):
    """fit on the first 20 time steps of a Zarr field, update with --rows 20:40: the model
    of all 40; the same rows again are refused."""
    values = np.random.default_rng(0).normal(size=(40, 3, 4))
    values[:, 0, 0] = np.nan
    field = xr.DataArray(values, dims=("time", "lat", "lon"), name="t")
    path = tmp_path / "field.zarr"
    field.to_dataset().to_zarr(path, zarr_format=3, consolidated=False)
    whole = kpca_dask.KernelPCA(n_components=2, n_landmarks=10, landmarks="uniform",
                                random_state=0).fit(field)
    landmarks = tmp_path / "landmarks.npy"
    np.save(landmarks, whole.landmarks_)
    model = tmp_path / "m.zarr"
    first = xr.Dataset({"t": field[:20]})
    first.to_zarr(tmp_path / "first.zarr", zarr_format=3, consolidated=False)
    assert main("fit", tmp_path / "first.zarr", "--model", model, "--n-components", "2",
                "--landmarks", landmarks, "--scheduler", "threads", capsys=capsys
                ).returncode == 0
    done = main("update", model, path, "--rows", "20:40", "--scheduler", "threads",
                capsys=capsys)
    assert done.returncode == 0, done.stderr
    grown = kpca_dask.load(model)
    assert grown.n_samples_fit_ == 40
    np.testing.assert_allclose(grown.eigenvalues_, whole.eigenvalues_, rtol=1e-8)
    again = main("update", model, path, "--rows", "30:40", "--scheduler", "threads",
                 capsys=capsys)
    assert again.returncode == 2 and "counted" in again.stderr


# -- --no-decode-times, --weights, and the outputs opened by xarray ----------------------------

LAT = [-80.0, -30.0, 0.0, 45.0]
FIT = ["--sample-dim", "time", "--n-components", "2", "--n-landmarks", "20", "--landmarks",
       "uniform", "--seed", "0"]


@pytest.fixture
def odd_times(tmp_path):
    """A (lat, time, lon) netCDF field whose times no calendar decodes (months since year 0)."""
    values = np.random.default_rng(1).normal(size=(4, 24, 5))
    field = xr.DataArray(values, dims=("lat", "time", "lon"), name="t", coords={
        "lat": ("lat", LAT, {"units": "degrees_north"}),
        "time": ("time", np.arange(24), {"units": "months since 0000-01-01",
                                         "calendar": "standard"})})
    path = tmp_path / "odd.nc"
    field.to_dataset().to_netcdf(path, engine="h5netcdf")
    return path


def _library_fit(path, weights):
    """The fit the command line's FIT options make, by the library, of the stored numbers."""
    field = xr.open_dataset(path, decode_times=False)["t"].load()
    return kpca_dask.KernelPCA(n_components=2, n_landmarks=20, landmarks="uniform",
                               random_state=0, sample_dim="time", weights=weights).fit(field)


@pytest.mark.slow
def test_no_decode_times_and_coslat_weights_as_a_program(odd_times, tmp_path):
    """`kpca-dask fit odd.nc --no-decode-times --weights coslat`, run as a program with every
    warning an error: the model the library fits with sqrt(cos(lat)) weights."""
    done = subprocess.run([sys.executable, "-W", "error", "-m", "kpca_dask", "fit", odd_times,
                           "--model", tmp_path / "m.zarr", *FIT, "--weights", "coslat",
                           "--no-decode-times"], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items()
                               if k != "DASK_SCHEDULER_ADDRESS"})
    assert done.returncode == 0, done.stderr
    assert "weights      over lat: min 0.4167" in done.stdout and "Dask:" not in done.stderr
    weights = xr.DataArray(np.sqrt(np.cos(np.deg2rad(LAT))), dims="lat", coords={"lat": LAT})
    np.testing.assert_allclose(kpca_dask.load(tmp_path / "m.zarr").eigenvalues_,
                               _library_fit(odd_times, weights).eigenvalues_, rtol=1e-10)


def test_times_that_cannot_be_decoded_are_named(odd_times, tmp_path, capsys):
    """The error names the times and --no-decode-times, not a missing package; transform
    reads the file with the same switch."""
    done = main("fit", odd_times, "--model", tmp_path / "m.zarr", *FIT, capsys=capsys)
    assert done.returncode == 2
    assert "its times could not be decoded (unable to decode time units 'months since " in (
        done.stderr)
    assert "--no-decode-times" in done.stderr and "h5netcdf" not in done.stderr
    assert not (tmp_path / "m.zarr").exists()
    assert main("fit", odd_times, "--model", tmp_path / "m.zarr", *FIT, "--no-decode-times",
                capsys=capsys).returncode == 0
    done = main("transform", tmp_path / "m.zarr", odd_times, "--out", tmp_path / "y.zarr",
                "--no-decode-times", capsys=capsys)
    assert done.returncode == 0, done.stderr
    written = xr.open_zarr(tmp_path / "y.zarr", decode_times=False)  # its times as stored
    written = written[list(written.data_vars)[0]]
    assert written.sizes["time"] == 24 and written["time"].values.tolist() == list(range(24))


@pytest.mark.parametrize("kind", ["netcdf", "npy"])
def test_weights_from_a_file(kind, odd_times, tmp_path, capsys):
    """--weights FILE: a netCDF variable over (lat, lon), or a .npy of the feature dimensions'
    shape, is the library's weights parameter."""
    values = np.random.default_rng(2).uniform(0.5, 1.5, size=(4, 5))
    weights = xr.DataArray(values, dims=("lat", "lon"), coords={"lat": LAT}, name="w")
    path = tmp_path / ("w.nc" if kind == "netcdf" else "w.npy")
    if kind == "netcdf":
        weights.to_dataset().to_netcdf(path, engine="h5netcdf")
    else:
        np.save(path, values)
    done = main("fit", odd_times, "--model", tmp_path / "m.zarr", *FIT, "--no-decode-times",
                "--weights", path, capsys=capsys)
    assert done.returncode == 0, done.stderr
    assert "weights      over lat, lon" in done.stdout
    np.testing.assert_allclose(kpca_dask.load(tmp_path / "m.zarr").eigenvalues_,
                               _library_fit(odd_times, weights).eigenvalues_, rtol=1e-10)


@pytest.mark.parametrize("data, options, message", [
    ("x.npy", ["--weights", "coslat"], "--weights coslat needs a field with a latitude"),
    ("nolat.nc", ["--weights", "coslat"], "--weights coslat found no latitude coordinate over"),
    ("field.nc", ["--weights", "w.npy", "--sample-dim", "time"],
     "--weights w.npy has shape (3,), but the feature dimensions lat, lon"),
    ("field.nc", ["--weights", "gone.nc"], "No such file: gone.nc"),
    ("field.nc", ["--weights", "w.csv"], "--weights takes 'coslat', or a netCDF, Zarr or .npy"),
    ("x.npy", ["--no-decode-times"], "--no-decode-times applies to netCDF files; x.npy is npy"),
    ("field.nc", ["--no-decode-times", "--columns", "a"],
     "--columns and --header apply to Parquet and CSV files, not to the netCDF file"),
])
def test_weight_and_time_mistakes_are_one_line(data, options, message, field_file, tmp_path,
                                               capsys, monkeypatch):
    """Weights or a switch that do not fit the data: one error line, nothing written."""
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "x.npy", np.ones((10, 3)))
    np.save(tmp_path / "w.npy", np.ones(3))
    (tmp_path / "w.csv").write_text("1\n")
    xr.DataArray(np.ones((10, 2, 3)), dims=("time", "y", "x")).to_dataset(name="v").to_netcdf(
        tmp_path / "nolat.nc", engine="h5netcdf")
    done = main("fit", data, "--model", "m.zarr", *options, capsys=capsys)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert not (tmp_path / "m.zarr").exists()


def test_zarr_outputs_open_in_xarray_without_a_warning(field_file, tmp_path, capsys):
    """transform, inverse-transform and patterns of a field, and xarray.open_zarr of what they
    write with xarray's defaults, all with every warning an error."""
    _, path = field_file
    model = tmp_path / "m.zarr"
    outputs = {name: tmp_path / f"{name}.zarr" for name in ("y", "x", "maps")}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main("fit", path, "--model", model, *FIT, "--fit-inverse-transform",
                    capsys=capsys).returncode == 0
        for args in (("transform", model, path, "--out", outputs["y"]),
                     ("inverse-transform", model, outputs["y"], "--out", outputs["x"]),
                     ("patterns", model, path, "--out", outputs["maps"])):
            done = main(*args, capsys=capsys)
            assert done.returncode == 0, done.stderr
        for output in outputs.values():
            with xr.open_zarr(output) as written:
                assert written.attrs["kpca_dask_write"] == "complete"
