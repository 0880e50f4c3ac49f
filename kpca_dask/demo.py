"""The demo behind ``make demo``: kernel PCA of 10^6 points, Zarr to Zarr.

Generates the lecture notes' two-shells data (eq. 4.1) into a local Zarr
store, fits Nyström kernel PCA (rbf, gamma = 1, m = 1000) on a local Dask
cluster, writes the 2-D embedding to Zarr and a PNG of linear PCA beside
kernel PCA, and prints the eigenvalues, the trace error and the wall time.

Run ``python -m kpca_dask.demo --help`` for the options.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import dask.array as da
import numpy as np

from .datasets import make_two_shells
from .estimator import KernelPCA


def _parse(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kpca_dask.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-samples", type=int, default=1_000_000)
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("demo-output"))
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def _plot(X_sample, labels, Y_sample, eigenvalues, n_total: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.decomposition import PCA

    linear = PCA(n_components=2).fit_transform(X_sample)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), constrained_layout=True)
    for ax, Y, title in [(axes[0], linear, "Linear PCA"),
                         (axes[1], Y_sample, "Kernel PCA (rbf, γ = 1, m = 1000 landmarks)")]:
        for shell, colour, name in [(0, "tab:blue", "inner shell (r = 1)"),
                                    (1, "tab:orange", "outer shell (r = 3)")]:
            sel = labels == shell
            ax.scatter(Y[sel, 0], Y[sel, 1], s=3, alpha=0.5, c=colour, label=name)
        ax.set(title=title, xlabel="component 1", ylabel="component 2")
    axes[0].legend(markerscale=4, loc="upper right")
    fig.suptitle(f"Two shells in R³: {len(labels):,} of {n_total:,} points shown; "
                 f"kernel eigenvalues λ₁, λ₂ = {eigenvalues[0]:.4g}, {eigenvalues[1]:.4g}")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    from distributed import Client, LocalCluster

    args = _parse(argv)
    started = time.perf_counter()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    data_path, embedding_path = out / "two_shells.zarr", out / "embedding.zarr"
    for path in (data_path, embedding_path):
        shutil.rmtree(path, ignore_errors=True)  # the demo's own outputs only

    with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        print(f"Dask dashboard: {client.dashboard_link}")
        X, labels = make_two_shells(args.n_samples, chunk_rows=args.chunk_rows, seed=args.seed)
        da.to_zarr(X, str(data_path), component="X")
        da.to_zarr(labels, str(data_path), component="shell")
        t_data = time.perf_counter()
        print(f"wrote {args.n_samples:,} x 3 points to {data_path} in {t_data - started:.1f} s")

        X = da.from_zarr(str(data_path), component="X")
        kpca = KernelPCA(n_components=2, kernel="rbf", gamma=1.0,
                         n_landmarks=args.n_landmarks, random_state=args.seed)
        kpca.fit(X)
        t_fit = time.perf_counter()
        print(f"fit: {X.numblocks[0]} blocks, one pass, {t_fit - t_data:.1f} s")

        da.to_zarr(kpca.transform(X), str(embedding_path))
        t_transform = time.perf_counter()
        print(f"transform: wrote {embedding_path} in {t_transform - t_fit:.1f} s")

    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(args.n_samples, size=min(5000, args.n_samples), replace=False))
    X_sample = da.from_zarr(str(data_path), component="X")[sample].compute()
    shells = da.from_zarr(str(data_path), component="shell")[sample].compute()
    Y_sample = da.from_zarr(str(embedding_path))[sample].compute()
    png = out / "two_shells.png"
    _plot(X_sample, shells, Y_sample, kpca.eigenvalues_, args.n_samples, png)

    print(f"eigenvalues:               {np.array2string(kpca.eigenvalues_, precision=6)}")
    print(f"explained variance ratio:  {np.array2string(kpca.explained_variance_ratio_, precision=4)}")
    print(f"Nyström trace error:       {kpca.trace_error_:.2e}")
    print(f"plot:                      {png}")
    print(f"wall time:                 {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
