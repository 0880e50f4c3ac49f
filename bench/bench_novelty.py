"""MNIST novelty detection: is this digit a 9? Learned only from the digits 0-8.

Each method learns on the training images of the digits 0-8 (about 54 000,
pixels in [0, 1]) and scores the 10 000 test images; the ROC AUC says how well
the score ranks the 1 009 test 9s above the other digits:

- kpca-dask ``reconstruction_error`` (the squared feature-space distance to the
  principal subspace, Hoffmann 2007), rbf kernel, gamma by the median
  heuristic, read block by block from Zarr;
- linear PCA's reconstruction error |x - x_hat|^2 at the same q (scikit-learn);
- scikit-learn's ``IsolationForest`` (default parameters, seed 0), whose
  ``score_samples`` is negated so that higher means more novel.

Usage::

    python bench/bench_novelty.py [--n-components 50] [--n-landmarks 1000]

The markdown table goes to stdout and to bench/results/bench_novelty.md. Peak
memory is the peak RSS of this process during each method's fit and score
above what it held before (sampled every 50 ms).
"""

from __future__ import annotations

import argparse
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
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score

from kpca_dask import KernelPCA
from kpca_dask.datasets import load_mnist
from kpca_dask.io import open_array, write_array

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PeakMemory, write_results  # noqa: E402
from bench_denoising import DEFAULT_DATA  # noqa: E402


def timed(fit, score):
    """(fit seconds, score seconds, peak GiB above start, scores)."""
    memory = PeakMemory()
    started = time.perf_counter()
    model = fit()
    fit_s = time.perf_counter() - started
    started = time.perf_counter()
    scores = np.asarray(score(model))
    return fit_s, time.perf_counter() - started, memory.stop().above_start_gib, scores


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="folder of the MNIST .gz files (default ../shared/data/mnist, or "
                             "$KPCA_DASK_DATA/mnist)")
    parser.add_argument("--n-components", type=int, default=50)
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--landmarks", default="uniform")
    parser.add_argument("--novel-digit", type=int, default=9)
    parser.add_argument("--chunk-rows", type=int, default=10_000)
    args = parser.parse_args(argv)

    train, train_labels = load_mnist(args.data, "train")
    test, test_labels = load_mnist(args.data, "test")
    known = train[train_labels != args.novel_digit] / 255.0
    X_test = test / 255.0
    is_novel = test_labels == args.novel_digit
    workdir = Path(tempfile.mkdtemp(prefix="kpca-dask-novelty-"))
    store = write_array(da.from_array(known, chunks=(args.chunk_rows, -1)),
                        workdir / "known.zarr")
    q = args.n_components

    rows = []
    with dask.config.set(scheduler="threads"):
        kpca = KernelPCA(n_components=q, kernel="rbf", gamma="median",
                         n_landmarks=args.n_landmarks, landmarks=args.landmarks,
                         random_state=0)
        result = timed(lambda: kpca.fit(open_array(store)),
                       lambda model: model.reconstruction_error(X_test))
    rows.append((f"kpca-dask reconstruction_error (rbf, m = {args.n_landmarks}, q = {q})",
                 *result))

    def pca_error(model):
        residual = X_test - model.inverse_transform(model.transform(X_test))
        return np.einsum("ij,ij->i", residual, residual)

    result = timed(lambda: PCA(n_components=q, random_state=0).fit(known), pca_error)
    rows.append((f"linear PCA reconstruction error (q = {q})", *result))
    result = timed(lambda: IsolationForest(random_state=0).fit(known),
                   lambda model: -model.score_samples(X_test))
    rows.append(("IsolationForest (scikit-learn)", *result))
    shutil.rmtree(workdir, ignore_errors=True)

    lines = [
        f"MNIST novelty: trained on the {len(known)} training images of the digits other than "
        f"{args.novel_digit}; ROC AUC of each score for telling the {int(is_novel.sum())} test "
        f"{args.novel_digit}s from the other {int((~is_novel).sum())} test images. kpca-dask "
        f"gamma = {kpca.gamma_:.4g} (median heuristic), {args.landmarks} landmarks, trace "
        f"error {kpca.trace_error_:.3f}. {psutil.cpu_count(logical=False)} cores.",
        "",
        "| score | ROC AUC | fit s | score s | peak RSS above start |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, fit_s, score_s, peak, scores in rows:
        lines.append(f"| {name} | {roc_auc_score(is_novel, scores):.3f} | {fit_s:.1f} "
                     f"| {score_s:.1f} | {peak:.2f} GiB |")
    text = "\n".join(lines)
    print(text)
    write_results("bench_novelty", text, argv)


if __name__ == "__main__":
    main()
