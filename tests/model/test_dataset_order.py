"""A Dataset's fields are taken by name at transform, whatever the order of its variables.

A model fitted on ``Dataset({"a": A, "b": B})`` and given ``Dataset({"b": B, "a": A})``
must give the same scores: both fields have the same grid, so taking them by place
would pass every shape check and give other scores, silently.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from kpca_dask import ExactKernelPCA, KernelPCA


def _fields() -> tuple[xr.DataArray, xr.DataArray]:
    """Two fields on one grid (same dimensions and coordinates), of different values."""
    rng = np.random.default_rng(0)
    coords = {"time": np.arange(40), "x": np.arange(5)}
    a = xr.DataArray(rng.normal(size=(40, 5)), dims=("time", "x"), coords=coords)
    b = xr.DataArray(3.0 * rng.normal(size=(40, 5)) + 1.0, dims=("time", "x"), coords=coords)
    return a, b


ESTIMATORS = {
    "nystrom": lambda: KernelPCA(3, gamma=0.1, n_landmarks=20, random_state=0),
    "exact": lambda: ExactKernelPCA(3, gamma=0.1),
}


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS)
def test_a_dataset_in_another_order_gives_the_same_scores(make):
    a, b = _fields()
    model = make().fit(xr.Dataset({"a": a, "b": b}))
    fitted_order = model.transform(xr.Dataset({"a": a, "b": b}))
    other_order = model.transform(xr.Dataset({"b": b, "a": a}))
    assert list(xr.Dataset({"b": b, "a": a}).data_vars) == ["b", "a"]
    np.testing.assert_array_equal(np.asarray(other_order), np.asarray(fitted_order))
    # The fields themselves matter: swapped under the same names, the scores change.
    swapped = model.transform(xr.Dataset({"a": b, "b": a}))
    assert np.abs(np.asarray(swapped) - np.asarray(fitted_order)).max() > 1e-3
