"""MNIST: Nyström kernel PCA features vs linear PCA features for a linear classifier.

Writes MNIST (../shared/data/mnist, or $KPCA_DASK_DATA/mnist) to a Zarr group,
fits rbf kernel PCA (m = 2000 landmarks, q = 50) on the 60 000 training images
read block by block from Zarr, transforms the 10 000 test images, and compares
the test accuracy of a logistic regression on the 50 kernel PCA features with
one on 50 linear PCA components (scikit-learn PCA on the same pixels scaled to
[0, 1]). Exact kernel PCA would need the 60 000 x 60 000 Gram matrix: 29 GB
in float64.

Usage::

    python bench/bench_mnist.py
    python bench/bench_mnist.py --train-rows 2000 --n-landmarks 50   # a quick check, not a result

The markdown table goes to stdout and to bench/results/bench_mnist.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import dask
import numpy as np
import psutil
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from kpca_dask import KernelPCA
from kpca_dask.blocks.distance_kernels import squared_distances
from kpca_dask.datasets import mnist_to_zarr
from kpca_dask.io import open_array, open_group

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PeakMemory, write_results  # noqa: E402


def mnist_directory() -> Path:
    root = os.environ.get("KPCA_DASK_DATA")
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "shared" / "data"
    return base / "mnist"


def median_heuristic_gamma(X: np.ndarray, n: int = 1000, seed: int = 0) -> float:
    """gamma = 1 / median squared distance (bandwidth^2 = median / 2, docs/design.md §3)."""
    sample = X[np.random.default_rng(seed).choice(len(X), n, replace=False)]
    d2 = squared_distances(sample, sample)
    return float(1.0 / np.median(d2[np.triu_indices(n, 1)]))


def classifier_accuracy(train, y_train, test, y_test) -> tuple[float, float]:
    started = time.perf_counter()
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    clf.fit(train, y_train)
    return float(clf.score(test, y_test)), time.perf_counter() - started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-landmarks", type=int, default=2000)
    parser.add_argument("--n-components", type=int, default=50)
    parser.add_argument("--chunk-rows", type=int, default=10_000)
    parser.add_argument("--train-rows", type=int, default=None,
                        help="fit on the first this many training images (default: all 60 000)")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="kpca-dask-mnist-"))
    store = mnist_to_zarr(mnist_directory(), workdir / "mnist.zarr", chunk_rows=args.chunk_rows)
    # Lazy, block by block from Zarr; pixels scaled to [0, 1].
    X_train = open_array(store, array="train_images")[: args.train_rows] / 255.0
    X_test = open_array(store, array="test_images") / 255.0
    group = open_group(store)
    y_train, y_test = group["train_labels"][: args.train_rows], group["test_labels"][:]
    gamma = median_heuristic_gamma(X_train[:20_000].compute())

    rows = []
    with dask.config.set(scheduler="threads"):
        memory = PeakMemory()
        started = time.perf_counter()
        kpca = KernelPCA(n_components=args.n_components, kernel="rbf", gamma=gamma,
                         n_landmarks=args.n_landmarks, dtype="float64", random_state=0)
        kpca.fit(X_train)
        fit_seconds = time.perf_counter() - started
        started = time.perf_counter()
        F_train, F_test = dask.compute(kpca.transform(X_train), kpca.transform(X_test))
        transform_seconds = time.perf_counter() - started
        kpca_peak = memory.stop().peak_gib
    accuracy, clf_seconds = classifier_accuracy(F_train, y_train, F_test, y_test)
    rows.append(("kernel PCA (rbf, Nyström)", fit_seconds, transform_seconds, accuracy,
                 clf_seconds, kpca_peak))

    memory = PeakMemory()
    train, test = X_train.compute(), X_test.compute()
    started = time.perf_counter()
    pca = PCA(n_components=args.n_components, random_state=0).fit(train)
    fit_seconds = time.perf_counter() - started
    started = time.perf_counter()
    P_train, P_test = pca.transform(train), pca.transform(test)
    transform_seconds = time.perf_counter() - started
    pca_peak = memory.stop().peak_gib
    accuracy, clf_seconds = classifier_accuracy(P_train, y_train, P_test, y_test)
    rows.append(("linear PCA (scikit-learn)", fit_seconds, transform_seconds, accuracy,
                 clf_seconds, pca_peak))

    n_train = f"{len(y_train):,}".replace(",", " ")  # 60 000, as the text has always said
    lines = [
        f"MNIST: fit on {n_train} training images, accuracy on the 10 000 test images. "
        f"{args.n_components} components; kernel PCA: rbf, gamma = {gamma:.4g} (median "
        f"heuristic), m = {args.n_landmarks} landmarks, trace error {kpca.trace_error_:.3f}, "
        f"explained variance {kpca.explained_variance_ratio_.sum():.3f}; "
        f"{psutil.cpu_count(logical=False)} cores.",
        "",
        "| features | fit s | transform s (train + test) | logistic regression accuracy "
        "| classifier fit s | peak RSS |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, fit_s, tr_s, acc, clf_s, peak in rows:
        lines.append(f"| {name} | {fit_s:.1f} | {tr_s:.1f} | {100 * acc:.2f} % | {clf_s:.1f} "
                     f"| {peak:.2f} GiB |")
    text = "\n".join(lines)
    print(text)
    write_results("bench_mnist", text, argv)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
