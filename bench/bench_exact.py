"""Exact kernel PCA beyond memory: the matrix-free solver at n = 2e4, 5e4 and 1e5 (design §13).

For each n, in a fresh process (so that its peak memory is its own), on
n x 32 float64 uniform data, rbf kernel with the median-heuristic gamma,
q = 10, float64 tiles, the threaded scheduler:

- **fit s**: ``ExactKernelPCA(eigen_solver="matrix-free").fit`` end to end;
- **products**: products with J K J the solver made, each one pass over the
  pairs of row panels (n^2 / 2 kernel values);
- **peak GiB**: resident memory above what the process held before the fit
  (after a warm-up fit, so the compiled kernels' one-off memory is not counted);
- **max residual / λ₁**: the certificate, max_j |J K J v_j - λ_j v_j| / λ_1
  (goal <= 1e-8);
- with ``--dense-check`` (at n <= ``--dense-most``, 2e4 by default), the dense
  solver's eigenvalues and embedding beside them: the largest relative
  eigenvalue difference (goal <= 1e-9) and the largest embedding difference
  over the largest embedding value (goal <= 1e-6; signs are fixed alike).

``--cluster W`` fits on a LocalCluster of W worker processes instead and
reports the bytes the workers sent each other per product against the cost
model of design §13 (``kpca_dask.engine.exact.matrix_free.product_traffic``), and
that model carried to n = 1e6 on 20 workers of 4 threads.

    python bench/bench_exact.py --dense-check                 # n = 2e4, 5e4, 1e5
    python bench/bench_exact.py --sizes 2e4 --dense-check     # the check alone
    python bench/bench_exact.py --sizes 2e4 --cluster 4       # traffic on a LocalCluster
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine, measured_apart, write_results  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]
N_FEATURES, N_COMPONENTS = 32, 10


def _data(n: int):
    import numpy as np

    return np.random.default_rng(0).uniform(size=(n, N_FEATURES))


def measure(spec: dict) -> dict:
    """One fit (and the dense check) in this process; run by :func:`run` in a fresh one."""
    import dask
    import numpy as np
    from _common import PeakMemory

    from kpca_dask import ExactKernelPCA

    dask.config.set(scheduler="threads")
    X = _data(spec["n"])
    params = dict(n_components=N_COMPONENTS, gamma="median", dtype=spec["dtype"])
    ExactKernelPCA(**params, eigen_solver="matrix-free").fit(X[:500])  # compiled kernels
    memory = PeakMemory()
    started = time.perf_counter()
    model = ExactKernelPCA(**params, eigen_solver="matrix-free").fit(X)
    seconds = time.perf_counter() - started
    row = {"n": spec["n"], "dtype": spec["dtype"], "fit": seconds,
           "products": int(model.n_products_), "peak_gib": memory.stop().above_start_gib,
           "gamma": model.kernel_params_["gamma"],
           "relative_residual": float(model.eigenvalue_residuals_.max()
                                      / model.eigenvalues_[0])}
    if spec["dense"]:
        started = time.perf_counter()
        dense = ExactKernelPCA(**params, eigen_solver="dense").fit(X)
        row["dense_fit"] = time.perf_counter() - started
        row["eigenvalue_difference"] = float(np.max(
            np.abs(model.eigenvalues_ - dense.eigenvalues_) / dense.eigenvalues_))
        ours = np.asarray(model.eigenvectors_) * np.sqrt(model.eigenvalues_)
        theirs = dense.eigenvectors_ * np.sqrt(dense.eigenvalues_)
        ours *= np.sign(np.sum(ours * theirs, axis=0))  # up to sign (both fix them alike)
        row["embedding_difference"] = float(np.abs(ours - theirs).max() / np.abs(theirs).max())
    return row


def measure_cluster(spec: dict) -> dict:
    """A fit on a LocalCluster of ``spec["workers"]`` processes, its traffic per product."""
    import dask
    from distributed import Client, LocalCluster

    from kpca_dask import ExactKernelPCA
    from kpca_dask._memory import MemoryBudget
    from kpca_dask.engine.exact.matrix_free import panel_rows, product_traffic
    from kpca_dask.exact.exact_fitting import fit_matrix_free
    from kpca_dask.model.inputs import in_memory_fit_input

    X = _data(spec["n"])
    with dask.config.set({"distributed.worker.daemon": False}), \
            LocalCluster(n_workers=spec["workers"], threads_per_worker=1, processes=True,
                         dashboard_address=None) as cluster, Client(cluster) as client:
        def sent(dask_worker):
            return dask_worker.transfer_outgoing_bytes_total

        traffic, columns = [], []
        last = [sum(client.run(sent).values())]

        def on_product(state):
            total = sum(client.run(sent).values())
            traffic.append(total - last[0])
            columns.append(state.blocks[-1].shape[1])
            last[0] = total

        params = ExactKernelPCA(n_components=N_COMPONENTS, gamma="median",
                                eigen_solver="matrix-free").get_params()
        started = time.perf_counter()
        fitted = fit_matrix_free(in_memory_fit_input(X, sample_dim=None, weights=None), params,
                                 on_product=on_product)
        seconds = time.perf_counter() - started
    n_panels = fitted.model.panels.rows.numblocks[0]
    model = product_traffic(spec["n"], N_FEATURES, max(columns), n_panels)
    large = MemoryBudget(16 * 2**30, 4, True, "a worker", None, 15 * 2**30, workers=20)
    big_panels = -(-10**6 // panel_rows(10**6, N_FEATURES, 8, large))
    return {"n": spec["n"], "workers": spec["workers"], "fit": seconds,
            "products": fitted.n_products, "panels": n_panels,
            "measured_per_product": sum(traffic[1:]) / max(1, len(traffic) - 1),
            "model_per_product": model["pairs"] * model["per_pair"],
            "model_1e6": product_traffic(10**6, N_FEATURES, max(columns), big_panels),
            "panels_1e6": big_panels}


def run(spec: dict) -> dict:
    return measured_apart(__file__, spec, [REPOSITORY, Path(__file__).parent], f"n = {spec['n']}")


def table(rows: list[dict]) -> str:
    lines = ["| n | tiles | fit s | products | s / product | peak GiB | max residual / λ₁ "
             "| dense fit s | eigenvalues vs dense | embedding vs dense |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        dense = (f"{r['dense_fit']:.0f} | {r['eigenvalue_difference']:.1e} "
                 f"| {r['embedding_difference']:.1e}" if "dense_fit" in r else "– | – | –")
        lines.append(f"| {r['n']:,} | {r['dtype']} | {r['fit']:.1f} | {r['products']} "
                     f"| {r['fit'] / r['products']:.2f} | {r['peak_gib']:.2f} "
                     f"| {r['relative_residual']:.1e} | {dense} |")
    return "\n".join(lines)


def cluster_table(rows: list[dict]) -> str:
    lines = ["| n | workers | fit s | products | panels | measured MB / product "
             "| model MB / product | measured / model |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['n']:,} | {r['workers']} | {r['fit']:.1f} | {r['products']} "
                     f"| {r['panels']} | {r['measured_per_product'] / 1e6:.1f} "
                     f"| {r['model_per_product'] / 1e6:.1f} "
                     f"| {r['measured_per_product'] / r['model_per_product']:.2f} |")
    big = rows[-1]["model_1e6"]
    lines.append("")
    lines.append(f"The model at n = 1e6 on 20 workers of 4 threads ({rows[-1]['panels_1e6']} "
                 f"panels of {big['rows_per_panel']} rows, {big['pairs']} pairs): at most "
                 f"{big['bytes'] / 1e9:.1f} GB per product.")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2e4,5e4,1e5", help="numbers of rows, comma-separated")
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                        help="the kernel tiles' precision")
    parser.add_argument("--dense-check", action="store_true",
                        help="compare with the dense solver at n <= --dense-most")
    parser.add_argument("--dense-most", type=float, default=2e4)
    parser.add_argument("--cluster", type=int, metavar="W",
                        help="fit on a LocalCluster of W worker processes; report traffic")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        spec = json.loads(args.measure)
        print(json.dumps(measure_cluster(spec) if "workers" in spec else measure(spec)))
        return 0
    print(f"# {machine()}", file=sys.stderr)
    rows = []
    for n in (int(float(v)) for v in args.sizes.split(",")):
        spec = ({"n": n, "workers": args.cluster} if args.cluster else
                {"n": n, "dtype": args.dtype, "dense": args.dense_check and n <= args.dense_most})
        rows.append(run(spec))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    text = f"{machine()}\n\n{cluster_table(rows) if args.cluster else table(rows)}"
    print(text)
    write_results("bench_exact_cluster" if args.cluster else "bench_exact", text, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
