"""Updating a saved model with appended rows against refitting the grown store.

A Zarr store of n rows is fitted and the model saved; then 10 % more rows are
appended to the store. Three ways to get the model of all 1.1 n rows, timed
in the same run, each from the saved model or the store on disk:

- update: load the model, ``partial_fit`` the appended rows, save
  (what ``kpca-dask update MODEL DATA.zarr --rows n:`` does);
- refit with the same landmarks and gamma: one pass over all 1.1 n rows;
- refit from scratch: landmark choice (k-means) and a pass over all rows.

The update and the same-landmark refit are the same model: the table gives
their largest relative eigenvalue difference.

    python bench/bench_update.py                          # n = 10^6, p = 32, m = 1000
    python bench/bench_update.py --n-samples 200000 --n-landmarks 500   # quick check
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

#: Where tables go (git-ignored); KPCA_DASK_BENCH_RESULTS moves them, as in _common.py.
RESULTS = Path(os.environ.get("KPCA_DASK_BENCH_RESULTS",
                              Path(__file__).resolve().parent / "results"))


def _timed(function):
    started = time.perf_counter()
    value = function()
    return value, time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-samples", type=int, default=1_000_000)
    parser.add_argument("--n-features", type=int, default=32)
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--n-components", type=int, default=10)
    parser.add_argument("--growth", type=float, default=0.1, help="fraction of rows appended")
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    args = parser.parse_args(argv)

    import kpca_dask
    from kpca_dask import KernelPCA
    from kpca_dask.datasets import make_dataset
    from kpca_dask.io import open_array

    n, added = args.n_samples, int(round(args.growth * args.n_samples))
    X, _ = make_dataset("blobs", n + added, n_features=args.n_features,
                        chunk_rows=args.chunk_rows, seed=0)
    X = X.compute()
    params = {"n_components": args.n_components, "gamma": 1.0 / args.n_features}
    with tempfile.TemporaryDirectory() as tmp:
        store, model_path = Path(tmp) / "data.zarr", Path(tmp) / "model.zarr"
        z = zarr.create_array(str(store), data=X[:n], chunks=(args.chunk_rows, X.shape[1]))
        KernelPCA(n_landmarks=args.n_landmarks, random_state=0, **params).fit(
            open_array(str(store))).save(model_path)
        z.append(X[n:])  # the day of new rows

        def update():
            model = kpca_dask.load(model_path).partial_fit(open_array(str(store))[n:])
            model.save(Path(tmp) / "updated.zarr", overwrite=True)
            return model

        base = kpca_dask.load(model_path)

        def refit_same_landmarks():
            model = KernelPCA(landmarks=base.landmarks_, **{**params, "gamma": base.gamma_})
            model.fit(open_array(str(store))).save(Path(tmp) / "refit.zarr", overwrite=True)
            return model

        def refit_from_scratch():
            model = KernelPCA(n_landmarks=args.n_landmarks, random_state=0, **params)
            model.fit(open_array(str(store))).save(Path(tmp) / "scratch.zarr", overwrite=True)
            return model

        ways = {"update": update, "refit": refit_same_landmarks, "scratch": refit_from_scratch}
        seconds = dict.fromkeys(ways, float("inf"))
        models = {}
        # Interleaved, so that a change in the machine's load hits the three alike.
        for _ in range(args.repeats):
            for name, way in ways.items():
                models[name], taken = _timed(way)
                seconds[name] = min(seconds[name], taken)

    difference = float(np.max(np.abs(models["update"].eigenvalues_
                                      - models["refit"].eigenvalues_)
                              / models["refit"].eigenvalues_))
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    lines = [
        f"n = {n:,} rows + {added:,} appended ({100 * args.growth:.0f} %), "
        f"p = {args.n_features}, m = {args.n_landmarks}, q = {args.n_components}, rbf, "
        f"float64, threads, best of {args.repeats}; load average {' '.join(load)}",
        "",
        "| way to the model of the grown store | rows read | seconds | ratio to update |",
        "|---|---|---|---|",
        f"| `update`: partial_fit of the appended rows | {added:,} | "
        f"{seconds['update']:.2f} | 1 |",
        f"| refit, same landmarks and gamma | {n + added:,} | {seconds['refit']:.2f} | "
        f"{seconds['refit'] / seconds['update']:.1f} |",
        f"| refit from scratch (k-means landmarks) | {n + added:,} | "
        f"{seconds['scratch']:.2f} | {seconds['scratch'] / seconds['update']:.1f} |",
        "",
        f"update vs same-landmark refit: largest relative eigenvalue difference "
        f"{difference:.1e}",
    ]
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_update.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
