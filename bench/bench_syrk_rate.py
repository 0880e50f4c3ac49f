"""The pass's symmetric update against its row-block size (docs/design.md §8, §11).

A fit's pass adds D_bᵀ D_b of every n_b × m kernel block D_b into the m × m
float64 sums G (n_b m² flops a block). Each block also reads and writes G
once, so thin blocks spend their time on memory, not flops. For each m and
each number of block rows, on every BLAS thread (the pass's one chain at
large m) and in the pass's dtype:

- **SYRK**: the faster of numpy's ``D.T @ D`` (BLAS ``syrk``, a new m × m
  result, its triangle copied into the other) and BLAS ``syrk`` alone into an
  m × m array (``_common.fastest_syrk``): the strict floor's rate
  (``bench_large_m.py``);
- **pass**: :func:`kpca_dask.blocks.statistics.add_gram`, the pass's own
  update (with the float32 m × m product the pass gives it when m is at most the
  block's rows: one ``syrk``, its triangle added into G a column panel at a time;
  column panels of the block otherwise);
- the block's size in bytes and in m² float64 words (the memory model counts
  a fit's peak in those, docs/design.md §11), and, marked "(128 MiB)", the
  rows of a small m's 128 MiB block at that m (``kernel_block_rows``; the pass
  takes up to 10 000 float32 rows once one chain takes the cores).

GFLOP/s count n_b m² flops a block (the lower triangle's multiply-adds).
Random values: BLAS's rate does not depend on them.

    python bench/bench_syrk_rate.py                           # m = 2000, 5000, 10 000
    python bench/bench_syrk_rate.py --m 10000 --rows 2000,5000,10000,20000
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import best_seconds, fastest_syrk, machine, write_results  # noqa: E402

from kpca_dask.blocks.statistics import add_gram, kernel_block_rows  # noqa: E402
from kpca_dask.blocks.workspace import gram_scratch  # noqa: E402


def measure(m: int, rows: int, dtype: np.dtype, repeats: int) -> dict:
    """Seconds and GFLOP/s of one block's SYRK and of the pass's update, at m and ``rows``."""
    rng = np.random.default_rng(0)
    D = rng.random((rows, m), dtype=np.float32).astype(dtype, copy=False)
    gram = np.zeros((m, m), order="F")
    syrk = fastest_syrk(D, repeats)
    scratch = gram_scratch(D)
    threads = os.cpu_count() or 1  # a chain running alone adds on every core
    update = best_seconds(lambda: add_gram(gram, D, scratch, threads=threads), repeats)
    flops = rows * m**2
    return {"m": m, "rows": rows, "block_mib": D.nbytes / 2**20,
            "block_words": D.nbytes / (8 * m**2), "syrk_s": syrk, "pass_s": update,
            "syrk_gflops": flops / syrk / 1e9, "pass_gflops": flops / update / 1e9}


def table(results: list[dict], dtype: np.dtype) -> str:
    lines = ["| m | block rows | block MiB | block in m² words | SYRK s | SYRK GFLOP/s "
             "| pass s | pass GFLOP/s | pass / best SYRK |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in sorted({r["m"] for r in results}):
        rows = [r for r in results if r["m"] == m]
        best = max(r["syrk_gflops"] for r in rows)
        cut = kernel_block_rows(m, dtype.itemsize)
        for r in rows:
            mark = " (128 MiB)" if r["rows"] == cut else ""
            lines.append(f"| {m} | {r['rows']}{mark} | {r['block_mib']:.0f} "
                         f"| {r['block_words']:.2f} | {r['syrk_s']:.3f} "
                         f"| {r['syrk_gflops']:.0f} | {r['pass_s']:.3f} "
                         f"| {r['pass_gflops']:.0f} | {best / r['pass_gflops']:.2f}× |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--m", default="2000,5000,10000", help="numbers of landmarks")
    parser.add_argument("--rows", default="1000,2000,5000,10000,20000",
                        help="block rows; the pass's own at each m is added")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--most-bytes", type=float, default=2**31,
                        help="skip blocks larger than this")
    args = parser.parse_args(argv)
    dtype = np.dtype(args.dtype)
    print(f"# {machine()}", file=sys.stderr)
    results = []
    for m in (int(float(v)) for v in args.m.split(",")):
        wanted = ({int(float(v)) for v in args.rows.split(",")}
                  | {kernel_block_rows(m, dtype.itemsize)})
        for rows in sorted(wanted):
            if rows * m * dtype.itemsize > args.most_bytes:
                continue
            results.append(measure(m, rows, dtype, args.repeats))
            print(results[-1], file=sys.stderr, flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = (f"{machine()}\n\n{args.dtype} blocks, every BLAS thread; load average at the end "
            f"{load}.\n\n{table(results, dtype)}")
    print(text)
    write_results("bench_syrk_rate", text, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
