"""Kernel blocks summed over feature chunks equal the kernels on whole rows."""

from __future__ import annotations

import numpy as np
import pytest

from kpca_dask.blocks.feature_sums import (
    chunk_sums,
    diagonal_from_norms,
    feature_sum,
    kernel_by_panels,
    kernel_from_sums,
    landmark_norms,
)
from kpca_dask.blocks.kernels import kernel_diagonal, pairwise_kernel
from kpca_dask.blocks.statistics import kernel_origin

KERNELS = [
    ("rbf", {"gamma": 0.05}),
    ("laplacian", {"gamma": 0.02}),
    ("linear", {}),
    ("cosine", {}),
    ("polynomial", {"gamma": 0.1, "degree": 3, "coef0": 1.0}),
    ("sigmoid", {"gamma": 0.01, "coef0": 0.5}),
    ("matern", {"gamma": 0.05, "nu": 1.5}),
    ("matern", {"gamma": 0.05, "nu": 0.7}),
    ("matern", {"gamma": 0.05, "nu": np.inf}),
]


def _summed(A, Z, kernel, edges):
    """The chunk terms of A against Z added over the feature chunks cut at ``edges``."""
    origin = kernel_origin(Z, kernel)
    total = 0.0
    for a, b in zip(edges[:-1], edges[1:]):
        total = total + chunk_sums(A[:, a:b], Z[:, a:b], None if origin is None else origin[a:b],
                                   feature_sum(kernel), np.float64)[:, 0]
    return total, landmark_norms(Z, origin)


@pytest.mark.parametrize(("kernel", "params"), KERNELS)
def test_sums_over_chunks_give_the_kernel(kernel, params):
    """Terms of uneven feature chunks, added and finished, equal pairwise_kernel to 1e-12."""
    rng = np.random.default_rng(0)
    A, Z = rng.normal(size=(70, 23)) + 3.0, rng.normal(size=(9, 23)) + 3.0
    sums, norms = _summed(A, Z, kernel, [0, 5, 6, 17, 23])
    got = kernel_from_sums(np.empty((70, 9)), sums, norms, kernel, params)
    expected = pairwise_kernel(A, Z, kernel, **params)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize(("kernel", "params"), KERNELS)
def test_diagonal_from_norms_is_the_kernel_diagonal(kernel, params):
    """k(x, x) from |x|^2 equals kernel_diagonal on the rows, a zero row included."""
    A = np.vstack([np.random.default_rng(1).normal(size=(5, 4)), np.zeros((1, 4))])
    got = diagonal_from_norms(np.einsum("ij,ij->i", A, A), kernel, params)
    np.testing.assert_allclose(got, kernel_diagonal(A, kernel, **params), rtol=1e-13)


@pytest.mark.parametrize("measure", ["sqeuclidean", "cityblock", "inner"])
def test_a_chunk_wider_than_a_slice_gives_the_sums_of_its_slices(measure, monkeypatch):
    """A chunk of more than SHIFT_COLUMNS columns is shifted and multiplied slice by slice
    (so a task never holds a shifted copy of the whole chunk): its terms are those of its
    slices added, the last one shorter, and the float64 terms of the whole chunk to 1e-5
    relative in float32 (1e-13 in float64); its non-finite count is the whole row's."""
    from kpca_dask.blocks import feature_sums

    monkeypatch.setattr(feature_sums, "SHIFT_COLUMNS", 7)
    rng = np.random.default_rng(3)
    A, Z = rng.normal(size=(6, 23)) + 3.0, rng.normal(size=(4, 23)) + 3.0
    origin = Z.mean(axis=0)
    for dtype, rtol in ((np.float64, 1e-13), (np.float32, 1e-5)):
        got = chunk_sums(A.astype(dtype), Z.astype(dtype), origin, measure, dtype)[:, 0]
        slices = sum(chunk_sums(A[:, a:a + 7].astype(dtype), Z[:, a:a + 7].astype(dtype),
                                origin[a:a + 7], measure, dtype)[:, 0] for a in range(0, 23, 7))
        np.testing.assert_array_equal(got, slices)
        monkeypatch.setattr(feature_sums, "SHIFT_COLUMNS", 10**9)
        whole = chunk_sums(A, Z, origin, measure, np.float64)[:, 0]
        monkeypatch.setattr(feature_sums, "SHIFT_COLUMNS", 7)
        np.testing.assert_allclose(got, whole, rtol=rtol)
    A[2, 20] = np.nan
    assert chunk_sums(A, Z, origin, measure, np.float64)[:, 0, -1].tolist() == [0, 0, 1, 0, 0, 0]


def test_chunk_terms_count_nonfinite_values():
    """A row with NaN or inf has its count in the last column and no sums."""
    A = np.ones((3, 4))
    A[1, 2], A[1, 3], A[2, 0] = np.nan, np.inf, np.nan
    terms = chunk_sums(A, np.ones((2, 4)), None, "inner", np.float64)[:, 0]
    assert terms[:, -1].tolist() == [0.0, 2.0, 1.0]
    assert terms[0, :3].tolist() == [4.0, 4.0, 4.0] and not terms[1:, :3].any()


def test_landmark_kernel_by_panels_of_float32_points():
    """K_mm of float32 landmarks by feature panels equals the float64 kernel of the same points."""
    Z = np.random.default_rng(2).normal(size=(30, 5000)).astype(np.float32)
    got = kernel_by_panels(Z, Z, "rbf", {"gamma": 1e-4}, np.empty((30, 30)))
    expected = pairwise_kernel(Z.astype(np.float64), Z.astype(np.float64), "rbf", gamma=1e-4)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_callables_and_precomputed_have_no_feature_sum():
    """Only the named point kernels are sums over features."""
    assert feature_sum(pairwise_kernel) is None and feature_sum("precomputed") is None
    assert {feature_sum(k) for k, _ in KERNELS} == {"inner", "sqeuclidean", "cityblock"}


def test_wide_landmark_matrix_by_feature_panels(monkeypatch):
    """K_mm of landmarks counted as wide (summed over feature panels, float32 kept) equals
    the float64 K_mm of the same points, its column sums and largest row sum too."""
    from kpca_dask.engine.solve import landmark_factor

    Z = np.random.default_rng(4).normal(size=(40, 300)).astype(np.float32) + 5.0
    expected = np.empty((40, 40))
    sums, norm = landmark_factor.landmark_kernel_panels(Z.astype(np.float64), "rbf",
                                                        {"gamma": 1e-3}, out=expected)
    monkeypatch.setattr(landmark_factor, "WIDE_LANDMARK_BYTES", 0)
    assert landmark_factor.is_wide_matrix(Z, "rbf")
    got = np.empty((40, 40))
    wide_sums, wide_norm = landmark_factor.landmark_kernel_panels(Z, "rbf", {"gamma": 1e-3},
                                                                  out=got)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(wide_sums, sums, rtol=1e-12)
    assert wide_norm == pytest.approx(norm, rel=1e-12)


def test_wide_landmark_matrix_is_made_once_per_landmarks(monkeypatch):
    """With many more features than landmarks, K_mm is made whole, once: the reference
    row's call and the factor's after the pass get the same matrix (the float64 one, to
    rounding); other parameters or other landmarks make their own."""
    from kpca_dask.engine.solve import landmark_factor

    Z = np.random.default_rng(5).normal(size=(20, 400)).astype(np.float32)
    expected = np.empty((20, 20))
    landmark_factor.landmark_kernel_panels(Z.astype(np.float64), "rbf", {"gamma": 1e-3},
                                           out=expected)
    monkeypatch.setattr(landmark_factor, "WIDE_LANDMARK_BYTES", 0)
    first = landmark_factor.wide_kernel_matrix(Z, "rbf", {"gamma": 1e-3})
    np.testing.assert_allclose(first, expected, rtol=1e-12)
    got = np.empty((20, 20))
    landmark_factor.landmark_kernel_panels(Z, "rbf", {"gamma": 1e-3}, out=got)
    np.testing.assert_array_equal(got, first)
    assert landmark_factor.wide_kernel_matrix(Z, "rbf", {"gamma": 1e-3}) is first
    assert landmark_factor.wide_kernel_matrix(Z, "rbf", {"gamma": 2e-3}) is not first
    assert landmark_factor.wide_kernel_matrix(Z.copy(), "rbf", {"gamma": 1e-3}) is not first
    assert not first.flags.writeable
