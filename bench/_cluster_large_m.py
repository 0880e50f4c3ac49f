"""``bench_large_m.py --cluster``: the m x m work on a LocalCluster's workers (design §11).

One fit per (m, workers) in a fresh process: a LocalCluster of W worker
processes of one thread each and ``--worker-memory`` each, the same data as
the single-process rows (n x 32 float32 uniform, rbf, uniform landmarks,
q = 10). Measured: the fit, how it ran (one worker, or tiles and their
size), this process's (the client's) peak resident memory above its start,
each worker's peak against its limit, whether a worker paused or was
restarted, and the bytes the workers sent one another (their
``transfer_outgoing_bytes_total``, summed).
"""

from __future__ import annotations

import os
import time

import numpy as np


def measure_cluster(spec: dict) -> dict:
    """One fit on a fresh LocalCluster (run in a process of its own by bench_large_m)."""
    import dask
    import dask.array as da
    from _common import PeakMemory
    from distributed import Client, LocalCluster

    from kpca_dask import KernelPCA
    from kpca_dask.dask_client import environment_kept
    from kpca_dask.diagnostics import watch_workers

    n, m, workers = spec["n"], spec["m"], spec["workers"]
    X = np.random.default_rng(0).uniform(size=(n, 32)).astype(np.float32)
    data = da.from_array(X, chunks=(8192, 32))
    with environment_kept():
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None,
                               memory_limit=spec["worker_memory"])
    config = {} if spec.get("solve") in (None, "auto") else {
        "kpca-dask.landmark-solve": spec["solve"]}
    with environment_kept(), cluster, Client(cluster) as client, dask.config.set(config):
        # A warm-up fit loads what a first fit loads (numba's kernels) on every worker.
        KernelPCA(2, n_landmarks=20, gamma=0.01, dtype="float32").fit(data[:2000])
        pids = client.run(os.getpid)
        with watch_workers(client) as watched:
            memory = PeakMemory()
            started = time.perf_counter()
            kpca = KernelPCA(10, n_landmarks=m, landmarks="uniform", gamma=spec["gamma"],
                             dtype="float32", random_state=0).fit(data)
            fit = time.perf_counter() - started
            memory.stop()
        gram = kpca.statistics_.gram
        tiles = gram.numblocks[0] if hasattr(gram, "numblocks") else 0
        restarted = client.run(os.getpid) != pids
    return {"m": m, "n": n, "workers": workers, "fit": fit,
            "client_gib": memory.above_start_gib, "tiles": tiles,
            "tile": int(gram.chunks[0][0]) if tiles else m,
            "worker_peak_gib": max(w.peak for w in watched.values()) / 2**30,
            "limit_gib": min(w.limit for w in watched.values()) / 2**30,
            "paused": any(w.paused for w in watched.values()), "restarted": restarted,
            "moved_gib": sum(w.sent for w in watched.values()) / 2**30,
            "eigenvalues": [float(v) for v in kpca.eigenvalues_]}


def cluster_table(rows: list[dict]) -> str:
    """The --cluster table: each cluster fit beside the single-process fit of the same m."""
    lines = ["| m | workers × limit GiB | way (tile) | fit s | single-process fit s | floor s "
             "| **fit / single-process fit** | **fit / floor** | client growth GiB "
             "| worker peak / limit | paused or restarted | moved between workers GiB "
             "| max eigenvalue difference |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        local = r.get("single", {})
        floor = local.get("syrk", 0.0) + local.get("cholesky", 0.0)
        way = f"tiles {r['tiles']}² ({r['tile']})" if r["tiles"] > 1 else "one worker"
        if local.get("eigenvalues"):
            ratio = np.divide(r["eigenvalues"], local["eigenvalues"])
            difference = f"{np.max(np.abs(ratio - 1)):.1e}"
        else:
            difference = "–"
        single = f"{local['fit']:.1f}" if "fit" in local else "–"
        # Tiles are judged against one process with as many threads as there are workers.
        to_single = f"**{r['fit'] / local['fit']:.2f}**" if "fit" in local else "–"
        ratio = f"**{r['fit'] / floor:.2f}**" if floor else "–"
        lines.append(
            f"| {r['m']} | {r['workers']} × {r['limit_gib']:.2f} | {way} | {r['fit']:.1f} "
            f"| {single} | {floor:.1f} | {to_single} | {ratio} | {r['client_gib']:.2f} "
            f"| {r['worker_peak_gib'] / r['limit_gib']:.2f} "
            f"| {'yes' if r['paused'] or r['restarted'] else 'no'} | {r['moved_gib']:.2f} "
            f"| {difference} |")
    return "\n".join(lines)

