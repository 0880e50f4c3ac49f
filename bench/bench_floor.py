"""Where a fit's time goes, against the floor of a dense Nyström fit (docs/design.md §8).

In one run and on the same data (``blobs``, n = 200 000, p = 32, m = 1000,
q = 10, rbf) this times, for each dtype, landmark strategy and scheduler:

- **floor**: the BLAS work a fit cannot avoid, per row block the distance GEMM
  X_b Z^T and the SYRK D_b^T D_b (the faster of numpy's ``D.T @ D`` and BLAS
  ``syrk`` alone into one m x m product), over the same row blocks, in the same
  dtype, on a pool of as many threads as cores with one BLAS thread each;
- **strict floor**: the same products at the machine's best, not the fit's
  blocks: the least time over row blocks of ``--strict-rows`` (and the fit's
  own), each on a pool of one thread per core with one BLAS thread, or on one
  thread with every core's BLAS threads; **fit / strict floor** is the ratio
  the docs quote;
- **blocks**: the library's own block function (kernel block, shift, SYRK,
  column sums) called on the same blocks through the same plain thread pool;
  **elementwise** = blocks - floor is the kernel's elementwise work and the
  rest of the block function;
- **landmarks**: the landmark selection; **pass**: the pass through Dask;
  **dask** = pass - blocks, the scheduling overhead; **solve**: K_mm, its
  factorisation and the small problem;
- **fit**: ``KernelPCA.fit`` end to end, best of ``--repeats`` warm runs;
- **transform**: ``transform`` of the same rows, against its floor (the
  distance GEMM plus B P).

Each is printed in seconds and as a share of the fit; "fit at % of floor" is
floor / fit. The threaded runs fit in-memory numpy data; the cluster runs
(a 2-worker ``distributed.LocalCluster``, one thread each) fit the same data
stored in Zarr.

    python bench/bench_floor.py       # docs/benchmarks.md, "Where a fit's time goes" (minutes)
    python bench/bench_floor.py --n-samples 50000 --repeats 1 --schedulers threads   # quick

``--data sklearn-blobs`` fits scikit-learn's ``make_blobs`` (10 centres in a
box of side 20) instead: with gamma = 1 / p, about 12 % of its float32 kernel
values fall below float32's smallest normal number, the case the kernels'
floor on the exponent exists for (``kpca_dask.blocks.distance_kernels``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dask
import numpy as np
from threadpoolctl import threadpool_limits

from kpca_dask import KernelPCA
from kpca_dask.blocks import statistics as block_statistics
from kpca_dask.blocks.rank_update import syrk_lower
from kpca_dask.engine.passes import nystrom as passes
from kpca_dask.engine.sampling import as_generator
from kpca_dask.engine.solve.landmark_factor import reference_row
from kpca_dask.engine.solve.nystrom import solve_small_problem
from kpca_dask.io import open_array, write_array
from kpca_dask.landmarks.strategies import select_landmarks
from kpca_dask.model.parameters import rcond_for, resolve_kernel_params
from kpca_dask.validation import as_dask_array

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine, write_results  # noqa: E402


def best_of(repeats: int, fn):
    """(best seconds, last result) of ``repeats`` calls."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), result


def in_pool(blocks, fn, threads: int) -> None:
    """Run ``fn`` on every block through a plain thread pool, one BLAS thread per thread."""
    with threadpool_limits(limits=max(1, (os.cpu_count() or 1) // threads), user_api="blas"):
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(fn, blocks))


def floor_blocks(x, Z, inner_rows, blas_syrk: bool = False):
    """The floor of one row block: distance GEMMs and SYRKs over its kernel blocks, the
    SYRK numpy's ``D.T @ D`` (a new m x m result, its triangle copied into the other) or,
    with ``blas_syrk``, BLAS ``syrk`` alone into one m x m product
    (:func:`kpca_dask.blocks.rank_update.syrk_lower`)."""
    product = _touched_product(Z.shape[0], x.dtype) if blas_syrk else None
    for start in range(0, x.shape[0], inner_rows):
        D = x[start : start + inner_rows] @ Z.T
        if blas_syrk:
            syrk_lower(D, product, beta=0.0)
        else:
            D.T @ D


_PRODUCTS = threading.local()


def _touched_product(m: int, dtype) -> np.ndarray:
    """This thread's m x m product for the BLAS SYRK, made and touched once (a fresh one
    per block would time its pages being mapped, which the machine's floor does not pay)."""
    held = getattr(_PRODUCTS, "array", None)
    if held is None or held.shape != (m, m) or held.dtype != dtype:
        held = _PRODUCTS.array = np.zeros((m, m), dtype, order="F")
        held.fill(0.0)
    return held


def strict_floor(X, Z, rows_to_try, repeats: int) -> tuple[float, str]:
    """The floor's products on all of ``X`` at the machine's best (:func:`at_best_blocks`),
    with the faster of the two SYRKs of :func:`floor_blocks`."""
    seconds, how, way = min(
        (*at_best_blocks(X, rows_to_try, repeats,
                         lambda x, rows, way=way: floor_blocks(x, Z, rows, way)), way)
        for way in (False, True))
    return seconds, f"{how}, {'BLAS syrk' if way else 'numpy D.T @ D'}"


def at_best_blocks(X, rows_to_try, repeats: int, block) -> tuple[float, str]:
    """``block(x, rows)`` over all of ``X`` at the machine's best: the least seconds over
    blocks of each of ``rows_to_try`` rows, one thread per core with one BLAS thread each or
    one thread with every core's; and how ("20000 rows, 2 x 1" threads x BLAS threads)."""
    cores = os.cpu_count() or 1
    best = (np.inf, "")
    for rows in sorted(set(rows_to_try)):
        rows = min(rows, len(X))
        blocks = [X[start : start + rows] for start in range(0, len(X), rows)]
        for threads in sorted({cores, 1}):
            seconds, _ = best_of(repeats, lambda b=blocks, r=rows, t=threads: in_pool(
                b, lambda x: block(x, r), t))
            best = min(best, (seconds, f"{rows} rows, {threads} x {cores // threads}"))
    return best


def transform_floor_block(x, Z, P):
    (x @ Z.T) @ P


def measure(X, zarr_path, dtype, strategy, scheduler, args, client=None) -> dict:
    """Seconds of each part of one fit configuration."""
    threads = os.cpu_count() or 1
    gamma = 1.0 / X.shape[1]
    params = resolve_kernel_params("rbf", X.shape[1], gamma=gamma)
    Xd, _ = as_dask_array(X)
    data = X if client is None else zarr_path
    model = KernelPCA(args.n_components, gamma=gamma, n_landmarks=args.n_landmarks,
                      landmarks=strategy, dtype=dtype, random_state=0)
    fit, model = best_of(args.repeats, lambda: model.fit(data))
    t_transform, _ = best_of(args.repeats, lambda: dask.compute(model.transform(data)))

    Xl = Xd if client is None else open_array(zarr_path)
    landmarks, chosen = best_of(args.repeats, lambda: select_landmarks(
        Xl, args.n_landmarks, strategy, rng=as_generator(0), kernel="rbf", params=params))

    solve_kmm, reference = best_of(args.repeats, lambda: reference_row(
        chosen.points, "rbf", params))
    t_pass, computed = best_of(args.repeats, lambda: passes.compute_pass(
        Xl, chosen.points, "rbf", params, np.dtype(dtype), reference))
    solve_small, _ = best_of(args.repeats, lambda: solve_small_problem(
        computed, chosen.points, "rbf", params, rcond_for(None, dtype), args.n_components,
        pass_dtype=np.dtype(dtype)))
    # The same blocks the pass sees, with the landmarks shifted as the pass shifts them.
    origin = block_statistics.kernel_origin(chosen.points, "rbf")
    Z = (chosen.points - origin).astype(dtype)
    chunks = [X[s : s + c] for s, c in zip(np.cumsum((0,) + Xd.chunks[0][:-1]), Xd.chunks[0])]
    xs = [(c - origin).astype(dtype) for c in chunks]
    inner = block_statistics.pass_block_rows(Z.shape[0], dtype)  # the fit's kernel blocks
    t_floor = min(best_of(args.repeats, lambda way=way: in_pool(
        xs, lambda x: floor_blocks(x, Z, inner, way), threads))[0] for way in (False, True))
    t_blocks, _ = best_of(args.repeats, lambda: in_pool(
        list(zip(chunks, np.cumsum((0,) + Xd.chunks[0][:-1]))),
        lambda item: block_statistics.statistics_of_block(
            None, item[0], item[1], Z, "rbf", params, np.dtype(dtype), reference, origin),
        threads))
    t_strict, strict_how = strict_floor(np.concatenate(xs), Z, [inner, *args.strict_rows],
                                        args.repeats)
    P = model.projection_.astype(dtype)
    t_transform_floor, _ = best_of(args.repeats, lambda: in_pool(
        xs, lambda x: transform_floor_block(x, Z, P), threads))
    return {"dtype": dtype, "landmarks": strategy, "scheduler": scheduler, "fit": fit,
            "floor": t_floor, "strict": t_strict, "strict_how": strict_how,
            "blocks": t_blocks, "landmark_s": landmarks, "pass": t_pass,
            "solve": solve_kmm + solve_small, "transform": t_transform,
            "transform_floor": t_transform_floor}


def table(rows: list[dict]) -> str:
    head = ("| dtype | landmarks | scheduler | fit s | floor | elementwise | landmarks "
            "| dask | solve | **fit at % of floor** | strict floor (best blocks, threads x "
            "BLAS) | **fit / strict floor** | transform s | **transform at % of floor** |")
    lines = [head, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        fit = r["fit"]

        def part(seconds, fit=fit):
            return f"{seconds:.2f} ({100 * seconds / fit:.0f} %)"

        lines.append(
            f"| {r['dtype']} | {r['landmarks']} | {r['scheduler']} | {fit:.2f} "
            f"| {part(r['floor'])} | {part(max(r['blocks'] - r['floor'], 0.0))} "
            f"| {part(r['landmark_s'])} | {part(max(r['pass'] - r['blocks'], 0.0))} "
            f"| {part(r['solve'])} | **{100 * r['floor'] / fit:.0f}** "
            f"| {r['strict']:.2f} ({r['strict_how']}) | **{fit / r['strict']:.2f}×** "
            f"| {r['transform']:.2f} | **{100 * r['transform_floor'] / r['transform']:.0f}** |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-samples", type=int, default=200_000)
    parser.add_argument("--n-features", type=int, default=32)
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--n-components", type=int, default=10)
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--landmarks", default="uniform,kmeans")
    parser.add_argument("--schedulers", default="threads,cluster")
    parser.add_argument("--repeats", type=int, default=2, help="best of this many warm runs")
    parser.add_argument("--strict-rows", default="512,2048,5000,20000,50000",
                        type=lambda text: [int(float(v)) for v in text.split(",")],
                        help="row blocks the strict floor is timed on, beside the fit's own")
    parser.add_argument("--data", choices=("blobs", "sklearn-blobs"), default="blobs",
                        help="kpca-dask's blobs, or scikit-learn's make_blobs (far-apart "
                             "clusters: many kernel values near float32's underflow)")
    args = parser.parse_args(argv)

    from kpca_dask.datasets import make_dataset

    if args.data == "sklearn-blobs":
        from sklearn.datasets import make_blobs

        X = make_blobs(args.n_samples, args.n_features, centers=10, random_state=0)[0]
    else:
        X = make_dataset("blobs", args.n_samples, n_features=args.n_features, seed=0)[0].compute()
    from kpca_dask.blocks.epilogue import compile_all

    # Compiled once per signature, then loaded from numba's disk cache.
    compile_seconds = compile_all()
    print(f"kernel epilogue: first call (compile or load from cache) {compile_seconds:.2f} s",
          file=sys.stderr, flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        zarr_path = str(Path(tmp) / "X.zarr")
        for scheduler in args.schedulers.split(","):
            client = cluster = None
            if scheduler == "cluster":
                from distributed import Client, LocalCluster

                write_array(as_dask_array(X)[0], zarr_path)
                cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
                client = Client(cluster)
            context = (dask.config.set(scheduler="threads") if client is None
                       else dask.config.set({}))
            with context:
                for dtype in args.dtypes.split(","):
                    for strategy in args.landmarks.split(","):
                        rows.append(measure(X, zarr_path, dtype, strategy, scheduler, args,
                                            client))
                        print(f"{dtype} {strategy} {scheduler}: fit {rows[-1]['fit']:.2f} s",
                              file=sys.stderr, flush=True)
            if client is not None:
                client.close()
                cluster.close()
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    text = (f"{args.data}, n = {args.n_samples:,}, p = {args.n_features}, m = {args.n_landmarks}, "
            f"q = {args.n_components}, rbf; {os.cpu_count()} cores; best of {args.repeats} "
            f"warm runs; load average after the run {' '.join(load)}\n{machine()}; kernel "
            f"epilogue's first call (compile or cache load) {compile_seconds:.2f} s\n\n"
            + table(rows))
    print(text)
    write_results("bench_floor", text, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
