"""Large landmark factors on every thread, without OpenBLAS's threaded dpotrf
(docs/design.md §11): it takes the process down from m = 16 000 on some CPUs, so
the factor is blocked (:mod:`kpca_dask.engine.solve.blocked_cholesky`), LAPACK only on
small panels; OpenBLAS's own potri keeps its one-thread guard."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kpca_dask.engine.solve.blocked_cholesky import PANEL
from kpca_dask.engine.solve.landmark_factor import ONE_THREAD_BYTES

#: The smallest m at which a plain threaded dpotrf segfaulted (SkylakeX kernels), and the
#: largest at which it passed on every CPU measured.
SMALLEST_FAILURE = 16_000
LARGEST_PASS = 15_000

#: In a fresh process, on two BLAS threads: the factor of m rbf landmarks (full rank), its
#: solves, then the same landmarks with 500 repeated (the pivoted, rank-revealing way).
#: Prints the threads scipy's BLAS had, each way and rank, and the factor's largest error
#: on 200 sampled entries of K_mm.
SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits
    from kpca_dask.blocks.kernels import pairwise_kernel
    from kpca_dask.engine.solve.landmark_factor import factor_landmarks

    m = int(sys.argv[1])
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((m, 32))
    with threadpool_limits(limits=2, user_api="blas"):
        threads = min(p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas")
        factor = factor_landmarks(Z, "rbf", {"gamma": 0.01}, 1e-10)
        factor_rank = factor.rank
        rows, cols = rng.integers(0, m, 200), rng.integers(0, m, 200)
        L = factor.lower
        column = np.arange(m)
        left = np.where(column <= rows[:, None], L[rows], 0.0)  # L's row i ends at column i
        right = np.where(column <= cols[:, None], L[cols], 0.0)
        entries = np.einsum("ij,ij->i", left, right)
        exact = np.exp(-0.01 * ((Z[rows] - Z[cols]) ** 2).sum(axis=1))
        error = float(np.abs(entries - exact).max())
        solved = factor.unwhiten(factor.whiten(np.ones((m, 4))))  # L^-T L^-1 1 = K^-1 1
        product = pairwise_kernel(Z, Z[:1000], "rbf", gamma=0.01).T @ solved
        solve_error = float(np.abs(product - 1.0).max())
        way = factor.method
        del factor, L
        repeated = np.vstack([Z[: m - 500], Z[:500]])
        pivoted = factor_landmarks(repeated, "rbf", {"gamma": 0.01}, 1e-10)
        unique = len(set(map(tuple, repeated[pivoted.kept])))
    print(threads, way, factor_rank, error, solve_error, pivoted.method.replace(" ", "-"),
          pivoted.rank, unique)
""")


def test_the_guard_on_openblas_lapack_starts_well_below_the_smallest_failure():
    """One thread for OpenBLAS's own LAPACK from under a third of the smallest failing
    size's bytes (m >= 8192); the factor's LAPACK panels are far below that."""
    assert ONE_THREAD_BYTES <= 8 * SMALLEST_FAILURE**2 / 3
    assert 8 * 4096**2 < ONE_THREAD_BYTES <= 8 * 8192**2 < 8 * LARGEST_PASS**2
    assert 8 * PANEL**2 < ONE_THREAD_BYTES / 100


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KPCA_DASK_LARGE") != "1",
                    reason="2-3.2 GB and minutes: KPCA_DASK_LARGE=1 runs it")
@pytest.mark.parametrize("m", [16_000, 20_000])
def test_factors_of_16000_and_20000_landmarks_run_on_two_threads(m):
    """The sizes whose threaded dpotrf segfaulted complete on two BLAS threads in a
    subprocess (a crash fails the test only): the factor is K_mm's to 1e-12, its solves
    invert K_mm, and 500 repeated landmarks are left out by the pivoted factor."""
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", SCRIPT, str(m)],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr.split("\nExtension modules:")[0][-3000:]
    threads, way, rank, error, solve_error, pivoted, pivoted_rank, unique = done.stdout.split()
    assert (int(threads), way, int(rank)) == (2, "cholesky", m)
    assert float(error) < 1e-12
    assert float(solve_error) < 1e-6
    assert (pivoted, int(pivoted_rank), int(unique)) == ("pivoted-cholesky", m - 500, m - 500)
