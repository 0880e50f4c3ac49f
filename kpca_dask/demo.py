"""The demo behind ``make demo``: kernel PCA of 10^6 points, Zarr to Zarr.

Generates the lecture notes' two-shells data (eq. 4.1) into a local Zarr
store, fits Nyström kernel PCA (rbf, gamma = 1, m = 1000 by default) on a local Dask
cluster, writes the 2-D embedding to Zarr and a PNG of linear PCA beside
kernel PCA, and prints the eigenvalues, the trace error and the wall time.

Run ``python -m kpca_dask.demo --help`` for the options.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from .dask_client import get_client
from .datasets import make_two_shells
from .engine.sampling import as_generator, sample_rows, take_rows
from .estimators.kernel_pca import KernelPCA
from .io import open_array, open_group, write_embedding, write_group


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


def _kernel_title(n_landmarks: int) -> str:
    return f"Kernel PCA (rbf, γ = 1, m = {n_landmarks:,} landmarks)"


def _plot(X_sample, labels, Y_sample, eigenvalues, n_total: int, n_landmarks: int,
          path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.decomposition import PCA

    linear = PCA(n_components=2).fit_transform(X_sample)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), constrained_layout=True)
    for ax, Y, title in [(axes[0], linear, "Linear PCA"),
                         (axes[1], Y_sample, _kernel_title(n_landmarks))]:
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
    args = _parse(argv)
    started = time.perf_counter()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    data_path, embedding_path = out / "two_shells.zarr", out / "embedding.zarr"

    with get_client(n_workers=args.workers, threads_per_worker=1) as client:
        print(f"Dask dashboard: {client.dashboard_link}")
        X, labels = make_two_shells(args.n_samples, chunk_rows=args.chunk_rows, seed=args.seed)
        # overwrite: the demo replaces its own outputs of an earlier run.
        write_group({"X": X, "shell": labels}, data_path, overwrite=True)
        t_data = time.perf_counter()
        print(f"wrote {args.n_samples:,} x 3 points to {data_path} in {t_data - started:.1f} s")

        X = open_array(data_path, array="X")
        kpca = KernelPCA(n_components=2, kernel="rbf", gamma=1.0,
                         n_landmarks=args.n_landmarks, random_state=args.seed)
        kpca.fit(X)
        t_fit = time.perf_counter()
        print(f"fit: {X.numblocks[0]} blocks, one pass, {t_fit - t_data:.1f} s")

        write_embedding(kpca.transform(X), embedding_path, overwrite=True)
        t_transform = time.perf_counter()
        print(f"transform: wrote {embedding_path} in {t_transform - t_fit:.1f} s")

        rng = as_generator(args.seed)
        X_sample, sample = sample_rows(X, 5000, rng, purpose="drawing points to plot")
        shells = open_group(data_path)["shell"].get_orthogonal_selection((sample,))
        Y_sample = take_rows(open_array(embedding_path), sample, purpose="drawing points to plot")
    png = out / "two_shells.png"
    _plot(X_sample, shells, Y_sample, kpca.eigenvalues_, args.n_samples, kpca.n_landmarks_, png)

    print(f"eigenvalues:               {np.array2string(kpca.eigenvalues_, precision=6)}")
    ratios = np.array2string(kpca.explained_variance_ratio_, precision=4)
    print(f"explained variance ratio:  {ratios}")
    print(f"Nyström trace error:       {kpca.trace_error_:.2e}")
    print(f"plot:                      {png}")
    print(f"wall time:                 {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
