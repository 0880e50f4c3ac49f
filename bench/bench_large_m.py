"""Fits with many landmarks against their floor: the pass SYRK plus one Cholesky (design §11).

For each m, in a fresh process (so that its peak memory is its own), on
n x 32 float32 uniform data (or ``--data blobs``; rbf, gamma 0.01 or ``--gamma``, uniform
landmarks, q = 10, the threaded scheduler):

- **fit**: ``KernelPCA.fit`` end to end;
- **floor**: in the same process and on the same block shapes, the float32
  SYRK D_b^T D_b of every row block the pass makes (the faster of numpy's ``D.T @ D``
  and BLAS ``syrk`` alone, ``_common.fastest_syrk``), plus one float64 Cholesky
  of K_mm on every thread (the fit's own blocked one,
  ``kpca_dask.engine.solve.blocked_cholesky``): the work a fit cannot avoid with
  its own block size;
- **strict floor**: the same, with the SYRK at the best rate over row blocks
  of ``--strict-rows`` (those whose kernel rows fit in 2 GiB), timed on one
  block each and scaled to n rows: the machine's limit, not the fit's;
- **ratio** fit / floor and **fit / strict floor** (goal <= 1.3 at m = 10 000);
- **peak**: resident memory above what the process held before the fit (after
  two small warm-up fits, whose growth is the **first fit's fixed cost**: numba's
  runtime and kernels and OpenBLAS's buffers, about 120 MiB whatever m), in GiB
  and in m^2 float64 words (goal <= 2.2 for m >= 5000).

``--before PATH`` repeats each fit with the kpca_dask package found at PATH
(e.g. a worktree of an older commit), in its own process too.

``--cluster`` fits on a LocalCluster instead (``bench/_cluster_large_m.py``):
for each m and each number of workers (``--workers``, of ``--worker-memory``
each), the fit with the m x m work on the workers (one worker, or tiles when
2.2 m^2 words outgrow one), beside the single-process fit of the same m and
its floor: fit time, client growth, worker peak against the limit, bytes
moved between workers, and the eigenvalues' largest relative difference.

    python bench/bench_large_m.py                                  # m = 1000 ... 10 000, n = 1e5
    python bench/bench_large_m.py --n 3e4 --m 30000 --no-floor      # every row a landmark
    python bench/bench_large_m.py --m 2000,5000 --before ../old     # before and after
    python bench/bench_large_m.py --cluster --m 2000,5000,10000,16000 --workers 2,4 \
        --worker-memory 2GiB --n 1.6e4                              # the m x m work on workers
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _cluster_large_m import cluster_table, measure_cluster  # noqa: E402
from _common import fastest_syrk, machine, measured_apart, write_results  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]


def measure(spec: dict) -> dict:
    """One fit (and its floor) in this process; run by :func:`run` in a fresh one."""
    import dask
    import numpy as np
    from _common import PeakMemory

    from kpca_dask import KernelPCA
    from kpca_dask.blocks.kernels import pairwise_kernel
    from kpca_dask.blocks.statistics import kernel_block_rows
    from kpca_dask.engine.passes.nystrom import pass_plan
    from kpca_dask.engine.solve.blocked_cholesky import blocked_cholesky
    from kpca_dask.validation import as_dask_array

    n, m, p = spec["n"], spec["m"], 32
    if spec.get("data", "uniform") == "blobs":  # 20 centres: a clustered leading spectrum
        from kpca_dask.datasets import make_dataset

        X = make_dataset("blobs", n, n_features=p, chunk_rows=20_000, seed=0,
                         dtype="float32")[0].compute()
    else:
        X = np.random.default_rng(0).uniform(size=(n, p)).astype(np.float32)
    kpca = KernelPCA(10, n_landmarks=m, landmarks="uniform", gamma=spec["gamma"],
                     dtype="float32", random_state=0)
    # Warm-up fits load what a first fit loads once, whatever m: numba's runtime and
    # compiled kernels, and the pages of OpenBLAS's per-thread buffers that only products
    # of some size touch (m = 20 leaves ~40 MiB of them to the first large fit, 0.2 m^2
    # words at m = 5000). The peak below is then what this m costs; the warm-ups' growth
    # is reported apart, as the first fit's fixed cost.
    before_warm_up = PeakMemory().stop().start
    with dask.config.set(scheduler="threads"):
        KernelPCA(2, n_landmarks=20, gamma=0.01, dtype="float32").fit(X[:500])
        KernelPCA(2, n_landmarks=2000, gamma=0.01, dtype="float32").fit(X[:8000])
    memory = PeakMemory()
    fixed_cost = memory.start - before_warm_up
    started = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        kpca.fit(X)
    fit = time.perf_counter() - started
    memory.stop()
    result = {"m": m, "n": n, "fit": fit, "peak_gib": memory.above_start_gib,
              "fixed_mib": fixed_cost / 2**20,
              "eigenvalues": [float(v) for v in kpca.eigenvalues_],
              "rank": int(kpca.landmark_rank_),
              "relative_residual": float(np.max(getattr(kpca, "eigenvalue_residuals_", [np.nan]))
                                         / kpca.eigenvalues_[0])}
    if not spec["floor"]:
        return result
    del kpca
    # The floor: the pass's SYRKs on blocks of the shape it uses, then one Cholesky.
    Z = X[:m].astype(np.float64)
    # The fit's own kernel blocks: the pass's plan sets their bytes (larger once m^2 is).
    with dask.config.set(scheduler="threads"):
        plan = pass_plan(as_dask_array(X)[0], m)
    rows = kernel_block_rows(m, 4, plan.block_bytes)
    D = pairwise_kernel(X[:rows], X[:m], "rbf", gamma=spec["gamma"]).astype(np.float32)
    syrk = fastest_syrk(D) * n / rows  # one block, scaled to the n rows of the pass
    del D
    strict_syrk, strict_rows = _best_syrk(X, m, spec)
    K = np.asfortranarray(pairwise_kernel(Z, Z, "rbf", gamma=spec["gamma"]))
    started = time.perf_counter()
    blocked_cholesky(K)  # every thread, as the fit; LAPACK's threaded potrf crashes at 16 000
    cholesky = time.perf_counter() - started
    return {**result, "syrk": syrk, "cholesky": cholesky, "block_rows": rows,
            "strict_syrk": strict_syrk, "strict_rows": strict_rows}


def _best_syrk(X, m: int, spec: dict) -> tuple[float, int]:
    """The pass's SYRKs at the best rate over ``spec["strict_rows"]`` blocks: seconds for
    n rows, and the block rows that gave it (one block each, the best of two)."""
    import numpy as np

    from kpca_dask.blocks.kernels import pairwise_kernel

    best = (np.inf, 0)
    for rows in spec.get("strict_rows", [2000, 5000, 10_000, 20_000]):
        rows = min(rows, len(X))
        if 4 * m * rows > 2 * 2**30:
            continue
        D = pairwise_kernel(X[:rows], X[:m], "rbf", gamma=spec["gamma"]).astype(np.float32)
        best = min(best, (fastest_syrk(D) * len(X) / rows, rows))
        del D
    return best


def run(spec: dict, package: Path) -> dict:
    return measured_apart(__file__, spec, [package, Path(__file__).parent], f"m = {spec['m']}")


def table(rows: list[dict]) -> str:
    lines = ["| code | n | m | rank | fit s | floor s (SYRK + Cholesky) | **fit / floor** "
             "| strict floor s (block rows) | **fit / strict floor** "
             "| peak GiB | **peak in m² words** | first fit's fixed cost MiB "
             "| max residual / λ₁ |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        floor = r.get("syrk", 0.0) + r.get("cholesky", 0.0)
        shown_floor = (f"{floor:.1f} ({r['syrk']:.1f} + {r['cholesky']:.1f})" if floor
                       else "–")
        ratio = f"**{r['fit'] / floor:.2f}**" if floor else "–"
        strict = r.get("strict_syrk", 0.0) + r.get("cholesky", 0.0)
        shown_strict = (f"{strict:.1f} ({r['strict_rows']} vs {r['block_rows']})" if floor
                        else "–")
        strict_ratio = f"**{r['fit'] / strict:.2f}**" if floor else "–"
        words = r["peak_gib"] * 2**30 / (8 * r["m"] ** 2)
        lines.append(f"| {r['code']} | {r['n']:.0e} | {r['m']} | {r.get('rank', '?')} "
                     f"| {r['fit']:.1f} | {shown_floor} "
                     f"| {ratio} | {shown_strict} | {strict_ratio} "
                     f"| {r['peak_gib']:.2f} | **{words:.2f}** "
                     f"| {r['fixed_mib']:.0f} "
                     f"| {r.get('relative_residual', float('nan')):.1e} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=float, default=1e5)
    parser.add_argument("--m", default="1000,2000,5000,10000")
    parser.add_argument("--gamma", type=float, default=0.01,
                        help="rbf gamma: 0.01 gives a landmark rank of a few hundred (the "
                             "dense small problem), 1.0 a full rank (the iterative one)")
    parser.add_argument("--data", choices=["uniform", "blobs"], default="uniform",
                        help="uniform in the unit cube, or kpca_dask's blobs of 20 centres "
                             "(whose leading eigenvalues come in a cluster)")
    parser.add_argument("--no-floor", action="store_true", help="time the fits only")
    parser.add_argument("--strict-rows", default="2000,5000,10000,20000",
                        help="row blocks the strict floor's SYRK is timed on (the best rate)")
    parser.add_argument("--before", type=Path, help="a checkout of older code to compare")
    parser.add_argument("--cluster", action="store_true",
                        help="fit on a LocalCluster (see the module docstring)")
    parser.add_argument("--workers", default="2,4", help="--cluster: numbers of workers")
    parser.add_argument("--worker-memory", default="2GiB", help="--cluster: each one's limit")
    parser.add_argument("--solve", default="auto", choices=["auto", "worker", "tiles"],
                        help="--cluster: kpca-dask.landmark-solve")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        spec = json.loads(args.measure)
        print(json.dumps(measure_cluster(spec) if "workers" in spec else measure(spec)))
        return 0
    print(f"# {machine()}", file=sys.stderr)
    if args.cluster:
        return _cluster(args, argv)
    rows = []
    for m in (int(float(v)) for v in args.m.split(",")):
        spec = {"n": int(args.n), "m": m, "floor": not args.no_floor, "gamma": args.gamma,
                "data": args.data,
                "strict_rows": [int(float(v)) for v in args.strict_rows.split(",")]}
        codes = [("this", REPOSITORY)] + ([("before", args.before)] if args.before else [])
        for code, package in codes:
            row = {"code": code, **run(spec if code == "this" else {**spec, "floor": False},
                                       package)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    text = f"{machine()}\n\n{table(rows)}"
    print(text)
    write_results("bench_large_m", text, argv)
    return 0


def _cluster(args, argv) -> int:
    """The --cluster table: each cluster fit beside the single-process fit of its m."""
    rows = []
    for m in (int(float(v)) for v in args.m.split(",")):
        base = {"n": int(args.n), "m": m, "gamma": args.gamma}
        single = run({**base, "floor": not args.no_floor}, REPOSITORY)
        print(json.dumps(single), file=sys.stderr, flush=True)
        for workers in (int(v) for v in args.workers.split(",")):
            row = run({**base, "workers": workers, "worker_memory": args.worker_memory,
                       "solve": args.solve}, REPOSITORY)
            rows.append({**row, "single": single})
            print(json.dumps(row), file=sys.stderr, flush=True)
    text = f"{machine()}\n\n{cluster_table(rows)}"
    print(text)
    write_results("bench_large_m_cluster", text, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
