"""The float32 path: float32 kernel blocks and SYRK, float64 sums and small problem.

Measured bounds (see docs/guide/float32.md, "Accuracy"): with the same rcond, the ten leading
eigenvalues of a float32 fit are within 1e-4 relative of the float64 fit
(worst seen 2.4e-5 on blobs / two-shells with rbf, matern and polynomial
kernels, m = 100-1000, MNIST included); with each dtype's default rcond the
three leading ones are within 1e-3 (worst seen 3.1e-4).
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from kpca_dask import KernelPCA
from kpca_dask.datasets import make_dataset
from kpca_dask.engine.passes.nystrom import pass_plan, pass_statistics
from kpca_dask.model.parameters import DEFAULT_RCOND

CASES = {
    "shells-rbf": ("two-shells", None, {"gamma": 0.5}),
    "shells-matern": ("two-shells", None, {"kernel": "matern", "gamma": 0.5}),
    "blobs-rbf": ("blobs", 10, {"gamma": 0.05}),
    "blobs-poly": ("blobs", 10, {"kernel": "polynomial", "gamma": 0.1, "degree": 2}),
}


def _data(kind, n_features):
    X, _ = make_dataset(kind, 8000, n_features=n_features, chunk_rows=2000, seed=0)
    return X


def _fit(X, **params):
    return KernelPCA(n_components=10, n_landmarks=200, random_state=0, **params).fit(X)


@pytest.mark.parametrize("case", sorted(CASES))
def test_float32_eigenvalues_within_1e_4_of_float64_at_the_same_rcond(case):
    """float32 kernel blocks change the ten leading eigenvalues by < 1e-4 relative
    when both fits drop the same landmark directions (rcond=1e-5)."""
    kind, n_features, params = CASES[case]
    X = _data(kind, n_features)
    f64 = _fit(X, rcond=DEFAULT_RCOND["float32"], **params)
    f32 = _fit(X, dtype="float32", **params)
    np.testing.assert_allclose(f32.eigenvalues_, f64.eigenvalues_, rtol=1e-4)
    Y64 = f64.transform(X[:1000]).compute()
    Y32 = f32.transform(X[:1000]).compute()
    assert Y32.dtype == np.float32  # a float32 model gives float32, as its writers do
    assert np.abs(Y32 - Y64).max() < 1e-3 * np.abs(Y64).max()


@pytest.mark.parametrize("case", sorted(CASES))
def test_float32_leading_eigenvalues_within_1e_3_of_float64_with_defaults(case):
    """With each dtype's default rcond (float32 keeps fewer landmark directions) the
    three leading eigenvalues still agree to 1e-3 relative."""
    kind, n_features, params = CASES[case]
    X = _data(kind, n_features)
    f64 = _fit(X, **params)
    f32 = _fit(X, dtype="float32", **params)
    np.testing.assert_allclose(f32.eigenvalues_[:3], f64.eigenvalues_[:3], rtol=1e-3)
    assert f32.landmark_rank_ <= f64.landmark_rank_


@pytest.mark.parametrize("chunks", [2**24 + 1, (2**24 - 2**20, 2**20 + 1)],
                         ids=["one-block", "two-blocks"])
def test_float32_blocks_are_summed_in_float64(chunks):
    """pass_statistics with float32 blocks sums in float64, within a block and across blocks:
    past float32's 2^24 rows the count, the column sums (n / 2) and the Gram matrix (n / 4) are
    exact, which float32 sums are not (the nearest float32 to 2^23 + 0.5 is 2^23). Two
    threads make two chains on every machine, so two blocks are also summed across chains."""
    n = 2**24 + 1
    X = da.ones((n, 1), chunks=(chunks, 1), dtype=np.float32)
    # A linear kernel against landmarks 0 and 1, shifted by r = (0, 1/2): every row's
    # kernel row minus r is (0, 1/2), exact in float32.
    with dask.config.set(scheduler="threads", num_workers=2):
        assert pass_plan(X, 2).chains == 2
        stats = pass_statistics(X, np.array([[0.0], [1.0]]), "linear", {}, np.float32,
                                reference=np.array([0.0, 0.5])).compute()
    assert stats.gram.dtype == stats.column_sums.dtype == np.float64
    assert stats.n_samples == n
    np.testing.assert_array_equal(stats.column_sums, [0.0, n / 2])
    np.testing.assert_array_equal(stats.gram, [[0.0, 0.0], [0.0, n / 4]])
    assert stats.diagonal_sum == n


def test_float32_needs_its_larger_default_rcond():
    """Why DEFAULT_RCOND depends on the dtype: inverting K_mm eigenvalues down to
    1e-10 amplifies float32 rounding (~1e-7) into wrong eigenvalues on a smooth
    kernel, while the float32 default (1e-5) stays within 1e-4."""
    X = _data("two-shells", None)
    f64 = _fit(X, gamma=0.5, rcond=DEFAULT_RCOND["float32"])
    f32_default = _fit(X, gamma=0.5, dtype="float32")
    f32_tight = _fit(X, gamma=0.5, dtype="float32", rcond=DEFAULT_RCOND["float64"])
    default_error = np.max(np.abs(f32_default.eigenvalues_ / f64.eigenvalues_ - 1))
    tight_error = np.max(np.abs(f32_tight.eigenvalues_ / f64.eigenvalues_ - 1))
    assert default_error < 1e-4
    assert tight_error > 100 * default_error


@pytest.mark.parametrize("input_dtype", [np.float32, np.float64])
def test_float32_fit_accepts_either_input_dtype(input_dtype):
    """dtype="float32" fits float32 and float64 data alike, to float32's rounding: float64
    eigenvalues within 1e-6 of the float64 fit's (at the same rcond; 3e-8 measured) and a
    float32 embedding within 1e-5 of its largest value (5e-7 measured). Data read at a lower
    precision than float32 (float16: 1e-5 and 3e-4) would be outside."""
    X = np.random.default_rng(0).normal(size=(500, 4))
    params = dict(n_components=3, n_landmarks=100, random_state=0,
                  rcond=DEFAULT_RCOND["float32"])
    reference = KernelPCA(**params).fit(X)
    fitted = KernelPCA(dtype="float32", **params).fit(X.astype(input_dtype))
    assert fitted.eigenvalues_.dtype == np.float64
    np.testing.assert_allclose(fitted.eigenvalues_, reference.eigenvalues_, rtol=1e-6)
    Y, Y64 = fitted.transform(X.astype(input_dtype)), reference.transform(X)
    assert Y.dtype == np.float32
    assert np.abs(Y - Y64).max() < 1e-5 * np.abs(Y64).max()
