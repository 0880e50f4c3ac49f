"""A landmark factor past 2^30 bytes runs on one BLAS thread: OpenBLAS's threaded dpotrf
(scipy's copy) overran memory there and took the process down (docs/design.md §11)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kpca_dask.engine.landmark_factor import ONE_THREAD_BYTES

#: In a fresh process: scipy's OpenBLAS used once (its threads started), then the factor of
#: 24 000 linear-kernel landmarks of rank 400 (4.6 GB): potrf stops at the rank, pstrf
#: factorises. Without the one-thread guard this segfaulted here, every run.
SCRIPT = textwrap.dedent("""
    import numpy as np, scipy.linalg
    from kpca_dask.engine.landmark_factor import factor_landmarks
    scipy.linalg.cholesky(np.eye(500))
    Z = np.random.default_rng(0).standard_normal((24000, 400))
    factor = factor_landmarks(Z, "linear", {}, 1e-10)
    print(factor.method, factor.rank)
""")


def test_the_guard_starts_below_the_size_that_failed():
    """m = 16 000 failed threaded on AVX-512, m = 24 000 on AVX2; m = 10 000 passed."""
    assert 8 * 10_000 ** 2 < ONE_THREAD_BYTES <= 8 * 16_000 ** 2 < 8 * 24_000 ** 2


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KPCA_DASK_LARGE") != "1",
                    reason="4.6 GB and 2 minutes: KPCA_DASK_LARGE=1 runs it")
def test_a_factor_of_24000_landmarks_does_not_take_the_process_down():
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", SCRIPT],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr.split("\nExtension modules:")[0][-3000:]
    assert done.stdout.split() == ["pivoted", "cholesky", "400"]
