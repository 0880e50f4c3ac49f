"""eofs' example fields for the EOF tests: NDJFM Pacific SST anomalies and DJF 500 hPa heights.

The heights' times are hours since year 1 (a calendar xarray cannot decode
without cftime): both fields are labelled by their winter's year, and the
heights are cut to the SST's 50 winters and made anomalies.
"""

from __future__ import annotations

import datetime

import numpy as np
import xarray as xr


def sst() -> xr.DataArray:
    """eofs' NDJFM Pacific SST anomalies (50 winters on an 18 x 30 grid, land NaN)."""
    from eofs.examples import example_data_path

    field = xr.open_dataset(example_data_path("sst_ndjfm_anom.nc"))["sst"].load()
    return field.assign_coords(time=field.time.dt.year.values)


def z500() -> xr.DataArray:
    """eofs' DJF 500 hPa geopotential height anomalies over the SST's 50 winters (m)."""
    from eofs.examples import example_data_path

    z = xr.open_dataset(example_data_path("hgt_djf.nc"), decode_times=False)["z"].load()
    years = [datetime.date.fromordinal(int(hours // 24) + 1).year for hours in z.time.values]
    z = z.isel(pressure=0, drop=True).assign_coords(time=years).sel(time=sst().time)
    return (z - z.mean("time")).rename("z")


def sqrt_coslat(field: xr.DataArray) -> xr.DataArray:
    """√cos(latitude): a linear kernel's inner product is then the area-weighted one (in
    float64 and clipped at 0: cos(90°) in float32 is a little below 0)."""
    return np.sqrt(np.cos(np.deg2rad(field.latitude.astype(np.float64))).clip(0.0))


def linear_estimators(n_components: int) -> dict:
    """A linear KernelPCA with every one of the 50 winters a landmark (the Nyström fit is
    then exact) and the linear ExactKernelPCA, by name, as factories of their keywords."""
    from kpca_dask import ExactKernelPCA, KernelPCA

    return {
        "KernelPCA": lambda **kw: KernelPCA(n_components=n_components, kernel="linear",
                                            n_landmarks=50, landmarks="uniform",
                                            solver="nystrom", **kw),
        "ExactKernelPCA": lambda **kw: ExactKernelPCA(n_components=n_components,
                                                      kernel="linear", **kw),
    }
