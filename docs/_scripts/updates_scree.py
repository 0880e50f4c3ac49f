"""The scree plot of docs/guide/updates.md: one fit of MNIST, three n_components re-solved.

    python docs/_scripts/updates_scree.py [--mnist ../shared/data/mnist]

Fits once (20 000 MNIST digits, m = 1000), then re-solves the saved model for
n_components = 10, 0.5 and 0.9 without reading the data again, and writes
docs/_static/updates_scree.png; prints the times and the load average.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mnist", type=Path, default=REPO.parent / "shared" / "data" / "mnist")
    parser.add_argument("--n-samples", type=int, default=20_000)
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=HERE.parent / "_static" / "updates_scree.png")
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kpca_dask import KernelPCA
    from kpca_dask.datasets import load_mnist

    images, _ = load_mnist(args.mnist)
    X = images[: args.n_samples].astype(np.float64) / 255.0
    started = time.perf_counter()
    model = KernelPCA(n_components=None, gamma="median", n_landmarks=args.n_landmarks,
                      random_state=0).fit(X)
    fit_seconds = time.perf_counter() - started
    spectrum = model.explained_variance_ratio_.copy()
    kept = {}
    for choice in (10, 0.5, 0.9):
        started = time.perf_counter()
        model.set_n_components(choice)
        kept[choice] = (model.n_components_, time.perf_counter() - started)

    q = np.arange(1, spectrum.size + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(8.0, 3.4), dpi=100)
    left.loglog(q, spectrum, color="black", lw=1.2)
    left.set_xlabel("component j")
    left.set_ylabel("explained variance ratio")
    left.set_title("scree: lambda_j / trace C", fontsize=10)
    right.semilogx(q, np.cumsum(spectrum), color="black", lw=1.5)
    for (choice, (n, _)), colour in zip(kept.items(), ("C0", "C1", "C3")):
        for ax in (left, right):
            ax.axvline(n, color=colour, ls="--", lw=1.2,
                       label=f"n_components={choice}: q = {n}")
    right.set_xlabel("number of components q")
    right.set_ylabel("cumulative explained variance")
    right.set_ylim(0, 1.02)
    right.set_title("three re-solves of one fit, no pass", fontsize=10)
    right.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"MNIST, n = {X.shape[0]:,}, m = {args.n_landmarks} landmarks, "
                 "gamma = median heuristic", fontsize=10)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"fit {fit_seconds:.1f} s; re-solves:",
          ", ".join(f"{c} -> q = {n} in {s:.3f} s" for c, (n, s) in kept.items()))
    print("load average", Path("/proc/loadavg").read_text().split()[:3])
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} kB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
