"""The blocked Cholesky past its panel and trailing-block sizes, in seconds.

Every path of its loop (docs/design.md §11) is taken on a small matrix with
small ``panel`` and ``update``: several diagonal panels, several trailing
blocks after each, the GEMM below every trailing block but the last, and a
last panel and block narrower than the others. A factor with any update
skipped is wrong from the first panel past it, so the checks are that
L L^T = K to 1e-10 relative and that no pivot was reported; and, at the
library's own sizes, that a K_mm past PANEL + UPDATE columns is still
factorised by the plain Cholesky, not the pivoted fallback that a wrong factor
would silently send it to.
"""

from __future__ import annotations

import numpy as np
import pytest

from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.engine.solve.blocked_cholesky import PANEL, UPDATE, blocked_cholesky
from kpca_dask.engine.solve.landmark_factor import factor_landmarks


def _spd(m: int, seed: int = 0) -> np.ndarray:
    """A well-conditioned symmetric positive definite matrix, Fortran-ordered."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, 8))
    K = pairwise_kernel(Z, Z, "rbf", gamma=0.05) + 0.5 * np.eye(m)
    return np.asfortranarray(K)


def _relative_error(factored: np.ndarray, K: np.ndarray) -> float:
    L = np.tril(factored)
    return float(np.abs(L @ L.T - K).max() / np.abs(K).max())


@pytest.mark.parametrize(("m", "panel", "update"), [
    (300, 16, 40),  # 19 panels, up to 8 trailing blocks each, partial last ones
    (301, 37, 64),  # neither divides m
    (256, 32, 32),  # both divide m: the last trailing block has no rows below it
    (120, 16, 300),  # one trailing block: syrk only, no GEMM
])
def test_the_factor_of_every_panel_and_trailing_block_is_exact(m, panel, update):
    """L L^T = K to 1e-10 relative, no pivot reported, and the upper triangle untouched."""
    K = _spd(m)
    A = K.copy(order="F")
    assert blocked_cholesky(A, panel=panel, update=update) == 0
    assert _relative_error(A, K) <= 1e-10
    np.testing.assert_array_equal(np.triu(A, 1), np.triu(K, 1))


def test_past_the_library_sizes_the_factor_is_exact_and_plain():
    """m > PANEL + UPDATE with the module's own sizes: the first panel's trailing update
    has a GEMM below its first block. L L^T = K (checked on products with four vectors:
    O(m^2)), no pivot reported, and factor_landmarks keeps the plain Cholesky."""
    m = PANEL + UPDATE + 160
    Z = np.random.default_rng(1).normal(size=(m, 32))
    params = {"gamma": 0.05}
    K = np.asfortranarray(pairwise_kernel(Z, Z, "rbf", **params))
    A = K.copy(order="F")
    assert blocked_cholesky(A) == 0
    L = np.tril(A)
    probes = np.random.default_rng(2).normal(size=(m, 4))
    error = np.abs(L @ (L.T @ probes) - K @ probes).max() / np.abs(K @ probes).max()
    assert error <= 1e-10
    del A, L, K
    factor = factor_landmarks(Z, "rbf", params, 1e-10)
    assert (factor.method, factor.rank) == ("cholesky", m)


def test_a_matrix_that_is_not_positive_definite_reports_its_panel():
    """The 1-based first column of the panel whose pivot fails, with small sizes too."""
    K = _spd(200)
    K[150:, 150:] -= 10.0 * np.eye(50)  # indefinite from column 151 on
    A = np.asfortranarray(K)
    assert blocked_cholesky(A, panel=16, update=40) == 145  # the panel of columns 145-160
