"""A fit with many landmarks, in a subprocess: a crash there fails this test, not the suite.

The subprocess fits as a user's job does (a distributed LocalCluster of worker
processes, data in a Zarr store, the library's own BLAS thread settings) with
m above the dense crossover, so the small problem takes the iterative way, and
past the blocked Cholesky's panel and trailing-block sizes (the factor must be the
plain Cholesky, not the pivoted fallback).
``KPCA_DASK_LARGE_M`` raises m (the benchmark bench/bench_large_m.py goes to
m = 30 000); CI keeps it to seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, sys
import numpy as np
import zarr
from distributed import Client, LocalCluster

import kpca_dask.model.fitting as fitting
from kpca_dask import KernelPCA
from kpca_dask.io import open_array

# How K_mm was factorised (SmallProblem.factor_method), as the solve returns it to the fit.
factor_methods = []
solve = fitting.solve_statistics


def recorded(*args, **kwargs):
    small = solve(*args, **kwargs)
    factor_methods.append(small.factor_method)
    return small


fitting.solve_statistics = recorded
m, path = int(sys.argv[1]), sys.argv[2]
if __name__ == "__main__":
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(2 * m, 16)).astype("float32")
    zarr.create_array(path, data=X, chunks=(m // 2, 16))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster):
        model = KernelPCA(10, n_landmarks=m, landmarks="uniform", gamma=1.0,
                          dtype="float32", random_state=0).fit(open_array(path))
    print(json.dumps({"m": int(model.n_landmarks_), "rank": int(model.landmark_rank_),
                      "top": float(model.eigenvalues_[0]),
                      "residual": float(np.max(model.eigenvalue_residuals_)),
                      "factor": factor_methods}))
"""


@pytest.mark.slow
def test_a_fit_with_many_landmarks_completes_with_its_certificate(tmp_path):
    m = int(os.environ.get("KPCA_DASK_LARGE_M", "3000"))
    script = tmp_path / "fit_large_m.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, "-X", "faulthandler", str(script), str(m),
                           str(tmp_path / "X.zarr")], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, (
        f"the fit at m = {m} ended with {done.returncode}\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["m"] == m and result["rank"] > 1500  # the iterative way
    assert result["residual"] <= 1e-8 * result["top"]
    # K_mm of distinct uniform points is positive definite: the blocked Cholesky factorises
    # it, past its panel and trailing-block sizes (m > 2560), with no pivot reported; a
    # wrong factor would fall back to the pivoted one without an error.
    assert result["factor"] == ["cholesky"]
