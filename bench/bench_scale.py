"""Scale benchmark: `kpca-dask generate -> fit -> transform`, Zarr to Zarr, as n grows.

For each n, through the command line on a local Dask cluster:

1. ``kpca-dask generate blobs`` writes n x 32 float32 rows to Zarr (not timed
   in the throughput);
2. ``kpca-dask fit`` (m = 1000 landmarks, q = 10, float32 kernel blocks);
3. ``kpca-dask transform`` writes the n x 10 embedding to Zarr.

It records the wall time of each command, the peak resident memory of the
whole process tree (the command, the nannies and the worker processes, sampled
every 0.1 s with psutil), and rows per second. In the same run it measures the
floor (docs/design.md §8): one in-memory block per core, all at once with one BLAS
thread each, scaled to n -- the distance GEMM X_b Z^T plus the SYRK D^T D for
the fit, the distance GEMM plus B P for the transform. Fit and transform
throughput are the model's own fit time and the command's compute time
(cluster start-up excluded), against that floor.

Usage::

    python bench/bench_scale.py --sizes 1e6,1e7,5e7
    python bench/bench_scale.py --sizes 1e8 --workdir /big/disk   # 12.8 GB of data

Each size's Zarr stores are removed as soon as it is measured (unless
``--keep``), also when a command fails; a size whose data would not fit in the
free space of ``--workdir`` is refused before anything is written.

The markdown table goes to stdout and to bench/results/bench_scale.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil
from threadpoolctl import threadpool_limits

from kpca_dask import load
from kpca_dask.blocks.kernels import pairwise_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_seconds  # noqa: E402
from _fresh import start_python  # noqa: E402

#: Where tables go (git-ignored); KPCA_DASK_BENCH_RESULTS moves them, as in _common.py.
RESULTS = Path(os.environ.get("KPCA_DASK_BENCH_RESULTS",
                              Path(__file__).resolve().parent / "results"))


class PeakTreeMemory:
    """Peak summed RSS of a process and all its descendants, sampled in a thread."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._stop.is_set():
            try:
                tree = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            total = 0
            for proc in tree:
                try:
                    total += proc.memory_info().rss
                except psutil.NoSuchProcess:
                    pass
            self.peak = max(self.peak, total)
            time.sleep(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_command(args: list[str], cwd: Path) -> tuple[str, float, int]:
    """Run one kpca-dask command; return (stdout, wall seconds, peak tree RSS bytes)."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        started = time.perf_counter()
        proc = start_python(["-m", "kpca_dask", *args], cwd=cwd, stdout=stdout, stderr=stderr)
        memory = PeakTreeMemory(proc.pid)
        proc.wait()
        peak = memory.stop()
        wall = time.perf_counter() - started
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    if proc.returncode != 0:
        sys.exit(f"kpca-dask {' '.join(args)} failed:\n{err}")
    return out, wall, peak


def machine_bound(block_rows: int, n_features: int, n_landmarks: int, n_components: int,
                  repeats: int = 3) -> dict[str, float]:
    """Seconds per row (fit, transform) of the floor's BLAS work on every core at once.

    One block per core, each on its own thread with one BLAS thread, all at
    once: the floor "at the same thread count" of docs/design.md §8, as
    bench_floor.py measures it. ``ideal_*`` are one block alone divided by
    the cores, which assumes the cores scale perfectly.
    """
    rng = np.random.default_rng(0)
    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    blocks = [rng.normal(size=(block_rows, n_features)).astype(np.float32) for _ in range(cores)]
    landmarks = rng.normal(size=(n_landmarks, n_features)).astype(np.float32)
    projection = rng.normal(size=(n_landmarks, n_components)).astype(np.float32)
    gamma = 1.0 / n_features

    def best(fn):
        return best_seconds(fn, repeats)

    def on_every_core(fn):
        with ThreadPoolExecutor(cores) as pool:
            list(pool.map(fn, range(cores)))

    with threadpool_limits(1, user_api="blas"):
        kernels = [pairwise_kernel(block, landmarks, "rbf", gamma=gamma) for block in blocks]
        gemm = best(lambda: blocks[0] @ landmarks.T)
        syrk = best(lambda: kernels[0].T @ kernels[0])
        product = best(lambda: kernels[0] @ projection)
        fit_all = best(lambda: on_every_core(
            lambda i: (blocks[i] @ landmarks.T, kernels[i].T @ kernels[i])))
        transform_all = best(lambda: on_every_core(
            lambda i: (blocks[i] @ landmarks.T, kernels[i] @ projection)))
    rows = block_rows * cores
    return {"fit": fit_all / rows, "transform": transform_all / rows,
            "ideal_fit": (gemm + syrk) / rows, "ideal_transform": (gemm + product) / rows}


def bench_one(n: int, args, workdir: Path) -> dict:
    cluster = []
    if args.workers:
        cluster += ["--workers", str(args.workers)]
    if args.threads_per_worker:
        cluster += ["--threads-per-worker", str(args.threads_per_worker)]
    data, model, embedding = (workdir / f"{name}-{n}.zarr" for name in ("data", "model", "emb"))
    for path in (data, model, embedding):
        shutil.rmtree(path, ignore_errors=True)
    try:
        return _bench_one(n, args, workdir, cluster, data, model, embedding)
    finally:
        if not args.keep:
            for path in (data, model, embedding):
                shutil.rmtree(path, ignore_errors=True)


def _bench_one(n, args, workdir, cluster, data, model, embedding) -> dict:
    _, generate_wall, generate_peak = run_command(
        ["generate", "blobs", "--n-samples", str(n), "--n-features", str(args.n_features),
         "--dtype", "float32", "--chunk-rows", str(args.chunk_rows), "--out", str(data),
         *cluster], workdir)
    _, fit_wall, fit_peak = run_command(
        ["fit", str(data), "--model", str(model), "--n-components", str(args.n_components),
         "--n-landmarks", str(args.n_landmarks), "--dtype", "float32", "--seed", "0",
         *cluster], workdir)
    fit_seconds = float(load(model).fit_seconds_)  # what `kpca-dask info` prints
    out, transform_wall, transform_peak = run_command(
        ["transform", str(model), str(data), "--out", str(embedding), *cluster], workdir)
    transform_seconds = float(re.search(r"in ([0-9.]+) s", out).group(1))
    return {"n": n, "generate_wall": generate_wall, "generate_peak": generate_peak,
            "fit_wall": fit_wall, "fit_seconds": fit_seconds, "fit_peak": fit_peak,
            "transform_wall": transform_wall, "transform_seconds": transform_seconds,
            "transform_peak": transform_peak}


def table(rows: list[dict], bound: dict[str, float], args) -> str:
    fit_bound, transform_bound = bound["fit"], bound["transform"]
    lines = [
        f"p = {args.n_features} float32, m = {args.n_landmarks}, q = {args.n_components}, "
        f"{args.chunk_rows} rows per chunk; {psutil.cpu_count(logical=False)} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB.",
        "",
        "| n | fit s (wall) | fit rows/s | fit % of floor | transform s (wall) "
        "| transform rows/s | transform % of floor | peak RSS fit / transform |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        n = r["n"]
        fit_rate = n / r["fit_seconds"]
        tr_rate = n / r["transform_seconds"]
        lines.append(
            f"| {n:.0e} | {r['fit_seconds']:.1f} ({r['fit_wall']:.1f}) | {fit_rate:,.0f} "
            f"| {100 * fit_bound * fit_rate:.0f} "
            f"| {r['transform_seconds']:.1f} ({r['transform_wall']:.1f}) | {tr_rate:,.0f} "
            f"| {100 * transform_bound * tr_rate:.0f} "
            f"| {r['fit_peak'] / 2**30:.2f} / {r['transform_peak'] / 2**30:.2f} GiB |")
    load = os.getloadavg() if hasattr(os, "getloadavg") else ()
    lines += ["", f"Floor (one {args.chunk_rows}-row block per core, all cores at once, one "
                  f"BLAS thread each; GEMM + SYRK, GEMM + B P): fit {1 / fit_bound:,.0f} rows/s, "
                  f"transform {1 / transform_bound:,.0f} rows/s (one block alone x cores: "
                  f"{1 / bound['ideal_fit']:,.0f} and {1 / bound['ideal_transform']:,.0f}). "
                  "Load average at the end: " + " ".join(f"{x:.2f}" for x in load) + "."]
    return "\n".join(lines)


def check_free_space(sizes: list[int], args, workdir: Path) -> None:
    """Refuse, before writing anything, a size whose stores would not fit on the disk."""
    free = shutil.disk_usage(workdir).free
    for n in sizes:
        # float32 data plus a float64 embedding, and 10 % for metadata and slack.
        needed = 1.1 * n * (4 * args.n_features + 8 * args.n_components)
        if needed > free:
            sys.exit(f"n = {n:.0e} needs about {needed / 1e9:.1f} GB in {workdir}, which has "
                     f"{free / 1e9:.1f} GB free; pass --workdir on a larger disk.")


def parse_sizes(text: str) -> list[int]:
    return [int(float(s)) for s in text.split(",") if s.strip()]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1e6,1e7,5e7"),
                        help="comma-separated n, e.g. 1e6,1e7,5e7")
    parser.add_argument("--n-features", type=int, default=32)
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--n-components", type=int, default=10)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--workers", type=int, help="local cluster workers (default: Dask's)")
    parser.add_argument("--threads-per-worker", type=int)
    parser.add_argument("--workdir", type=Path, help="where the Zarr stores go (default: a "
                        "temporary directory; 5e7 rows need 6.4 GB)")
    parser.add_argument("--keep", action="store_true", help="keep the Zarr stores")
    args = parser.parse_args(argv)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kpca-dask-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    check_free_space(args.sizes, args, workdir)
    bound = machine_bound(args.chunk_rows, args.n_features, args.n_landmarks, args.n_components)
    rows = []
    for n in args.sizes:
        rows.append(bench_one(n, args, workdir))
        print(f"n = {n:.0e} done: fit {rows[-1]['fit_seconds']:.1f} s, "
              f"transform {rows[-1]['transform_seconds']:.1f} s", file=sys.stderr, flush=True)
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    text = table(rows, bound, args)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    command = "python bench/bench_scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    (RESULTS / "bench_scale.md").write_text(f"`{command}`\n\n{text}\n")


if __name__ == "__main__":
    main()
