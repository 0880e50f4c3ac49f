"""Large landmark factors run on one BLAS thread: OpenBLAS's threaded dpotrf (scipy's copy)
takes the process down from m = 16 000 on some CPUs (docs/design.md §11)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kpca_dask.engine.landmark_factor import ONE_THREAD_BYTES

#: The smallest m at which a plain threaded dpotrf segfaulted (SkylakeX kernels), and the
#: largest at which it passed on every CPU measured.
SMALLEST_FAILURE = 16_000
LARGEST_PASS = 15_000

#: In a fresh process, with the production thread settings (two BLAS threads): the factor
#: of 16 000 rbf landmarks (2 GB), full rank, the size whose threaded dpotrf segfaulted.
SCRIPT = textwrap.dedent("""
    import numpy as np
    from kpca_dask.engine.landmark_factor import factor_landmarks
    Z = np.random.default_rng(0).standard_normal((16000, 32))
    factor = factor_landmarks(Z, "rbf", {"gamma": 0.01}, 1e-10)
    print(factor.method, factor.rank)
""")


def test_the_guard_starts_well_below_the_smallest_failure():
    """One thread from under a third of the smallest failing size's bytes (m >= 8192)."""
    assert ONE_THREAD_BYTES <= 8 * SMALLEST_FAILURE**2 / 3
    assert 8 * 4096**2 < ONE_THREAD_BYTES <= 8 * 8192**2 < 8 * LARGEST_PASS**2


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KPCA_DASK_LARGE") != "1",
                    reason="2 GB and about a minute: KPCA_DASK_LARGE=1 runs it")
def test_a_factor_of_16000_landmarks_does_not_take_the_process_down():
    """The size that segfaulted completes in a subprocess (a crash fails the test only)."""
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", SCRIPT],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr.split("\nExtension modules:")[0][-3000:]
    assert done.stdout.split() == ["cholesky", "16000"]
