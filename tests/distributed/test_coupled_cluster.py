"""Kernel MCA and CCA of two Zarr fields on a LocalCluster of worker processes: the same
modes as on the threaded scheduler, whatever the workers (docs/design.md §20)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from _clusters import process_client

from kpca_dask import KernelCCA, KernelMCA

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Two fields of 4000 samples sharing a signal, in Zarr stores of different chunks: the
    pass reads blocks of 1000 rows, two chunks of X and one of Y."""
    rng = np.random.default_rng(0)
    t = rng.normal(size=4000)
    X = np.outer(t, rng.normal(size=30)) + 0.3 * rng.normal(size=(4000, 30))
    Y = np.outer(t**2 - 1, rng.normal(size=20)) + 0.3 * rng.normal(size=(4000, 20))
    folder = tmp_path_factory.mktemp("coupled")
    paths = []
    for name, values, rows in (("x", X, 500), ("y", Y, 1000)):
        path = str(folder / f"{name}.zarr")
        with dask.config.set(scheduler="threads"):
            da.from_array(values, chunks=(rows, -1)).to_zarr(path)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def client():
    """One cluster of two worker processes for the module: the fits do not depend on a
    fresh one."""
    with process_client(n_workers=2) as client:
        yield client


@pytest.mark.parametrize("estimator", [
    KernelMCA(2, n_landmarks=200, landmarks="uniform", random_state=0),
    KernelCCA(2, n_landmarks=200, landmarks="uniform", n_pca_modes=8, random_state=0)],
    ids=["mca", "cca"])
def test_a_cluster_fit_equals_the_threaded_fit(stores, client, estimator):
    with dask.config.set(scheduler="threads"):
        threaded = estimator.fit(*stores)
        values = threaded.singular_values_
        expected = [np.asarray(s) for s in threaded.transform(*[da.from_zarr(p) for p in stores])]
    with client.as_current():
        fitted = estimator.fit(*stores)
        scores = fitted.transform(*[da.from_zarr(p) for p in stores])
        computed = client.compute(list(scores), sync=True)
    np.testing.assert_allclose(fitted.singular_values_, values, rtol=1e-10)
    for mine, theirs in zip(computed, expected):
        np.testing.assert_allclose(mine, theirs, atol=1e-9)
