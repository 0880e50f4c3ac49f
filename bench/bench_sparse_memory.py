"""Peak memory of a fit on wide sparse data against the size of one densified block.

Builds a seeded random CSR matrix of n rows and p features at the given
density (TF-IDF-like: p = 50 000, 0.1 % of entries stored), fits
``kpca_dask.KernelPCA`` on it in this fresh process, and prints one JSON
line with

- peak_rss_mb: the process's peak resident memory (``ru_maxrss``), data and
  imports included;
- fit_peak_rss_mb: the largest resident memory sampled (every 5 ms) while the
  fit and the transform ran, beside rss_at_fit_mb, the resident memory just
  before: what the fit itself holds, whatever the set-up peaked at;
- block_rows: the rows of the largest block the pass reads;
- densified_block_mb: what one row block of the pass would take dense
  (block rows x p x 8 bytes), and dense_data_mb: all of X dense;
- landmarks_mb: the dense m x p landmarks, which the pass does hold;
- peak_over_block: peak_rss_mb / densified_block_mb (well below 1: the pass
  never densifies a block);
- fit_seconds.

Without ``--method`` it runs both kpca-dask and scikit-learn's
``make_pipeline(Nystroem(m), PCA(10))`` (uniform landmarks, which also takes
sparse input), each in a fresh process, and prints their ratios.

Run:

    nice .venv/bin/python bench/bench_sparse_memory.py --n 40000 --p 50000 --density 0.001 --m 200
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PeakMemory  # noqa: E402
from _fresh import run_python  # noqa: E402


def random_csr(n: int, p: int, density: float, rng):
    """n x p CSR with about density * p values per row in random columns, in O(nnz) memory.

    (scipy.sparse.random draws positions from all n * p without replacement,
    which allocates n * p integers: 8 GB at 20 000 x 50 000.)
    """
    import numpy as np
    from scipy import sparse

    per_row = max(1, round(density * p))
    columns = rng.integers(p, size=(n, per_row))
    indptr = np.arange(n + 1) * per_row
    X = sparse.csr_matrix((rng.random(n * per_row), columns.ravel(), indptr), shape=(n, p))
    X.sum_duplicates()
    return X


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40_000)
    parser.add_argument("--p", type=int, default=50_000)
    parser.add_argument("--density", type=float, default=0.001)
    parser.add_argument("--m", type=int, default=200, help="landmarks")
    parser.add_argument("--kernel", default="rbf")
    parser.add_argument("--landmarks", default="kmeans")
    parser.add_argument("--block-rows", type=int, default=20_000)
    parser.add_argument("--method", choices=("kpca", "sklearn"),
                        help="run one method in this process (default: both, in subprocesses)")
    args = parser.parse_args(argv)
    if args.method is None:
        return _compare(argv or [])

    import numpy as np

    from kpca_dask import KernelPCA
    from kpca_dask.validation import as_dask_array

    X = random_csr(args.n, args.p, args.density, np.random.default_rng(0))
    X_blocks, _ = as_dask_array(X, block_rows=args.block_rows)
    if args.method == "kpca":
        from kpca_dask.blocks.epilogue import compile_all

        # Loading the compiled kernel epilogue brings numba's LLVM runtime, ~100 MiB
        # whatever the data: set-up, like the imports, not memory the fit holds.
        compile_all()
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sampler = PeakMemory(every=0.005)
    started = time.perf_counter()
    if args.method == "kpca":
        model = KernelPCA(10, kernel=args.kernel, n_landmarks=args.m, landmarks=args.landmarks,
                          random_state=0).fit(X_blocks)
        Y = model.transform(X_blocks[:1000]).compute()
    else:
        from sklearn.decomposition import PCA
        from sklearn.kernel_approximation import Nystroem
        from sklearn.pipeline import make_pipeline

        pipeline = make_pipeline(Nystroem(kernel=args.kernel, gamma=1.0 / args.p,
                                          n_components=args.m, random_state=0), PCA(10))
        Y = pipeline.fit(X).transform(X[:1000])
    seconds = time.perf_counter() - started
    sampled = sampler.stop()
    at_fit_mb, fit_peak_mb = 1024 * sampled.start_gib, 1024 * sampled.peak_gib
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    block_rows = max(X_blocks.chunks[0])
    result = {
        "method": args.method,
        "n": args.n, "p": args.p, "density": args.density, "m": args.m,
        "kernel": args.kernel, "landmarks": args.landmarks,
        "peak_rss_mb": round(peak_mb, 1),
        "rss_before_fit_mb": round(before_mb, 1),
        "rss_at_fit_mb": round(at_fit_mb, 1),
        "fit_peak_rss_mb": round(fit_peak_mb, 1),
        "block_rows": block_rows,
        "densified_block_mb": round(block_rows * args.p * 8 / 2**20, 1),
        "dense_data_mb": round(args.n * args.p * 8 / 2**20, 1),
        "sparse_data_mb": round((X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20, 1),
        "landmarks_mb": round(args.m * args.p * 8 / 2**20, 1),
        "fit_seconds": round(seconds, 2),
        "embedding_finite": bool(np.isfinite(Y).all()),
    }
    result["peak_over_block"] = round(result["peak_rss_mb"] / result["densified_block_mb"], 4)
    print(json.dumps(result))
    return result


def _compare(argv: list[str]) -> dict:
    """Both methods, each in a fresh process (a clean ru_maxrss), and their ratios."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
         os.environ.get("PYTHONPATH", "")])}
    runs = {}
    for method in ("kpca", "sklearn"):
        out = run_python([__file__, *argv, "--method", method], env=env, check=True).stdout
        runs[method] = json.loads(out.strip().splitlines()[-1])
        print(out.strip().splitlines()[-1])
    ratios = {"peak_rss_kpca_over_sklearn": round(
                  runs["kpca"]["peak_rss_mb"] / runs["sklearn"]["peak_rss_mb"], 3),
              "fit_seconds_kpca_over_sklearn": round(
                  runs["kpca"]["fit_seconds"] / runs["sklearn"]["fit_seconds"], 3)}
    print(json.dumps(ratios))
    return {**runs, **ratios}


if __name__ == "__main__":
    main(sys.argv[1:])
