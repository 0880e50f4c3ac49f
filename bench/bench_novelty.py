"""MNIST one-class novelty: learn one digit, find every other digit.

For each digit d in turn (Hoffmann 2007, section 5), each method learns on the
training images of d alone (about 6 000, pixels in [0, 1]) and scores the
10 000 test images; the ROC AUC says how well the score ranks the other digits
(about 9 000) above the test images of d (about 1 000). The table gives the
AUC per normal digit and its mean:

- kpca-dask ``reconstruction_error`` (the squared feature-space distance to the
  principal subspace), rbf kernel, gamma by the median heuristic, read block by
  block from Zarr;
- linear PCA's reconstruction error |x - x_hat|^2 at the same q (scikit-learn);
- scikit-learn's ``IsolationForest`` (default parameters, seed 0), whose
  ``score_samples`` is negated so that higher means more novel.

An earlier protocol (learn the digits 0-8, find the 9s) put every method at
chance, because 9s are well described by 4s and 7s; with one normal class the
methods separate.

Usage::

    python bench/bench_novelty.py [--n-components 20] [--n-landmarks 1000]
                                  [--digits 0 1 ... 9]

The markdown table goes to stdout and to bench/results/bench_novelty.md, with
the summed fit and score seconds of each method over the digits.
"""

from __future__ import annotations

import argparse
import platform
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
from _common import write_results  # noqa: E402
from bench_denoising import DEFAULT_DATA  # noqa: E402


def timed(fit, score):
    """(fit seconds, score seconds, scores)."""
    started = time.perf_counter()
    model = fit()
    fit_s = time.perf_counter() - started
    started = time.perf_counter()
    scores = np.asarray(score(model))
    return fit_s, time.perf_counter() - started, scores


def pca_error(X):
    """Linear PCA's squared reconstruction error of the rows of X."""
    def score(model):
        residual = X - model.inverse_transform(model.transform(X))
        return np.einsum("ij,ij->i", residual, residual)
    return score


def score_one_digit(args, normal, normal_lazy, X_test):
    """(fit s, score s, scores) of each method, learnt on the rows of one digit."""
    q = args.n_components
    with dask.config.set(scheduler="threads"):
        gamma = "median"
        if args.gamma_scale != 1.0:
            gamma = args.gamma_scale * KernelPCA(
                n_components=1, gamma="median", n_landmarks=args.n_landmarks,
                random_state=0).fit(normal_lazy).gamma_
        kpca = KernelPCA(n_components=q, kernel="rbf", gamma=gamma,
                         n_landmarks=args.n_landmarks, landmarks=args.landmarks,
                         random_state=0)
        kpca_run = timed(lambda: kpca.fit(normal_lazy),
                         lambda model: model.reconstruction_error(X_test))
    return (kpca_run,
            timed(lambda: PCA(n_components=q, random_state=0).fit(normal), pca_error(X_test)),
            timed(lambda: IsolationForest(random_state=0).fit(normal),
                  lambda model: -model.score_samples(X_test)))


def cpu_name() -> str:
    """The processor's model name, for the table's caption."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="folder of the MNIST .gz files (default ../shared/data/mnist, or "
                             "$KPCA_DASK_DATA/mnist)")
    parser.add_argument("--n-components", type=int, default=20)
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--landmarks", default="uniform")
    parser.add_argument("--gamma-scale", type=float, default=1.0,
                        help="gamma = this times the median heuristic's (found by a first, "
                             "untimed fit)")
    parser.add_argument("--digits", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--chunk-rows", type=int, default=2_000)
    args = parser.parse_args(argv)

    train, train_labels = load_mnist(args.data, "train")
    test, test_labels = load_mnist(args.data, "test")
    X_test = test / 255.0
    q = args.n_components
    methods = (f"kpca-dask reconstruction_error (rbf, m = {args.n_landmarks}, q = {q})",
               f"linear PCA reconstruction error (q = {q})",
               "IsolationForest (scikit-learn)")
    auc = {name: [] for name in methods}
    seconds = dict.fromkeys(methods, 0.0)
    n_train = []
    workdir = Path(tempfile.mkdtemp(prefix="kpca-dask-novelty-"))
    try:
        for digit in args.digits:
            normal = train[train_labels == digit] / 255.0
            n_train.append(len(normal))
            is_novel = test_labels != digit
            store = write_array(da.from_array(normal, chunks=(args.chunk_rows, -1)),
                                workdir / f"digit-{digit}.zarr")
            runs = score_one_digit(args, normal, open_array(store), X_test)
            for name, (fit_s, score_s, scores) in zip(methods, runs):
                auc[name].append(roc_auc_score(is_novel, scores))
                seconds[name] += fit_s + score_s
            print(f"digit {digit}: " + ", ".join(f"{values[-1]:.3f}" for values in auc.values()),
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    lines = [
        f"MNIST one-class novelty: each method learns the training images of one digit "
        f"({min(n_train)}-{max(n_train)} rows) and scores the 10 000 test images; ROC AUC for "
        f"ranking the other digits above that digit. kpca-dask: gamma "
        f"{args.gamma_scale:g} x the median heuristic's, "
        f"{args.landmarks} landmarks. {cpu_name()}, {psutil.cpu_count(logical=False)} cores.",
        "",
        "| score | " + " | ".join(str(d) for d in args.digits) + " | mean | fit + score s |",
        "|---|" + "---:|" * (len(args.digits) + 2),
    ]
    for name in methods:
        lines.append(f"| {name} | " + " | ".join(f"{value:.3f}" for value in auc[name])
                     + f" | **{np.mean(auc[name]):.3f}** | {seconds[name]:.0f} |")
    text = "\n".join(lines)
    print(text)
    write_results("bench_novelty", text, argv)


if __name__ == "__main__":
    main()
