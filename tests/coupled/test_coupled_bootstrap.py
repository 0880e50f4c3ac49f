"""The bootstrap of coupled modes: each replicate is the coupled fit of the pairs it drew,
made in one read of both fields (docs/design.md §18, §20)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from _counting import CountingRows

import kpca_dask
from kpca_dask import KernelCCA, KernelMCA
from kpca_dask.errors import InvalidInputError, InvalidParameterError

N = 300


def _fields():
    rng = np.random.default_rng(4)
    t = rng.normal(size=(N, 2))
    X = t @ rng.normal(size=(2, 8)) + 0.5 * rng.normal(size=(N, 8))
    Y = t @ rng.normal(size=(2, 6)) + 0.5 * rng.normal(size=(N, 6))
    return X, Y


def _linear_mca(X, Y, k):
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    return np.linalg.svd(Xc.T @ Yc / (len(X) - 1), compute_uv=False)[:k]


def _linear_cca(X, Y, d, k):
    def whitened(A):
        Ac = A - A.mean(0)
        pcs = Ac @ np.linalg.svd(Ac, full_matrices=False)[2][:d].T
        return pcs / pcs.std(axis=0, ddof=1)
    return np.linalg.svd(whitened(X).T @ whitened(Y) / (len(X) - 1), compute_uv=False)[:k]


@pytest.fixture(scope="module")
def indices():
    return np.random.default_rng(3).integers(0, N, size=(4, N))


def test_linear_mca_replicates_are_refits_of_the_pairs_drawn(indices):
    X, Y = _fields()
    mca = KernelMCA(3, kernel="linear", n_landmarks=N).fit(X, Y)
    boot = kpca_dask.bootstrap(mca, (X, Y), indices=indices)
    for b, drawn in enumerate(indices):
        np.testing.assert_allclose(boot["singular_values"].values[b],
                                   _linear_mca(X[drawn], Y[drawn], 3), rtol=1e-10)
    assert boot["singular_values"].dims == ("n", "mode")
    np.testing.assert_allclose(boot["fit_singular_values"], mca.singular_values_)
    assert float(boot["fit_squared_covariance_fraction"].sum()) <= 1.0
    assert boot.attrs["method"] == "mca" and boot.attrs["n_bootstraps"] == 4


def test_linear_cca_replicates_are_refits_of_the_pairs_drawn(indices):
    X, Y = _fields()
    cca = KernelCCA(2, kernel="linear", n_landmarks=N, n_pca_modes=4).fit(X, Y)
    boot = kpca_dask.bootstrap(cca, (X, Y), indices=indices)
    for b, drawn in enumerate(indices):
        np.testing.assert_allclose(boot["singular_values"].values[b],
                                   _linear_cca(X[drawn], Y[drawn], 4, 2), rtol=1e-10)


def test_one_read_whatever_the_chunks():
    """Drawn counts by global sample index: the same replicates for any chunking, each chunk
    of each field read once (blocks of 150 samples: three chunks of X, two of Y)."""
    X, Y = _fields()
    mca = KernelMCA(2, n_landmarks=40, random_state=0).fit(X, Y)
    rows_x, rows_y = CountingRows(X), CountingRows(Y)
    lazy = kpca_dask.bootstrap(mca, (da.from_array(rows_x, chunks=(50, -1)),
                                     da.from_array(rows_y, chunks=(75, -1))), 20, seed=5)
    assert set(rows_x.row_ranges().values()) == {1} == set(rows_y.row_ranges().values())
    eager = kpca_dask.bootstrap(mca, (X, Y), 20, seed=5)
    np.testing.assert_allclose(lazy["singular_values"], eager["singular_values"], rtol=1e-10)
    assert eager["significant"].dtype == bool
    assert (eager["congruence"] >= 0).all() and (eager["congruence"] <= 1).all()


def test_refusals():
    X, Y = _fields()
    mca = KernelMCA(2, n_landmarks=40, random_state=0).fit(X, Y)
    with pytest.raises(InvalidInputError, match="pair"):
        kpca_dask.bootstrap(mca, X, 5)
    with pytest.raises(InvalidParameterError, match="n_modes"):
        kpca_dask.bootstrap(mca, (X, Y), 5, n_modes=3)
    with pytest.raises(InvalidInputError, match="Y has 8 features, but the model was fitted on 6"):
        kpca_dask.bootstrap(mca, (X, X), 5)
