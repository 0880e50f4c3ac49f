"""The pass's rank-k update by BLAS syrk: the lower triangle of D^T D, outside the GIL."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from kpca_dask.blocks.rank_update import accepts, syrk_lower
from kpca_dask.blocks.statistics import add_gram
from kpca_dask.blocks.workspace import gram_scratch


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "columns of a wider block"])
@pytest.mark.parametrize("update", [3, 7, 2048])  # diagonal blocks and gemms below; one syrk
def test_syrk_adds_the_lower_triangle_and_leaves_the_upper_alone(rng, dtype, layout, update):
    wide = rng.normal(size=(60, 12)).astype(dtype)
    D = {"C": np.ascontiguousarray(wide[:, :7]), "F": np.asfortranarray(wide[:, :7]),
         "columns of a wider block": wide[:, 3:10]}[layout]
    C = np.asfortranarray(rng.normal(size=(7, 7)).astype(dtype))
    before = C.copy()
    syrk_lower(D, C, beta=0.5, update=update)
    expected = 0.5 * before.astype(np.float64) + D.astype(np.float64).T @ D.astype(np.float64)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    lower = np.tril_indices(7)
    np.testing.assert_allclose(C[lower], expected[lower], rtol=tolerance, atol=tolerance)
    upper = np.triu_indices(7, 1)
    np.testing.assert_array_equal(C[upper], before[upper])


def test_with_beta_zero_what_the_product_held_is_not_read(rng):
    D = rng.normal(size=(20, 5))
    C = np.full((5, 5), np.nan, order="F")  # as uninitialised memory may hold
    syrk_lower(D, C, beta=0.0)
    lower = np.tril_indices(5)
    np.testing.assert_allclose(C[lower], (D.T @ D)[lower], rtol=1e-12)


def test_what_blas_cannot_take_is_refused_by_name(rng):
    D, C = np.ones((3, 2)), np.zeros((2, 2), order="F")
    assert accepts(D, C)
    assert not accepts(D.astype(np.float32), C)  # dtypes differ
    assert not accepts(D, np.zeros((2, 2), order="C"))  # C row-major
    assert not accepts(D, np.zeros((3, 3), order="F"))  # not m x m
    read_only = C.copy(order="F")
    read_only.setflags(write=False)
    assert not accepts(D, read_only)
    # Views whose rows or columns overlap would make BLAS read or write past them.
    assert not accepts(np.broadcast_to(np.arange(3.0), (4, 3)), np.zeros((3, 3), order="F"))
    windows = np.lib.stride_tricks.sliding_window_view(rng.normal(size=8), 3)
    assert not accepts(windows, np.zeros((3, 3), order="F"))
    assert not accepts(D, np.broadcast_to(np.zeros((2, 1)), (2, 2)))
    with pytest.raises(TypeError, match="syrk_lower takes"):
        syrk_lower(np.ones((3, 2), np.float32), np.zeros((2, 2), order="F"))


def test_the_gil_is_released_while_blas_works(rng):
    """A Python thread keeps running during the product (scipy's own wrappers hold the
    GIL throughout, which stalls a distributed worker's event loop and the other chains)."""
    D = rng.normal(size=(4000, 1500))
    C = np.empty((1500, 1500), order="F")
    counts, running = [0], [True]

    def spin():
        while running[0]:
            counts[0] += 1

    spinner = threading.Thread(target=spin)
    with threadpool_limits(limits=1, user_api="blas"):  # the other core for the spinner
        spinner.start()
        try:
            time.sleep(0.05)
            before = counts[0]
            syrk_lower(D, C, beta=0.0)
            during = counts[0] - before
        finally:
            running[0] = False
            spinner.join()
    # Held, the spinner would not run at all while BLAS works (9 * 10^9 flops, 0.1 s or
    # more on one thread); released, it counts to millions.
    assert during > 10_000, during


def test_float32_blocks_with_the_scratch_product_add_what_the_panels_add(rng):
    """The pass's two float32 ways (one syrk into the scratch, its panels added on one
    thread or two; or column panels) give the same float64 sums to float32 rounding over
    several blocks, the threads exactly the same; whatever the scratch held is not read."""
    m = 1200  # more than one column panel of the adds and one syrk block (width 4096)
    sums = {way: np.zeros((m, m), order="F") for way in ("one", "two", "panels")}
    for _ in range(2):
        D = rng.normal(size=(m, m)).astype(np.float32)
        scratch = gram_scratch(D)
        assert scratch is not None and scratch.shape == (m, m)
        scratch[...] = np.nan  # as uninitialised memory may hold
        add_gram(sums["one"], D, scratch)
        scratch[...] = np.nan
        add_gram(sums["two"], D, scratch, threads=2)
        add_gram(sums["panels"], D)
    lower = np.tril_indices(m)
    np.testing.assert_array_equal(sums["one"][lower], sums["two"][lower])
    assert np.isfinite(sums["one"]).all()  # the upper triangle too: nothing of the scratch's
    np.testing.assert_allclose(sums["one"][lower], sums["panels"][lower], rtol=1e-4,
                               atol=1e-2)
    assert gram_scratch(np.empty((m - 1, m), np.float32)) is None  # larger than the block
    assert gram_scratch(np.empty((m, m))) is None  # float64 blocks go straight into G
