"""What the benchmarks share: a peak-memory sampler and where their tables go."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

from _fresh import run_python  # first: it forks before anything computes (tiny runs)

from kpca_dask.diagnostics import MemoryWatch

#: Tables and cached references (git-ignored); KPCA_DASK_BENCH_RESULTS moves them (the
#: test suite's smoke runs write there, not over the real tables).
RESULTS = Path(os.environ.get("KPCA_DASK_BENCH_RESULTS",
                              Path(__file__).resolve().parent / "results"))


class PeakMemory(MemoryWatch):
    """:class:`kpca_dask.diagnostics.MemoryWatch` in GiB, sampled every 50 ms.

    ``start_gib`` is the memory when sampling began, ``peak_gib`` the largest
    sampled, ``above_start_gib`` their difference: what the measured code held
    beyond what was there before (imports, data), whatever the set-up peaked at.
    """

    def __init__(self, every: float = 0.05):
        super().__init__(every)

    @property
    def start_gib(self) -> float:
        return self.start / 2**30

    @property
    def peak_gib(self) -> float:
        return self.peak / 2**30

    @property
    def above_start_gib(self) -> float:
        return self.above_start / 2**30


def best_seconds(fn, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def fastest_syrk(D, repeats: int = 2) -> float:
    """Seconds of the fastest ``D^T D`` this machine has for the block ``D``: numpy's
    ``D.T @ D`` (BLAS ``syrk``, then a copy into the other triangle) or BLAS ``syrk``
    alone into an m x m array already touched
    (:func:`kpca_dask.blocks.rank_update.syrk_lower`), the least of ``repeats`` tries each.
    """
    import numpy as np

    from kpca_dask.blocks.rank_update import syrk_lower

    products = [np.ones((D.shape[1], D.shape[1]), D.dtype, order="F")]  # pages touched
    blas = best_seconds(lambda: syrk_lower(D, products[0], beta=0.0), repeats)
    products.clear()  # its m^2 words, before numpy makes its own
    return min(blas, best_seconds(lambda: D.T @ D, repeats))


def write_results(name: str, text: str, argv: list[str] | None) -> Path:
    """Write a benchmark's table to ``bench/results/<name>.md``, headed by its command."""
    RESULTS.mkdir(exist_ok=True)
    command = f"python bench/{name}.py " + " ".join(argv if argv is not None else sys.argv[1:])
    path = RESULTS / f"{name}.md"
    path.write_text(f"`{command.strip()}`\n\n{text}\n")
    return path


def machine() -> str:
    """The CPU, numpy's SIMD level and OpenBLAS's kernel, for a benchmark's header.

    numpy's float64 exp is fast on X86_V4 (AVX-512) only and OpenBLAS picks
    its kernels by CPU: figures from different CPUs differ for these reasons.
    """
    import numpy as np
    from threadpoolctl import threadpool_info

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_features__ as features
    levels = [name for name in ("X86_V4", "X86_V3", "X86_V2", "AVX512F", "AVX2", "ASIMD", "SVE")
              if features.get(name)]
    blas = [f"{pool['internal_api']} {pool.get('version')} {pool.get('architecture', '?')}"
            for pool in threadpool_info() if pool.get("user_api") == "blas"]
    return (f"CPU {cpu}; numpy {np.__version__} SIMD {levels[0] if levels else 'baseline'}; "
            f"BLAS {', '.join(blas) or '?'}")


def measured_apart(script: str, spec: dict, paths: list, label: str) -> dict:
    """``python SCRIPT --measure SPEC`` in a fresh process, so that its peak memory is its
    own, with ``paths`` first on its PYTHONPATH: the JSON it printed last. A failure ends
    the benchmark with the process's stacks (``label`` names the run)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths))}
    done = run_python(["-X", "faulthandler", script, "--measure", json.dumps(spec)], env=env)
    if done.returncode != 0:
        # faulthandler's stacks come before its long list of extension modules: keep them.
        stacks = done.stderr.split("\nExtension modules:")[0]
        raise SystemExit(f"{label} ended with {done.returncode}:\n{stacks[-6000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
