"""Coupled fields: the coupled pass of kernel MCA and CCA against two single fits' passes.

Two fields of n samples, generated lazily chunk by chunk (seeded by position, never held
whole): X of ``--px`` features and Y of ``--py``, float32, in chunks of ``--chunk-rows``
rows. Each field gets ``--m`` uniform landmarks and an rbf kernel (gamma = 1 / p). In one
process, on the threaded scheduler, the benchmark times

- **X pass**, **Y pass**: the pass of a KernelPCA fit of each field alone (its sums
  n, s, G, t: one SYRK of n m^2 flops per field), with the same landmarks;
- **MCA pass**: the coupled pass of KernelMCA (each field's s and t and the cross sums
  S_xy: one GEMM of 2 n m_x m_y flops);
- **CCA pass**: the coupled pass of KernelCCA (the cross sums and each field's G);

and prints each coupled pass's ratio to the sum of the two single passes (goal for MCA:
<= 1.3), with the peak resident memory of each above what the process held before
(the pass's model: a chain's running sums per thread, m_x m_y words, plus each field's
m^2 for CCA). The data are generated in every pass alike.

    python bench/bench_coupled.py                          # n = 10^6, m = 2000 (minutes)
    python bench/bench_coupled.py --n 20000 --m 200        # quick
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial

import dask
import dask.array as da
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import PeakMemory, machine, write_results  # noqa: E402


def generated_block(seed: int, block_info=None) -> np.ndarray:
    """One chunk of a field: a shared smooth signal and noise, seeded by its position."""
    info = block_info[None]
    shape, (i, _) = info["chunk-shape"], info["chunk-location"]
    rng = np.random.default_rng([seed, i])
    signal = np.random.default_rng([0, i]).standard_normal((shape[0], 1), dtype=np.float32)
    loadings = np.random.default_rng([seed]).standard_normal((1, shape[1]), dtype=np.float32)
    return signal * loadings + rng.standard_normal(shape, dtype=np.float32)


def field(n: int, p: int, rows: int, seed: int) -> da.Array:
    chunks = (tuple(min(rows, n - s) for s in range(0, n, rows)), (p,))
    return da.map_blocks(generated_block, seed, chunks=chunks, dtype=np.float32)


def timed(fn) -> tuple[float, float]:
    """Seconds of ``fn()`` and the peak resident memory above the start, GiB."""
    memory = PeakMemory()
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    memory.stop()
    return seconds, memory.above_start_gib


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--px", type=int, default=50)
    parser.add_argument("--py", type=int, default=40)
    parser.add_argument("--m", type=int, default=2000)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    args = parser.parse_args(argv)

    from kpca_dask.engine.passes.coupled import compute_coupled_pass, field_kernel
    from kpca_dask.engine.passes.nystrom import compute_pass
    from kpca_dask.engine.solve.landmark_factor import reference_row

    X, Y = field(args.n, args.px, args.chunk_rows, 1), field(args.n, args.py, args.chunk_rows, 2)
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(args.n, size=args.m, replace=False))
    sides, singles = [], []
    for data in (X, Y):
        Z = data[rows].compute().astype(np.float64)
        params = {"gamma": 1.0 / data.shape[1]}
        reference = reference_row(Z, "rbf", params)
        sides.append(field_kernel(data, Z, "rbf", params, reference, np.float32))
        singles.append((data, Z, params, reference))
    figures = {}
    with dask.config.set(scheduler="threads"):
        for name, (data, Z, params, reference) in zip(("X pass", "Y pass"), singles):
            figures[name] = timed(partial(compute_pass, data, Z, "rbf", params, np.float32,
                                          reference))
        figures["MCA pass"] = timed(lambda: compute_coupled_pass(X, Y, *sides, np.float32,
                                                                 within=False))
        figures["CCA pass"] = timed(lambda: compute_coupled_pass(X, Y, *sides, np.float32,
                                                                 within=True))
    both = figures["X pass"][0] + figures["Y pass"][0]
    lines = [f"{machine()}; load average {os.getloadavg()[0]:.2f} at the end",
             f"n = {args.n}, p_x = {args.px}, p_y = {args.py}, m_x = m_y = {args.m}, rbf, "
             f"float32 blocks, chunks of {args.chunk_rows} rows, threads", "",
             "| pass | seconds | / (X pass + Y pass) | peak above start (GiB) |",
             "|---|---:|---:|---:|"]
    for name, (seconds, peak) in figures.items():
        lines.append(f"| {name} | {seconds:.1f} | {seconds / both:.2f} | {peak:.2f} |")
    text = "\n".join(lines)
    print(text)
    write_results("bench_coupled", text, argv)
    return text


if __name__ == "__main__":
    main()
