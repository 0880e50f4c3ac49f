"""Landmarks drawn as runs of contiguous rows, on samples that are a time series.

A fit draws its row samples (uniform landmarks, k-means' sample) as seeded runs of
contiguous rows, so that a sample reads few stored chunks (docs/design.md §2). Rows that are
independent (MNIST) lose nothing by it; the samples of a field are a time series, and
neighbouring time steps are alike, so a run of them carries less than as many independent
rows. This measures what that costs in the Nyström approximation of a red-noise field, by
the exact relative trace error of the fit, ``trace_error_`` (the pass's own sum over every
row, docs/design.md §2), mean and standard deviation over the seeds, for:

- **uniform (runs)**: ``landmarks="uniform"``, as a fit draws them;
- **uniform (i.i.d.)**: m rows drawn independently, given as landmark points;
- **kmeans (runs)**: ``landmarks="kmeans"``, the default, its sample of 20 m rows drawn
  as a fit draws it;
- **kmeans (i.i.d.)**: the same k-means (:func:`kpca_dask.landmarks.kmeans_clustering.
  kmeans_centroids`, 5 Lloyd iterations) on 20 m rows drawn independently.

The field: n time steps of ``--p`` features, six AR(1) modes of ``--memory`` steps' e-folding
(about a month of daily data) plus a slow cycle of ``--cycle`` steps in the first, mixed and
with white noise; rbf kernel, gamma = 1 / (2 p); q = 5; the threaded scheduler.

    python bench/bench_landmark_runs.py                  # n = 200 000, m = 200, 4 seeds
    python bench/bench_landmark_runs.py --n 20000 --m 100 400
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import machine, write_results  # noqa: E402


def red_noise_field(n: int, p: int, memory: float, cycle: float, seed: int = 0):
    """n x p rows: six AR(1) modes of e-folding ``memory`` steps (a cycle of ``cycle`` steps
    added to the first), mixed into p features, plus white noise."""
    import numpy as np
    from scipy.signal import lfilter

    rng = np.random.default_rng(seed)
    phi = np.exp(-1.0 / memory)
    modes = lfilter([np.sqrt(1 - phi**2)], [1.0, -phi], rng.normal(size=(n, 6)), axis=0)
    modes[:, 0] += 2 * np.sin(2 * np.pi * np.arange(n) / cycle)
    return modes @ rng.normal(size=(6, p)) + 0.3 * rng.normal(size=(n, p))


def trace_errors(X, m: int, way: str, seeds: list[int], chunk_rows: int) -> list[float]:
    """The fit's trace error for each seed, with landmarks drawn ``way``."""
    import dask.array as da
    import numpy as np

    from kpca_dask import KernelPCA
    from kpca_dask.landmarks.kmeans_clustering import kmeans_centroids

    n, p = X.shape
    rows = da.from_array(X, chunks=(chunk_rows, p))
    errors = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        if way == "uniform (i.i.d.)":
            landmarks = X[np.sort(rng.choice(n, m, replace=False))]
        elif way == "kmeans (i.i.d.)":
            sample = X[np.sort(rng.choice(n, min(n, 20 * m), replace=False))]
            landmarks = kmeans_centroids(sample, m, rng=rng, n_iter=5)
        else:
            landmarks = way.split()[0]
        model = KernelPCA(5, kernel="rbf", gamma=1.0 / (2 * p), n_landmarks=m,
                          landmarks=landmarks, random_state=seed).fit(rows)
        errors.append(float(model.trace_error_))
    return errors


WAYS = ("uniform (runs)", "uniform (i.i.d.)", "kmeans (runs)", "kmeans (i.i.d.)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="time steps (rows)")
    parser.add_argument("--p", type=int, default=40, help="features")
    parser.add_argument("--m", type=int, nargs="+", default=[200], help="landmarks")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--memory", type=float, default=30.0,
                        help="the AR(1) modes' e-folding, in steps")
    parser.add_argument("--cycle", type=float, default=3650.0,
                        help="the period of the slow cycle, in steps")
    parser.add_argument("--chunk-rows", type=int, default=10_000)
    args = parser.parse_args(argv)

    import dask
    import numpy as np

    from kpca_dask.engine.sampling import run_rows

    dask.config.set(scheduler="threads")
    X = red_noise_field(args.n, args.p, args.memory, args.cycle)
    load = os.getloadavg()[0]
    lines = [f"{machine()}; load average before {load:.2f}", "",
             f"Red-noise field: n = {args.n}, p = {args.p}, AR(1) e-folding {args.memory:g} "
             f"steps, cycle {args.cycle:g} steps; samples drawn in slots of "
             f"{run_rows(args.n)} rows; rbf, gamma = 1 / (2 p); seeds {args.seeds}.", "",
             "| m | " + " | ".join(WAYS) + " |", "|---:|" + "---:|" * len(WAYS)]
    for m in args.m:
        cells = []
        for way in WAYS:
            errors = trace_errors(X, m, way, args.seeds, args.chunk_rows)
            cells.append(f"{np.mean(errors):.3f} ± {np.std(errors):.3f}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "Relative trace error of the Nyström approximation (lower is better)."]
    text = "\n".join(lines)
    print(text)
    write_results("bench_landmark_runs", text, argv)


if __name__ == "__main__":
    main()
