"""Wide data: a fit and transform of data chunked along the features (docs/design.md §12).

For each p, in a fresh process: n rows of p float32 features generated lazily
(seeded per chunk, by ``map_blocks``) in chunks of ``--chunk`` rows x
columns, fitted by ``KernelPCA(n_landmarks=m, landmarks="uniform", dtype="float32")``
(rbf, gamma = 1 / p) and transformed. It prints

- **generate**: one read of every chunk (the generator alone);
- **fit + transform**: end to end, the two reads of the data included;
- **floor**: the BLAS work the two cannot avoid, timed in the same process on
  blocks of the same shapes: per (row block, feature chunk) the kernel-block
  product X_bc Z_c^T twice (fit and transform), per row block the symmetric
  update D_b^T D_b and the product B_b P, on a pool of as many threads as
  cores with one BLAS thread each;
- **ratio**: (fit + transform) / floor, and (fit + transform - 3 generate) /
  floor, the ratio without the generator: the data are made three times, for
  the landmarks' sample (at n = 4000 its runs of rows touch every row block),
  the pass and the transform;
- **peak**: the largest resident memory sampled during fit and transform,
  above what the process held before (goal: flat in p, <= 4 GiB at p = 10^6).

``--data low-rank`` makes the rows as a user writes them instead:
``L @ F + noise`` of ``dask.array.random.default_rng`` arrays (rank 10 plus
unit noise) in the same chunks. A plain ``X.sum(axis=1)`` of such rows holds a
row block's products at once (dask's threaded scheduler runs the tasks made
ready last first); the fit and the transform make each chunk inside the task
that uses it, so their peak is the seeded data's.

With ``--exact``, T-mode exact kernel PCA: ``ExactKernelPCA`` of an n x p
float64 array generated the same way, its n x n Gram summed over feature chunks.

    python bench/bench_wide.py                                   # the table (minutes)
    python bench/bench_wide.py --p 1e4 --n 1000 --m 50 --exact-n 300 --exact-p 2e4   # quick
    python bench/bench_wide.py --p 1e6 --no-exact --data low-rank   # as a user measures
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import dask.array as da
import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PeakMemory, machine, write_results  # noqa: E402
from _fresh import run_python  # noqa: E402


def generated_block(seed: int, dtype: str, block_info=None) -> np.ndarray:
    """One chunk of the data: seeded by its position, so any chunk can be made alone."""
    info = block_info[None]
    shape, (i, j) = info["chunk-shape"], info["chunk-location"]
    rng = np.random.default_rng([seed, i, j])
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype, copy=False)


def generated(n: int, p: int, chunk: tuple[int, int], dtype: str, seed: int = 0) -> da.Array:
    """n x p data made chunk by chunk when read (never held whole)."""
    rows, columns = chunk
    chunks = (tuple(min(rows, n - s) for s in range(0, n, rows)),
              tuple(min(columns, p - s) for s in range(0, p, columns)))
    return da.map_blocks(generated_block, seed, dtype, chunks=chunks, dtype=dtype,
                         meta=np.empty((0, 0), dtype))


def low_rank(n: int, p: int, chunk: tuple[int, int], dtype: str, rank: int = 10,
             seed: int = 0) -> da.Array:
    """n x p data as a user writes them: ``L @ F + noise`` of dask's own random arrays (rank
    ``rank`` plus unit noise), in chunks of ``chunk``. dask makes the noise chunks as tasks of
    their own, and holds some of them before they are used: what a user's fit then holds."""
    rows, columns = chunk
    rng = da.random.default_rng(seed)
    L = rng.standard_normal((n, rank), chunks=(rows, rank), dtype=np.float32)
    F = rng.standard_normal((rank, p), chunks=(rank, columns), dtype=np.float32)
    noise = rng.standard_normal((n, p), chunks=(rows, columns), dtype=np.float32)
    return (L @ F + noise).astype(dtype, copy=False)


def floor_seconds(n: int, p: int, chunk: tuple[int, int], m: int, q: int) -> float:
    """The BLAS work of a fit and a transform, on blocks of the same shapes (float32)."""
    rows, columns = min(chunk[0], n), min(chunk[1], p)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((rows, columns), dtype=np.float32)
    z = rng.standard_normal((m, columns), dtype=np.float32)
    b = rng.standard_normal((rows, m), dtype=np.float32)
    P = rng.standard_normal((m, q), dtype=np.float32)
    n_row_blocks, n_chunks = -(-n // rows), -(-p // columns)
    threads = os.cpu_count() or 1

    def row_block(_):
        for _ in range(2 * n_chunks):  # the fit's and the transform's kernel blocks
            x @ z.T
        b.T @ b
        b @ P

    with threadpool_limits(limits=1, user_api="blas"):
        with ThreadPoolExecutor(threads) as pool:
            started = time.perf_counter()
            list(pool.map(row_block, range(n_row_blocks)))
            return time.perf_counter() - started


def run_one(args) -> dict:
    """Fit and transform at one p, in this process: the figures as a dict."""
    from kpca_dask import KernelPCA

    n, p, m = int(args.n), int(args.p[0]), args.m
    chunk = (args.chunk_rows, int(args.chunk_columns))
    X = (low_rank if args.data == "low-rank" else generated)(n, p, chunk, "float32")
    started = time.perf_counter()
    X.sum(axis=1).compute()
    generate = time.perf_counter() - started
    peak = PeakMemory()
    started = time.perf_counter()
    kpca = KernelPCA(n_components=args.q, n_landmarks=m, landmarks="uniform", dtype="float32",
                     random_state=0).fit(X)
    fit = time.perf_counter() - started
    Y = kpca.transform(X).compute()
    total = time.perf_counter() - started
    peak.stop()
    floor = floor_seconds(n, p, chunk, m, args.q)
    return {"p": p, "n": n, "m": m, "generate_s": generate, "fit_s": fit,
            "fit_transform_s": total, "floor_s": floor, "ratio": total / floor,
            "ratio_without_generate": (total - 3 * generate) / floor,
            "peak_gib": peak.above_start_gib, "finite": bool(np.isfinite(Y).all())}


def run_exact(args) -> dict:
    """T-mode exact kernel PCA at n x p float64, in this process."""
    from kpca_dask import ExactKernelPCA

    n, p = int(args.exact_n), int(args.exact_p)
    X = generated(n, p, (args.chunk_rows, int(args.chunk_columns)), "float64")
    peak = PeakMemory()
    started = time.perf_counter()
    Y = ExactKernelPCA(n_components=args.q).fit_transform(X)
    seconds = time.perf_counter() - started
    peak.stop()
    return {"n": n, "p": p, "seconds": seconds, "peak_gib": peak.above_start_gib,
            "gram_gib": 8 * n * n / 2**30, "lazy_gib": 8 * n * p / 2**30,
            "finite": bool(np.isfinite(Y).all())}


def in_fresh_process(argv: list[str]) -> dict:
    result = run_python([os.path.abspath(__file__), *argv])
    if result.returncode:
        raise SystemExit(result.stdout + result.stderr)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=4000)
    parser.add_argument("--p", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    parser.add_argument("--m", type=int, default=400)
    parser.add_argument("--q", type=int, default=10)
    parser.add_argument("--chunk-rows", type=int, default=500)
    parser.add_argument("--chunk-columns", type=float, default=5e4)
    parser.add_argument("--exact-n", type=float, default=3000)
    parser.add_argument("--exact-p", type=float, default=2e5)
    parser.add_argument("--no-exact", action="store_true")
    parser.add_argument("--data", choices=["seeded", "low-rank"], default="seeded",
                        help="seeded chunks made by map_blocks, or L @ F + noise of dask's "
                        "random arrays, as a user writes them")
    parser.add_argument("--one", choices=["wide", "exact"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args) if args.one == "wide" else run_exact(args)))
        return
    common = ["--n", str(args.n), "--m", str(args.m), "--q", str(args.q),
              "--chunk-rows", str(args.chunk_rows), "--chunk-columns", str(args.chunk_columns),
              "--data", args.data]
    lines = [machine(), "",
             f"n = {int(args.n)}, m = {args.m}, float32, chunks of "
             f"({args.chunk_rows}, {int(args.chunk_columns)}), rbf, uniform landmarks, "
             f"{args.data} data", "",
             "| p | generate (s) | fit (s) | fit + transform (s) | floor (s) | ratio | "
             "ratio without generate | peak (GiB) |",
             "|---|---|---|---|---|---|---|---|"]
    for p in args.p:
        r = in_fresh_process([*common, "--p", str(p), "--one", "wide"])
        lines.append(f"| {r['p']:.0e} | {r['generate_s']:.1f} | {r['fit_s']:.1f} | "
                     f"{r['fit_transform_s']:.1f} | {r['floor_s']:.1f} | {r['ratio']:.2f} | "
                     f"{r['ratio_without_generate']:.2f} | {r['peak_gib']:.2f} |")
        print(lines[-1], flush=True)
    if not args.no_exact:
        r = in_fresh_process([*common, "--exact-n", str(args.exact_n), "--exact-p",
                              str(args.exact_p), "--one", "exact"])
        lines += ["", "T-mode exact kernel PCA (float64):", "",
                  "| n | p | lazy data (GiB) | Gram (GiB) | fit_transform (s) | peak (GiB) |",
                  "|---|---|---|---|---|---|",
                  f"| {r['n']} | {r['p']:.0e} | {r['lazy_gib']:.2f} | {r['gram_gib']:.3f} | "
                  f"{r['seconds']:.1f} | {r['peak_gib']:.2f} |"]
    text = "\n".join(lines)
    print(text)
    write_results("bench_wide", text, argv)


if __name__ == "__main__":
    main()
