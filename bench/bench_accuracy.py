"""Accuracy per landmark: uniform, kmeans and rpcholesky landmarks against exact kernel PCA.

On a seeded subset of MNIST (pixels / 255), rbf kernel with the median-
heuristic gamma, compares for each number of landmarks m

- kpca_dask.KernelPCA with landmarks = uniform, kmeans, rpcholesky;
- scikit-learn's Nystroem (uniform landmarks) followed by PCA,

against exact kernel PCA: the top 10 eigenpairs of the full n x n centred Gram
matrix by Lanczos while it fits in memory (``--reference dense``), else by
ExactKernelPCA's matrix-free solver (``--reference matrix-free``: the matrix
is never held, every eigenpair certified by its residual), cached in
bench/results/. Figures, averaged over the seeds:

- eig max / eig mean: relative error |lambda_j^ - lambda_j| / lambda_j of the
  top 10 eigenvalues (maximum and mean over j);
- alignment: mean squared canonical correlation between the exact 10-D
  embedding of the n rows and the approximate one (1 = same subspace);
- trace error: (trace K - trace K_nys) / trace K, docs/design.md §2;
- fit s: wall time of the fit (sklearn: Nystroem fit + transform + PCA fit,
  since its PCA needs the n x m features);
- peak GiB: resident memory the fit held above what the process held before.

``--plot PATH`` draws the figure of docs/guide/choosing-m.md from the same
rows: eigenvalue error, misalignment, trace error (with the sqrt(n) rule
marked), fit time and memory against m, one line per landmark strategy; with
``--with ROWS.json`` the rows of earlier runs (other n) are drawn beside them,
one line style per n. Strategies whose landmark selection costs grow past
m = ``--most-m-sampled`` (kmeans, rpcholesky) stop there; uniform landmarks go
on to every m given.

Run (full study, ~20 min on 2 cores):

    nice .venv/bin/python bench/bench_accuracy.py --n 20000 --m 100 300 1000 3000
    # docs/guide/choosing-m.md (~25 min on 2 cores):
    nice .venv/bin/python bench/bench_accuracy.py --n 20000 --m 500 1000 2000 5000 10000 20000 \
        --seeds 0 --methods uniform kmeans rpcholesky
    # and the whole training set against the matrix-free exact solver (~2 h on 2 cores),
    # drawn with the run above:
    nice .venv/bin/python bench/bench_accuracy.py --n 60000 --m 500 1000 2000 5000 10000 20000 \
        --seeds 0 --methods uniform kmeans rpcholesky \
        --with bench/results/accuracy_mnist_n20000.json --plot docs/_static/choosing-m.png

MNIST is read from ../shared/data/mnist beside the repository, or from
$KPCA_DASK_DATA/mnist.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from scipy import linalg
from scipy.sparse.linalg import eigsh
from sklearn.decomposition import PCA
from sklearn.kernel_approximation import Nystroem

from kpca_dask import KernelPCA
from kpca_dask.blocks.kernels import pairwise_kernel
from kpca_dask.datasets import load_mnist
from kpca_dask.engine.bandwidth import resolve_gamma

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
REPO = Path(__file__).resolve().parents[1]
#: Where tables go (git-ignored); KPCA_DASK_BENCH_RESULTS moves them, as in _common.py.
RESULTS = Path(os.environ.get("KPCA_DASK_BENCH_RESULTS",
                              Path(__file__).resolve().parent / "results"))
N_TOP = 10
METHODS = ("uniform", "kmeans", "rpcholesky", "sklearn Nystroem+PCA")


def mnist_dir() -> Path:
    return Path(os.environ.get("KPCA_DASK_DATA", REPO.parent / "shared" / "data")) / "mnist"


def mnist_subset(n: int, seed: int = 0) -> np.ndarray:
    """n seeded rows of MNIST's training set (pixels / 255, as the MNIST notebook reads it);
    all 60 000 in their order for n = 60 000."""
    images, _ = load_mnist(mnist_dir(), "train")
    rows = np.sort(np.random.default_rng(seed).choice(images.shape[0], n, replace=False))
    return images[rows].astype(np.float64) / 255.0


def exact_reference(X: np.ndarray, gamma: float, solver: str = "dense") -> dict:
    """Top eigenpairs of the centred Gram matrix J K J, cached on disk."""
    n = X.shape[0]
    suffix = "" if solver == "dense" else f"_{solver}"
    path = RESULTS / f"exact_mnist_n{n}_gamma{gamma:.8g}{suffix}.npz"
    if path.is_file():
        cached = np.load(path)
        return {key: cached[key] for key in cached.files}
    reference = (matrix_free_reference(X, gamma) if solver == "matrix-free"
                 else dense_reference(X, gamma))
    RESULTS.mkdir(parents=True, exist_ok=True)
    np.savez(path, **reference)
    return reference


def matrix_free_reference(X: np.ndarray, gamma: float) -> dict:
    """The top eigenpairs by ExactKernelPCA's matrix-free solver: no n x n matrix held."""
    from kpca_dask import ExactKernelPCA

    started = time.perf_counter()
    exact = ExactKernelPCA(n_components=N_TOP, gamma=gamma, eigen_solver="matrix-free").fit(X)
    return {
        "eigenvalues": exact.eigenvalues_,
        "eigenvectors": np.asarray(exact.eigenvectors_),
        "residual": exact.eigenvalue_residuals_ / exact.eigenvalues_,
        "products": np.array(exact.n_products_),
        "seconds": np.array(time.perf_counter() - started),
    }


def dense_reference(X: np.ndarray, gamma: float, block: int = 2000) -> dict:
    """The top eigenpairs of the n x n matrix, held, by Lanczos (scipy's eigsh)."""
    n = X.shape[0]
    started = time.perf_counter()
    K = np.empty((n, n))
    for start in range(0, n, block):
        K[start : start + block] = pairwise_kernel(X[start : start + block], X, "rbf",
                                                   gamma=gamma)
    column_means = K.mean(axis=0)
    K -= column_means[None, :]
    K -= column_means[:, None]
    K += column_means.mean()
    v0 = np.random.default_rng(0).normal(size=n)
    values, vectors = eigsh(K, k=N_TOP, which="LA", tol=1e-12, v0=v0)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    residual = np.linalg.norm(K @ vectors - vectors * values, axis=0) / values
    return {
        "eigenvalues": values,
        "eigenvectors": vectors,
        "residual": residual,
        "centred_trace": np.array(np.trace(K)),
        "seconds": np.array(time.perf_counter() - started),
    }


def subspace_alignment(exact: np.ndarray, approximate: np.ndarray) -> float:
    """Mean squared canonical correlation between the column spaces (both centred)."""
    q_exact, _ = np.linalg.qr(exact - exact.mean(axis=0))
    q_approx, _ = np.linalg.qr(approximate - approximate.mean(axis=0))
    cosines = linalg.svdvals(q_exact.T @ q_approx)
    return float(np.mean(np.minimum(cosines, 1.0) ** 2))


def fit_kpca_dask(X, gamma, m, strategy, seed, dtype="float64"):
    from _common import PeakMemory

    memory = PeakMemory()
    started = time.perf_counter()
    kpca = KernelPCA(n_components=N_TOP, gamma=gamma, n_landmarks=m, landmarks=strategy,
                     random_state=seed, dtype=dtype).fit(X)
    seconds = time.perf_counter() - started
    peak = memory.stop().above_start_gib
    embedding = np.asarray(kpca.transform(X))
    return kpca.eigenvalues_, embedding, kpca.trace_error_, seconds, peak


def fit_sklearn(X, gamma, m, seed):
    started = time.perf_counter()
    features = Nystroem(gamma=gamma, n_components=m, random_state=seed).fit_transform(X)
    pca = PCA(n_components=N_TOP, random_state=seed).fit(features)
    seconds = time.perf_counter() - started
    eigenvalues = pca.explained_variance_ * (X.shape[0] - 1)
    trace_error = (X.shape[0] - float(np.einsum("ij,ij->", features, features))) / X.shape[0]
    return eigenvalues, pca.transform(features), trace_error, seconds, float("nan")


def measure(X, gamma, reference, m, method, seed, dtype="float64") -> dict:
    if method.startswith("sklearn"):
        eigenvalues, embedding, trace_error, seconds, peak = fit_sklearn(X, gamma, m, seed)
    else:
        eigenvalues, embedding, trace_error, seconds, peak = fit_kpca_dask(
            X, gamma, m, method, seed, dtype)
    exact = reference["eigenvalues"]
    relative = np.abs(eigenvalues[:N_TOP] - exact) / exact
    return {
        "n": X.shape[0], "m": m, "method": method, "seed": seed,
        "eig_max": float(relative.max()), "eig_mean": float(relative.mean()),
        "alignment": subspace_alignment(reference["eigenvectors"], embedding),
        "trace_error": float(trace_error), "fit_seconds": seconds, "peak_gib": peak,
    }


def markdown_table(rows: list[dict]) -> str:
    lines = ["| m | landmarks | top-10 eig. error, max | mean | 10-D alignment "
             "| trace error | fit s | peak GiB |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    keys = sorted({(r["m"], METHODS.index(r["method"])) for r in rows})
    for m, method_index in keys:
        group = [r for r in rows if r["m"] == m and r["method"] == METHODS[method_index]]
        mean = {k: np.mean([r[k] for r in group])
                for k in ("eig_max", "eig_mean", "alignment", "trace_error", "fit_seconds",
                          "peak_gib")}
        lines.append(
            f"| {m} | {METHODS[method_index]} | {100 * mean['eig_max']:.2f} % "
            f"| {100 * mean['eig_mean']:.2f} % | {mean['alignment']:.6f} "
            f"| {mean['trace_error']:.4f} | {mean['fit_seconds']:.1f} "
            f"| {mean['peak_gib']:.2f} |")
    return "\n".join(lines)


#: Errors below these (m = n, exact to rounding) are drawn at them.
FLOOR_SHOWN = {"eig_max": 1e-4, "misalignment": 1e-9}
#: Line styles of the runs drawn together, by increasing n.
STYLES = ("-", "--", ":")


def plot(runs: dict[int, list[dict]], path: Path) -> None:
    """Eigenvalue error, misalignment, trace error, fit time and memory against m: one colour
    per landmark strategy, one line style per n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("eig_max", "largest relative error\nof the top-10 eigenvalues"),
              ("misalignment", "1 - alignment of the\n10-D embedding"),
              ("trace_error", "trace error (the certificate)"),
              ("fit_seconds", "fit time, s"), ("peak_gib", "peak memory of the fit, GiB")]
    figure, axes = plt.subplots(1, len(panels), figsize=(20, 4.2), constrained_layout=True)
    colours = {method: f"C{i}" for i, method in enumerate(METHODS)}
    for style, (n, rows) in zip(STYLES, sorted(runs.items())):
        for row in rows:
            row["misalignment"] = 1.0 - row["alignment"]
        for method in [m for m in METHODS if any(r["method"] == m for r in rows)]:
            ms = sorted({r["m"] for r in rows if r["method"] == method})
            for axis, (key, title) in zip(axes, panels):
                values = [np.mean([r[key] for r in rows if r["m"] == m and r["method"] == method])
                          for m in ms]
                axis.plot(ms, np.maximum(values, FLOOR_SHOWN.get(key, 0.0)), style, marker="o",
                          color=colours[method], label=f"{method}, n = {n}")
                axis.set(xscale="log", yscale="log", xlabel="landmarks m", title=title)
        for axis in axes[:3]:
            axis.axvline(np.sqrt(n), color="grey", linestyle=style, linewidth=0.8)
            axis.annotate(f"√n = {np.sqrt(n):.0f}", (np.sqrt(n), 0.02), rotation=90,
                          xycoords=("data", "axes fraction"), fontsize=7, color="grey")
    axes[0].legend(fontsize=7)
    sizes = " and ".join(f"{n} ({name})" for n, name in zip(sorted(runs), ("solid", "dashed",
                                                                          "dotted")))
    figure.suptitle(f"MNIST, n = {sizes}: Nyström kernel PCA against exact kernel PCA "
                    "(errors at the floor: exact to rounding)")
    figure.savefig(path, dpi=100)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="rows of MNIST's training set")
    parser.add_argument("--m", type=int, nargs="+", default=[100, 300, 1000, 3000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--gamma", type=float, default=None,
                        help="fix gamma (default: the median heuristic on a sample), e.g. to "
                             "compare two versions of kpca_dask against one exact reference")
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--reference", default="auto", choices=("auto", "dense", "matrix-free"),
                        help="how the exact eigenpairs are found (auto: dense while the n x n "
                             "matrix fits in memory, matrix-free beyond)")
    parser.add_argument("--most-m-sampled", type=int, default=10_000,
                        help="the largest m for kmeans and rpcholesky landmarks")
    parser.add_argument("--plot", type=Path, help="draw the figure to this PNG")
    parser.add_argument("--with", dest="also", type=Path, nargs="+", default=[],
                        help="rows of earlier runs (JSON, other n) drawn beside this one")
    parser.add_argument("--replot", type=Path,
                        help="only draw --plot again from the rows of an earlier run (JSON)")
    parser.add_argument("--run-rows", type=int, default=None,
                        help="force the slots of the row samples to this many rows (default "
                             "n // 1000): long runs, as a fit of millions of rows draws them")
    args = parser.parse_args(argv)
    if args.run_rows is not None:
        from kpca_dask.engine import sampling

        sampling.MAX_RUN_ROWS, sampling.RUNS_PER_DATA = args.run_rows, 1

    earlier = [json.loads(path.read_text()) for path in args.also]
    if args.replot:
        plot(_by_n([json.loads(args.replot.read_text()), *earlier], args.n), args.plot)
        return
    dask.config.set(scheduler="threads")
    X = mnist_subset(args.n)
    gamma = (args.gamma if args.gamma is not None else
             resolve_gamma("median", da.from_array(X), "rbf", rng=np.random.default_rng(0)))
    solver = args.reference
    if solver == "auto":
        from kpca_dask.exact.exact_fitting import dense_fits

        solver = "dense" if dense_fits(args.n, None) else "matrix-free"
    reference = exact_reference(X, gamma, solver)
    products = (f" in {int(reference['products'])} products" if "products" in reference
                else "")
    print(f"MNIST n={args.n}, p={X.shape[1]}, rbf gamma={gamma:.6g} (median heuristic); "
          f"exact top-{N_TOP} ({solver}) in {float(reference['seconds']):.0f} s{products}, "
          f"max relative residual {reference['residual'].max():.1e}; exact eigenvalues "
          f"{np.array2string(reference['eigenvalues'], precision=2)}", flush=True)
    rows = []
    for m in args.m:
        for method in args.methods:
            if method in ("kmeans", "rpcholesky") and m > args.most_m_sampled:
                continue
            for seed in args.seeds:
                rows.append(measure(X, gamma, reference, m, method, seed, args.dtype))
                r = rows[-1]
                print(f"  m={m} {method} seed={seed}: eig max {100 * r['eig_max']:.2f} %, "
                      f"alignment {r['alignment']:.6f}, trace error {r['trace_error']:.4f}, "
                      f"fit {r['fit_seconds']:.1f} s", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"accuracy_mnist_n{args.n}.json").write_text(json.dumps(rows, indent=1))
    print()
    print(f"Seeds {args.seeds}; figures are means over the seeds.")
    print(markdown_table(rows))
    if args.plot:
        plot(_by_n([rows, *earlier], args.n), args.plot)


def _by_n(runs: list[list[dict]], n: int) -> dict[int, list[dict]]:
    """Rows of several runs by their n (rows written before n was recorded: ``n``)."""
    grouped: dict[int, list[dict]] = {}
    for rows in runs:
        for row in rows:
            grouped.setdefault(int(row.get("n", n)), []).append(row)
    return grouped


if __name__ == "__main__":
    main()
