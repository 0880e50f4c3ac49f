"""A flat spectrum against a smooth one plus one dense eigendecomposition (design §11).

A narrow rbf kernel on well-separated blobs (gamma 1 on n x 32 blobs) makes
K_mm and M close to the identity: thousands of eigenvalues within rounding of
each other, where the block Krylov solver converges a few percent a cycle and
hands the solve to the dense way. Such a fit should cost at most the smooth
fit (gamma 0.01, a landmark rank of a few hundred) plus one dense ``eigh`` of
an m x m matrix: the target is flat <= 1.2 x (smooth + eigh).

In a fresh process per code (its imports its own), on the same data (n x 32
float64 blobs as a dask array of ``--chunk-rows`` rows, uniform landmarks,
q = 10, the threaded scheduler, after a warm-up fit of 20 landmarks):

- **smooth** and **flat**: ``KernelPCA.fit`` end to end, and the landmark
  rank it kept;
- **eigh**: scipy's ``eigh`` of an m x m symmetric positive definite matrix,
  every eigenpair, on every thread: the machine's dense floor;
- **ratio** flat / (smooth + eigh).

``--before PATH`` repeats the fits with the kpca_dask package found at PATH
(e.g. a worktree of an older commit), each in its own process too.

    python bench/bench_flat_spectrum.py                        # n = 20 000, m = 5000
    python bench/bench_flat_spectrum.py --before ../old        # before and after
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from _common import machine, measured_apart, write_results  # noqa: E402


def measure(spec: dict) -> dict:
    """The smooth and flat fits and the dense floor, in this process."""
    import dask
    import numpy as np
    from scipy import linalg

    from kpca_dask import KernelPCA
    from kpca_dask.datasets import make_dataset

    n, m = spec["n"], spec["m"]
    X = make_dataset("blobs", n, n_features=32, chunk_rows=spec["chunk_rows"], seed=0)[0]
    X = X.persist(scheduler="threads")
    result = {"n": n, "m": m}
    with dask.config.set(scheduler="threads"):
        KernelPCA(2, n_landmarks=20, gamma=0.01, random_state=0).fit(X)  # warm-up
        for name, gamma in (("smooth", spec["smooth_gamma"]), ("flat", spec["flat_gamma"])):
            kpca = KernelPCA(10, kernel="rbf", gamma=gamma, n_landmarks=m, landmarks="uniform",
                             random_state=0)
            started = time.perf_counter()
            kpca.fit(X)
            result[name] = time.perf_counter() - started
            result[f"{name}_rank"] = int(kpca.landmark_rank_)
    if spec["floor"]:
        A = np.random.default_rng(0).standard_normal((m, m))
        A = A @ A.T + m * np.eye(m)
        started = time.perf_counter()
        linalg.eigh(A, overwrite_a=True, check_finite=False)
        result["eigh"] = time.perf_counter() - started
    return result


def table(rows: list[dict]) -> str:
    eigh = next(r["eigh"] for r in rows if "eigh" in r)
    lines = ["| code | n | m | smooth fit s (rank) | flat fit s (rank) | dense eigh s "
             "| **flat / (smooth + eigh)** |", "|---|---:|---:|---|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['code']} | {r['n']:,} | {r['m']:,} "
                     f"| {r['smooth']:.1f} ({r['smooth_rank']}) "
                     f"| {r['flat']:.1f} ({r['flat_rank']}) | {eigh:.1f} "
                     f"| **{r['flat'] / (r['smooth'] + eigh):.2f}** |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=float, default=2e4)
    parser.add_argument("--m", type=float, default=5000)
    parser.add_argument("--chunk-rows", type=int, default=2000)
    parser.add_argument("--smooth-gamma", type=float, default=0.01)
    parser.add_argument("--flat-gamma", type=float, default=1.0)
    parser.add_argument("--before", type=Path, help="a checkout of older code to compare")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(json.loads(args.measure))))
        return 0
    print(f"# {machine()}", file=sys.stderr)
    spec = {"n": int(args.n), "m": int(args.m), "chunk_rows": args.chunk_rows,
            "smooth_gamma": args.smooth_gamma, "flat_gamma": args.flat_gamma}
    codes = [("this", REPOSITORY)] + ([("before", args.before)] if args.before else [])
    rows = []
    for code, package in codes:
        row = measured_apart(__file__, {**spec, "floor": code == "this"},
                             [package, Path(__file__).parent], f"{code} code")
        rows.append({"code": code, **row})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    text = f"{machine()}\n\n{table(rows)}"
    print(text)
    write_results("bench_flat_spectrum", text, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
