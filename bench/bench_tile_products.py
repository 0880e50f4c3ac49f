"""M's products on tiles: by triangular solves with L, or by L^-1's tiles, and the choice.

On a LocalCluster of one-thread workers, for each m and tile size: G (a random
positive definite m x m matrix) and K_mm's tiled Cholesky factor L (rbf on m
random points) are made on the workers as a fit makes them; then a product
v -> M v with 20 vectors is timed by solves (the least of ``--repeats``), L^-1
is formed (timed), and the product is timed again by L^-1's tiles. Printed beside
them: how many products L^-1 takes to pay back, the model's times
(:mod:`kpca_dask.engine.tiles.product_way`) and the way the fit takes.

    python bench/bench_tile_products.py                       # the table of docs/guide
    python bench/bench_tile_products.py --workers 4 --cases 4000:256
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import machine  # noqa: E402


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def one_case(client, m: int, t: int, repeats: int) -> dict:
    import dask.array as da

    from kpca_dask._parallel import persist_held
    from kpca_dask.engine.tiles.product_way import (
        PRODUCTS,
        inversion_seconds,
        product_way,
        solve_step_seconds,
    )
    from kpca_dask.engine.tiles.solve import TiledOperator, factor_tiles

    rng = np.random.default_rng(0)
    B = da.random.default_rng(0).normal(size=(m, 50), chunks=(t, 50))
    G = persist_held(B @ B.T + da.eye(m, chunks=t), client)  # made on the workers
    sizes = G.chunks[0]
    factor = factor_tiles(rng.normal(size=(m, 8)), "rbf", {"gamma": 0.05}, 1e-10, sizes,
                          client)
    stats = SimpleNamespace(column_sums=np.zeros(m), n_samples=1)
    operator = TiledOperator(G, stats, factor, client)
    del factor
    V = rng.normal(size=(m, 20))
    operator(V)  # the graph's first build and the tiles' placement
    by_solves = min(timed(lambda: operator(V)) for _ in range(repeats))
    inverting = timed(operator.inverted)
    operator(V)
    by_inverse = min(timed(lambda: operator(V)) for _ in range(repeats))
    threads = client.nthreads()
    workers, T = len(threads), len(sizes)
    saved = by_solves - by_inverse
    return {"m": m, "t": t, "T": T, "workers": workers, "solves": by_solves,
            "inverse": by_inverse, "inverting": inverting,
            "pay_back": inverting / saved if saved > 0 else float("inf"),
            "model_inverting": inversion_seconds(m, T, sum(threads.values())),
            "model_saved": 2 * T * solve_step_seconds(T, workers),
            "way": product_way(m, T, workers, sum(threads.values())), "products": PRODUCTS}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="one-thread worker processes")
    parser.add_argument("--cases",
                        default="2000:250,4000:1000,4000:256,8000:2000,8000:500,8000:256",
                        help="m:t pairs, comma-separated (t: the tile's side)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from distributed import Client, LocalCluster

    cases = [tuple(int(x) for x in case.split(":")) for case in args.cases.split(",")]
    rows = []
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        for m, t in cases:
            rows.append(one_case(client, m, t, args.repeats))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.workers} one-thread workers, 20 vectors a product, the least of "
          f"{args.repeats}; load average at the end {load}\n{machine()}\n")
    print("| m | T | workers | product by solves s | by L^-1 s | L^-1 formed s | pays back "
          "after (products) | model: L^-1 s | model: saved a product s | the fit takes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['m']} | {r['T']} | {r['workers']} | {r['solves']:.3f} | "
              f"{r['inverse']:.3f} | {r['inverting']:.2f} | {r['pay_back']:.1f} | "
              f"{r['model_inverting']:.2f} | {r['model_saved']:.3f} | {r['way']} |")
    print(f"\nThe fit forms L^-1 when the model's L^-1 is less than {rows[0]['products']} "
          "products' saving.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
