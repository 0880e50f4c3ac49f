"""The fit's memory on a dask DataFrame of unknown partition lengths, against the same rows
as a dask array (docs/guide/memory.md).

The rows are generated partition by partition from fixed seeds (nothing is
stored): once as a ``dd.from_map`` frame, which keeps no row counts, and once
as a dask array of the same blocks. Each fit (threaded scheduler, rbf, 200
uniform landmarks, float32) runs in a fresh process; the table gives its time
and its peak resident memory above what the process held before it (after a
warm-up fit). Goal: the frame within 1.2x the array's memory.

``--before PATH`` repeats the frame's fit with the kpca_dask package found at
PATH (e.g. a worktree of an older commit).

    python bench/bench_frame_memory.py                       # 1e7 x 32 float32: 1.28 GB
    python bench/bench_frame_memory.py --before ../old        # and the code before
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine, write_results  # noqa: E402
from _fresh import run_python  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]
N_FEATURES = 32


def partition(i: int, rows: int):
    """Partition i: ``rows`` float32 rows fixed by i."""
    import numpy as np
    import pandas as pd

    values = np.random.default_rng(i).standard_normal((rows, N_FEATURES), dtype=np.float32)
    return pd.DataFrame(values, columns=[f"f{j}" for j in range(N_FEATURES)])


def _block(i: int, rows: int):
    return partition(i, rows).to_numpy()


def measure(spec: dict) -> dict:
    """One fit in this process; run by :func:`run` in a fresh one."""
    import dask
    import dask.array as da
    import dask.dataframe as dd
    import numpy as np
    from _common import PeakMemory

    from kpca_dask import KernelPCA

    n_parts, rows = spec["partitions"], spec["rows"]
    if spec["input"] == "frame":
        X = dd.from_map(partition, range(n_parts), rows=rows, enforce_metadata=False)
    else:
        blocks = [da.from_delayed(dask.delayed(_block, pure=True)(i, rows),
                                  (rows, N_FEATURES), np.float32) for i in range(n_parts)]
        X = da.concatenate(blocks)
    kpca = KernelPCA(5, n_landmarks=200, landmarks="uniform", gamma=1 / N_FEATURES,
                     dtype="float32", random_state=0)
    with dask.config.set(scheduler="threads"):
        KernelPCA(2, n_landmarks=20, gamma=0.1, dtype="float32").fit(
            np.random.default_rng(0).normal(size=(500, N_FEATURES)))
        memory = PeakMemory()
        started = time.perf_counter()
        kpca.fit(X)
        seconds = time.perf_counter() - started
    memory.stop()
    return {"input": spec["input"], "code": spec["code"], "fit": seconds,
            "peak_gib": memory.above_start_gib, "lambda1": float(kpca.eigenvalues_[0])}


def run(spec: dict, package: Path) -> dict:
    """:func:`measure` in a fresh process, importing kpca_dask from ``package``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(package), str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    out = run_python([__file__, "--measure", json.dumps(spec)], env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=float, default=1e7, help="rows (default 1e7: 1.28 GB)")
    parser.add_argument("--rows-per-partition", type=int, default=250_000)
    parser.add_argument("--before", type=Path, help="a checkout of older code to compare")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(json.loads(args.measure))))
        return
    rows = args.rows_per_partition
    spec = {"partitions": max(1, int(args.n) // rows), "rows": rows}
    n = spec["partitions"] * rows
    runs = [("array", "this", REPOSITORY), ("frame", "this", REPOSITORY)]
    if args.before:
        runs.append(("frame", "before", args.before.resolve()))
    results = []
    for kind, code, package in runs:
        result = run({**spec, "input": kind, "code": code}, package)
        print(json.dumps(result), flush=True)
        results.append(result)
    array_peak = results[0]["peak_gib"]
    lines = [f"# {machine()}",
             f"# n = {n} x {N_FEATURES} float32 ({n * N_FEATURES * 4 / 1e9:.2f} GB) in "
             f"{spec['partitions']} partitions; rbf, m = 200 uniform, threaded scheduler",
             "| input | code | fit (s) | peak above start (GiB) | / array |",
             "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {'dask array' if r['input'] == 'array' else 'frame, unknown lengths'} "
                     f"| {r['code']} | {r['fit']:.1f} | {r['peak_gib']:.2f} "
                     f"| **{r['peak_gib'] / array_peak:.2f}** |")
    text = "\n".join(lines)
    print(text)
    write_results("bench_frame_memory", text, argv)


if __name__ == "__main__":
    main()
