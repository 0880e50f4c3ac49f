"""The command line on a netCDF field: --sample-dim, its mask, and the field given back."""

from __future__ import annotations

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
