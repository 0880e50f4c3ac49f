"""Products with the kernel matrix by pairs of row panels, against the dense matrix."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

from kpca_dask.blocks.kernel_tiles import pair_products
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine.exact.matrix_free import (
    ROWS_KEY,
    CentredKernel,
    cross_kernel,
    kernel_products,
    row_panels,
)
from kpca_dask.errors import InvalidParameterError, NonFiniteInputError

KERNELS = [("rbf", {"gamma": 0.3}), ("laplacian", {"gamma": 0.2}), ("linear", {}),
           ("polynomial", {"gamma": 0.1, "degree": 2, "coef0": 1.0}),
           ("matern", {"gamma": 0.3, "nu": 1.5}), ("cosine", {})]


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(301, 5))


@pytest.fixture(scope="module")
def V(X):
    return np.random.default_rng(1).normal(size=(X.shape[0], 4))


@pytest.mark.parametrize(("kernel", "params"), KERNELS)
def test_kernel_products_equal_the_dense_matrix_times_v(X, V, kernel, params):
    """K V by pairs of panels (odd panel and tile sizes) equals k(X, X) V to rounding."""
    K = pairwise_kernel(X, X, kernel, **params)
    with dask.config.set(scheduler="threads"):
        panels = row_panels(da.from_array(X, chunks=(97, 2)), kernel, params, np.float64)
        product = kernel_products(panels, V)
    assert panels.rows.numblocks == (len(panels.bounds), 1)
    np.testing.assert_allclose(product, K @ V, rtol=0, atol=1e-12 * np.abs(K @ V).max())


def test_a_pair_of_one_panel_makes_an_exactly_symmetric_operator(X):
    """The tiles of a diagonal pair are used both ways and the diagonal tiles symmetrised, so
    V^T (K V) is symmetric to the products' rounding."""
    Q = np.linalg.qr(np.random.default_rng(2).normal(size=(X.shape[0], 6)))[0]
    KQ, _ = pair_products(X, None, Q, Q, "rbf", {"gamma": 0.3}, np.float64, True, tile_rows=64)
    H = Q.T @ KQ
    assert np.abs(H - H.T).max() <= 1e-14 * np.abs(H).max()


def test_products_do_not_depend_on_the_panels_or_on_reading_them_again(X, V):
    """Persisted panels, panels read again by every product, and other panel sizes give the
    same K V (to the rounding of other sums)."""
    with dask.config.set(scheduler="threads"):
        held = kernel_products(row_panels(da.from_array(X, chunks=150), "rbf", {"gamma": 0.3},
                                          np.float64), V)
        with dask.config.set({ROWS_KEY: "read", "num_workers": 3}):
            panels = row_panels(da.from_array(X, chunks=50), "rbf", {"gamma": 0.3}, np.float64)
            read = kernel_products(panels, V)
    assert not panels.held
    np.testing.assert_allclose(read, held, rtol=0, atol=1e-13 * np.abs(held).max())


def test_float32_tiles_are_summed_in_float64(X, V):
    """float32 tiles give K V to float32's rounding of the kernel values, not of the sums."""
    K = pairwise_kernel(X, X, "rbf", gamma=0.3)
    with dask.config.set(scheduler="threads"):
        product = kernel_products(row_panels(da.from_array(X), "rbf", {"gamma": 0.3},
                                             np.float32), V)
    np.testing.assert_allclose(product, K @ V, rtol=0, atol=3e-7 * np.abs(K @ V).max())


def test_the_centred_operator_is_j_k_j_with_its_trace(X, V):
    """CentredKernel applies J K J, knows k = K 1 and trace(J K J) after its first product."""
    K = pairwise_kernel(X, X, "rbf", gamma=0.3)
    J = np.eye(X.shape[0]) - 1.0 / X.shape[0]
    with dask.config.set(scheduler="threads"):
        operator = CentredKernel(row_panels(da.from_array(X, chunks=100), "rbf",
                                            {"gamma": 0.3}, np.float64))
        first, second = operator(V), operator(V[:, :2])
    np.testing.assert_allclose(first, J @ K @ J @ V, rtol=0, atol=1e-12)
    np.testing.assert_allclose(second, J @ K @ J @ V[:, :2], rtol=0, atol=1e-12)
    np.testing.assert_allclose(operator.row_sums, K.sum(axis=1), rtol=1e-13)
    assert operator.trace == pytest.approx(np.trace(J @ K @ J), rel=1e-12)
    assert operator.passes == 2


def test_a_nan_in_the_rows_is_named_by_its_row(X, V):
    """A NaN anywhere is refused at the first product, naming its first row."""
    bad = X.copy()
    bad[217, 3] = np.nan
    with dask.config.set(scheduler="threads"):
        operator = CentredKernel(row_panels(da.from_array(bad, chunks=100), "rbf",
                                            {"gamma": 0.3}, np.float64))
        with pytest.raises(NonFiniteInputError, match="1 NaN or infinite value.*row 217"):
            operator(V)


def test_overflowing_kernel_values_are_one_clear_error(X, V):
    """A polynomial kernel whose values overflow names the remedies."""
    with dask.config.set(scheduler="threads"):
        operator = CentredKernel(row_panels(da.from_array(X * 1e30), "polynomial",
                                            {"gamma": 1.0, "degree": 12, "coef0": 1.0},
                                            np.float64))
        with pytest.raises(InvalidParameterError, match="overflowed.*Scale the data"):
            operator(V)


def test_cross_kernel_gives_products_and_row_sums_by_panels(X):
    """k(X_new, X) [W, 1] lazily, any row chunks of the new points, equals the dense one."""
    new = np.random.default_rng(3).normal(size=(40, 5))
    W = np.random.default_rng(4).normal(size=(X.shape[0], 3))
    K = pairwise_kernel(new, X, "laplacian", gamma=0.2)
    with dask.config.set(scheduler="threads"):
        panels = row_panels(da.from_array(X, chunks=120), "laplacian", {"gamma": 0.2},
                            np.float64)
        terms = cross_kernel(da.from_array(new, chunks=(15, 2)), panels, da.from_array(W))
        assert terms.chunks == ((15, 15, 10), (4,))
        result = terms.compute()
    np.testing.assert_allclose(result[:, :3], K @ W, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result[:, 3], K.sum(axis=1), rtol=1e-13)
