"""MNIST denoising: pre-images of kernel PCA learned on more data than exact methods can hold.

Pixels scaled to [0, 1]; Gaussian noise of standard deviation ``--noise`` (0.5)
is added to the training and the test images. Each method learns on noisy
training images, reconstructs the noisy test images, and is scored by the
mean squared error against the clean test images:

(a) linear PCA (scikit-learn), fitted on all 60 000 noisy training images;
(b) scikit-learn ``KernelPCA(fit_inverse_transform=True)`` on a random subset
    of ``--subset`` training images (its n x n kernel matrices bound n);
(c) kpca-dask on the same subset;
(d) kpca-dask on all 60 000 noisy training images, read block by block from Zarr.

``--train-rows N`` uses the first N training images instead of all 60 000 (a
quick check of the script, not a result).

q, gamma and alpha are chosen on a validation split: 1 000 other noisy training
images, scored against their clean versions, for kpca-dask on the subset over
a small grid (gamma = c / median squared distance of the noisy images, q,
alpha), and for linear PCA over q. The chosen values are used by (b), (c) and
(d). The test images are never seen before the final scores.

Usage::

    python bench/bench_denoising.py [--subset 5000] [--n-landmarks 1000]

The markdown table goes to stdout and to bench/results/bench_denoising.md.
Peak memory is the peak RSS of this process during each step above what it
held before the step (sampled every 50 ms).
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import psutil
from sklearn.decomposition import PCA
from sklearn.decomposition import KernelPCA as SklearnKernelPCA

from kpca_dask import KernelPCA
from kpca_dask.blocks.distance_kernels import squared_distances
from kpca_dask.datasets import load_mnist
from kpca_dask.io import open_array, write_array

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PeakMemory, write_results  # noqa: E402

DEFAULT_DATA = (Path(os.environ["KPCA_DASK_DATA"]) if "KPCA_DASK_DATA" in os.environ
                else Path(__file__).resolve().parents[2] / "shared" / "data") / "mnist"


def noisy(images: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    return images + np.random.default_rng(seed).normal(scale=sigma, size=images.shape)


def mse(estimate, clean) -> float:
    return float(np.mean((np.asarray(estimate) - clean) ** 2))


def median_squared_distance(X: np.ndarray, n: int = 1000, seed: int = 0) -> float:
    sample = X[np.random.default_rng(seed).choice(len(X), n, replace=False)]
    d2 = squared_distances(sample, sample)
    return float(np.median(d2[np.triu_indices(n, 1)]))


def kpca_dask(q, gamma, alpha, m, landmarks, seed=0):
    return KernelPCA(n_components=q, kernel="rbf", gamma=gamma, n_landmarks=m,
                     landmarks=landmarks, random_state=seed, fit_inverse_transform=True,
                     alpha=alpha)


def denoise(model, X):
    return model.inverse_transform(model.transform(X))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="folder of the MNIST .gz files (default ../shared/data/mnist, or "
                             "$KPCA_DASK_DATA/mnist)")
    parser.add_argument("--subset", type=int, default=5000,
                        help="training rows for scikit-learn's KernelPCA and (c)")
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--landmarks", default="uniform",
                        help="landmark strategy of kpca-dask (uniform: the cheapest)")
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--gamma-factors", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--components", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.003, 0.03])
    parser.add_argument("--chunk-rows", type=int, default=10_000)
    parser.add_argument("--train-rows", type=int, default=None,
                        help="use only the first this many training images (default: all "
                             "60 000; at least --subset + 1000)")
    args = parser.parse_args(argv)

    train, _ = load_mnist(args.data, "train")
    train = train[: args.train_rows]
    test, _ = load_mnist(args.data, "test")
    clean_train, clean_test = train / 255.0, test / 255.0
    noisy_train = noisy(clean_train, args.noise, seed=1)
    noisy_test = noisy(clean_test, args.noise, seed=2)
    order = np.random.default_rng(0).permutation(len(train))
    subset, validation = order[: args.subset], order[args.subset : args.subset + 1000]
    X_sub, X_val, clean_val = noisy_train[subset], noisy_train[validation], clean_train[validation]
    median_d2 = median_squared_distance(noisy_train)

    # -- choosing q, gamma and alpha on the validation split -----------------------
    started = time.perf_counter()
    grid = []
    with dask.config.set(scheduler="threads"):
        for factor, q, alpha in itertools.product(args.gamma_factors, args.components,
                                                  args.alphas):
            model = kpca_dask(q, factor / median_d2, alpha, args.n_landmarks,
                              args.landmarks).fit(X_sub)
            grid.append((mse(denoise(model, X_val), clean_val), factor, q, alpha))
    val_mse, factor, q, alpha = min(grid)
    gamma = factor / median_d2
    pca_full = PCA(n_components=max(args.components) * 2, random_state=0).fit(noisy_train)
    pca_grid = []
    for q_pca in sorted({*args.components, 8, 16, max(args.components) * 2}):
        Z = (X_val - pca_full.mean_) @ pca_full.components_[:q_pca].T
        pca_grid.append((mse(Z @ pca_full.components_[:q_pca] + pca_full.mean_, clean_val),
                         q_pca))
    pca_val_mse, q_pca = min(pca_grid)
    tuning_seconds = time.perf_counter() - started

    rows = []
    # (a) linear PCA on every training image.
    memory = PeakMemory()
    started = time.perf_counter()
    pca = PCA(n_components=q_pca, random_state=0).fit(noisy_train)
    fit_s = time.perf_counter() - started
    estimate = pca.inverse_transform(pca.transform(noisy_test))
    rows.append((f"(a) linear PCA (scikit-learn), q = {q_pca}", len(train), fit_s,
                 memory.stop().above_start_gib, mse(estimate, clean_test)))

    # (b) scikit-learn's exact kernel PCA on the subset.
    memory = PeakMemory()
    started = time.perf_counter()
    sk = SklearnKernelPCA(n_components=q, kernel="rbf", gamma=gamma, alpha=alpha,
                          fit_inverse_transform=True, eigen_solver="randomized",
                          random_state=0).fit(X_sub)
    fit_s = time.perf_counter() - started
    estimate = sk.inverse_transform(sk.transform(noisy_test))
    rows.append(("(b) scikit-learn KernelPCA", args.subset, fit_s, memory.stop().above_start_gib,
                 mse(estimate, clean_test)))
    del sk

    # (c) kpca-dask on the same subset.
    with dask.config.set(scheduler="threads"):
        memory = PeakMemory()
        started = time.perf_counter()
        model = kpca_dask(q, gamma, alpha, args.n_landmarks, args.landmarks).fit(X_sub)
        fit_s = time.perf_counter() - started
        estimate = denoise(model, noisy_test)
        rows.append(("(c) kpca-dask, same subset", args.subset, fit_s,
                     memory.stop().above_start_gib, mse(estimate, clean_test)))

        # (d) kpca-dask on every training image, out of core from Zarr.
        workdir = Path(tempfile.mkdtemp(prefix="kpca-dask-denoising-"))
        store = write_array(da.from_array(noisy_train, chunks=(args.chunk_rows, -1)),
                            workdir / "noisy_train.zarr")
        del noisy_train
        memory = PeakMemory()
        started = time.perf_counter()
        model = kpca_dask(q, gamma, alpha, args.n_landmarks, args.landmarks).fit(open_array(store))
        fit_s = time.perf_counter() - started
        estimate = denoise(model, noisy_test)
        rows.append(("(d) kpca-dask, all training images (from Zarr)", len(train), fit_s,
                     memory.stop().above_start_gib, mse(estimate, clean_test)))
        shutil.rmtree(workdir, ignore_errors=True)

    lines = [
        f"MNIST denoising: pixels in [0, 1], Gaussian noise sigma = {args.noise} on training "
        f"and test images; mean squared error of the reconstructed 10 000 noisy test images "
        f"against the clean ones (the noisy images themselves: "
        f"{mse(noisy_test, clean_test):.4f}). Kernel PCA: rbf, gamma = {factor:g} / median "
        f"squared distance = {gamma:.3g}, q = {q}, alpha = {alpha:g}, chosen on 1 000 "
        f"validation images (MSE {val_mse:.4f}) from a grid of gamma factors "
        f"{args.gamma_factors}, q {args.components}, alpha {args.alphas}; kpca-dask: "
        f"m = {args.n_landmarks} {args.landmarks} landmarks. Linear PCA: q = {q_pca} chosen "
        f"the same way (validation MSE {pca_val_mse:.4f}). Tuning took {tuning_seconds:.0f} s. "
        f"{psutil.cpu_count(logical=False)} cores."
        + (f" Only the first {len(train)} training images (--train-rows)."
           if args.train_rows is not None else ""),
        "",
        "| method | training rows n | fit s | peak RSS above start | test MSE |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, n, fit_s, peak, error in rows:
        lines.append(f"| {name} | {n} | {fit_s:.1f} | {peak:.2f} GiB | {error:.4f} |")
    text = "\n".join(lines)
    print(text)
    write_results("bench_denoising", text, argv)


if __name__ == "__main__":
    main()
