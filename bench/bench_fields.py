"""Kernel EOF of large fields beside xeofs: time and peak memory on Zarr stores (design §19).

For each size (time x lat x lon) a synthetic daily field is written to Zarr
(float32, chunks of ``--chunk`` time steps x the whole grid, zstd), made of a
standing mode, an eastward travelling wave in the tropics, a basin mode and
noise, NaN over a land box at every time; each chunk is seeded by its place,
so any chunk can be made alone. A store of the same shape already there is
reused. Then each method fits the lazy field (``xr.open_dataarray(..., chunks={})``)
in a fresh process on the threaded scheduler, with √cos(lat) weights and
``--modes`` modes, and the parent samples the resident memory of the child's
whole process tree every 50 ms:

- ``xeofs-linear``: ``xeofs.single.EOF(use_coslat=True).fit(X, "time")`` (its Dask path);
- ``kpca-linear`` / ``kpca-rbf``: ``ExactKernelPCA(kernel=...)``, the Gram way, then its
  maps, ``patterns(X, kind="eof")`` (xeofs' fit ends with its components, the
  Hilbert fits with their maps: every method here does);
- ``kpca-default``: ``KernelPCA()`` as a new user writes it (rbf, ``solver="auto"``,
  which takes the Gram way for such a field), then its maps; ``kpca-nystrom`` the same
  with ``solver="nystrom"`` (1000 k-means landmarks), the way it took before;
- ``xeofs-hilbert``: ``xeofs.single.HilbertEOF(use_coslat=True, padding="none")``,
  which refuses Dask input, so the field is loaded first (skipped beyond
  ``--hilbert-most`` GB of field);
- ``kpca-hilbert`` / ``kpca-hilbert-rbf``: ``HilbertKernelEOF(padding="none")``,
  the Gram way;
- ``xeofs-extended`` / ``kpca-extended``: xeofs' ``ExtendedEOF(use_coslat=True)`` and
  ``ExtendedKernelEOF(kernel="linear")``, both with tau = 5, 4 lagged copies and the
  field first reduced to its 40 leading linear EOFs (``n_pca_modes``; kpca-dask's
  linear stage by the Gram way).

It prints, per size, the seconds and the peak GB of each method, their ratios
to xeofs' linear EOF (and the Hilbert ones to xeofs' Hilbert EOF), and the
largest relative difference of the variance ratios against xeofs' (whose
default solver is randomized for larger fields: its last mode may differ by
more than the others).

    python bench/bench_fields.py                                  # 0.5 GB and 5.2 GB fields
    python bench/bench_fields.py --sizes 2000x180x360             # the 0.5 GB field alone
    python bench/bench_fields.py --sizes 100x18x36 --chunk 10     # seconds
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import RESULTS, machine, write_results  # noqa: E402
from _fresh import start_python  # noqa: E402

METHODS = ("xeofs-linear", "kpca-linear", "kpca-rbf", "kpca-default", "kpca-nystrom",
           "xeofs-hilbert", "kpca-hilbert", "kpca-hilbert-rbf", "xeofs-extended",
           "kpca-extended")
#: Which xeofs method each kpca-dask one is compared with (its ratios, and its cost).
PEERS = {"kpca-linear": "xeofs-linear", "kpca-hilbert": "xeofs-hilbert",
         "kpca-extended": "xeofs-extended"}
#: The extended EOF's delay, lagged copies and linear EOFs embedded (xeofs' n_pca_modes).
EXTENDED = {"tau": 5, "embedding": 4, "n_pca_modes": 40}


def _block(block_info=None):
    """One chunk of the field: seeded by its first time step, so it can be made alone."""
    import numpy as np

    info = block_info[None]
    (t0, t1), _, _ = info["array-location"]
    _, nlat, nlon = info["chunk-shape"]
    rng = np.random.default_rng([7, t0])
    t = np.arange(t0, t1, dtype=np.float64)[:, None, None]
    lat = np.linspace(-89.5, 89.5, nlat)[None, :, None]
    lon = np.linspace(0, 360, nlon, endpoint=False)[None, None, :]
    standing = np.cos(np.deg2rad(lat)) * np.sin(2 * np.deg2rad(lon)) * np.sin(
        2 * np.pi * t / 365.25)
    wave = np.exp(-(lat / 15) ** 2) * np.cos(3 * np.deg2rad(lon) - 2 * np.pi * t / 60)
    basin = np.exp(-((lat - 40) / 12) ** 2 - ((lon - 180) / 30) ** 2) * np.cos(
        2 * np.pi * t / 1000)
    x = 3 * standing + 2 * wave + 1.5 * basin + 0.5 * rng.standard_normal((t1 - t0, nlat, nlon))
    land = (np.abs(lat - 10) < 25) & (np.abs(lon - 290) < 25)
    return np.where(np.broadcast_to(land, x.shape), np.nan, x).astype(np.float32)


def field_store(shape: tuple[int, int, int], chunk: int, directory: Path) -> Path:
    """The Zarr store of a field of ``shape``, written unless one of that shape is there."""
    import dask.array as da
    import numpy as np
    import xarray as xr

    path = directory / f"field-{'x'.join(map(str, shape))}-{chunk}.zarr"
    if path.exists():
        try:
            if xr.open_dataarray(path, engine="zarr", chunks={},
                                 consolidated=False).shape == shape:
                return path
        except (OSError, ValueError):
            pass
    nt, nlat, nlon = shape
    chunks = ((chunk,) * (nt // chunk) + ((nt % chunk,) if nt % chunk else ()), (nlat,), (nlon,))
    field = xr.DataArray(
        da.map_blocks(_block, chunks=chunks, dtype=np.float32), dims=("time", "lat", "lon"),
        name="field", coords={"time": np.arange(nt), "lat": np.linspace(-89.5, 89.5, nlat),
                              "lon": np.linspace(0, 360, nlon, endpoint=False)})
    directory.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed once complete: an interrupted write (minutes at 5 GB) has
    # the whole shape in its metadata and would otherwise be reused, its missing chunks NaN.
    partial = path.with_suffix(".partial")
    shutil.rmtree(partial, ignore_errors=True)
    field.to_dataset().to_zarr(partial, mode="w", consolidated=False)
    shutil.rmtree(path, ignore_errors=True)
    partial.rename(path)
    return path


def stored_bytes(path: Path, shape: tuple[int, int, int]) -> int:
    """The field's size as quoted, its float32 bytes (NaN land included), checked against
    the store's own array."""
    import xarray as xr

    field = xr.open_dataarray(path, engine="zarr", chunks={}, consolidated=False)
    nbytes = 4 * shape[0] * shape[1] * shape[2]
    if field.dtype != "float32" or field.shape != shape or field.nbytes != nbytes:
        raise SystemExit(f"{path} holds {field.dtype} {field.shape}, not float32 {shape}")
    return nbytes


def measure(spec: dict) -> dict:
    """One method's fit in this process (run by :func:`run_apart` in a fresh one)."""
    import dask
    import numpy as np
    import xarray as xr

    dask.config.set(scheduler="threads")
    X = xr.open_dataarray(spec["path"], engine="zarr", chunks={}, consolidated=False)
    weights = np.sqrt(np.cos(np.deg2rad(X.lat)))
    q, method = spec["modes"], spec["method"]
    out = {}
    if method.startswith("xeofs"):
        import xeofs

        if method == "xeofs-linear":
            model = xeofs.single.EOF(n_modes=q, use_coslat=True).fit(X, "time")
        elif method == "xeofs-extended":
            model = xeofs.single.ExtendedEOF(n_modes=q, use_coslat=True, **EXTENDED).fit(
                X, "time")
        else:  # HilbertEOF refuses dask input: the field is loaded first
            model = xeofs.single.HilbertEOF(n_modes=q, use_coslat=True, padding="none").fit(
                X.load(), "time")
        ratios = model.explained_variance_ratio().values
    else:
        from kpca_dask import ExactKernelPCA, ExtendedKernelEOF, HilbertKernelEOF, KernelPCA

        kernel = "rbf" if method.endswith("rbf") else "linear"
        if method == "kpca-extended":  # its components are computed in its fit
            model = ExtendedKernelEOF(q, kernel="linear", weights=weights, sample_dim="time",
                                      **EXTENDED).fit(X)
            out["solver"] = model.solver_
        elif method.startswith("kpca-hilbert"):
            model = HilbertKernelEOF(q, kernel=kernel, padding="none", weights=weights,
                                     sample_dim="time").fit(X)
            out["solver"] = model.solver_
        else:
            if method in ("kpca-default", "kpca-nystrom"):
                solver = "nystrom" if method == "kpca-nystrom" else "auto"
                model = KernelPCA(n_components=q, weights=weights, sample_dim="time",
                                  solver=solver).fit(X)
                out["solver"] = model.solver_
            else:
                model = ExactKernelPCA(n_components=q, kernel=kernel, weights=weights,
                                       sample_dim="time").fit(X)
            # xeofs' fit ends with its components; the Hilbert fit with its maps: these too.
            out["maps_shape"] = list(model.patterns(X, kind="eof").compute().shape)
        ratios = model.explained_variance_ratio_
    out["ratios"] = [float(r) for r in np.asarray(ratios)]
    return out


def run_apart(spec: dict) -> dict:
    """``measure(spec)`` in a fresh process: its result, wall seconds and the peak resident
    memory of its process tree, sampled every 50 ms."""
    import psutil

    # Files, not pipes: this loop reads nothing until the child ends, and a child writing
    # more than a pipe holds (warnings) would wait on it for ever.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = start_python([__file__, "--measure", json.dumps(spec)], stdout=out, stderr=err)
        process, peak = psutil.Process(child.pid), 0
        while child.poll() is None:
            try:
                peak = max(peak, sum(p.memory_info().rss
                                     for p in [process, *process.children(recursive=True)]))
            except psutil.Error:  # a process of the tree ended between the two calls
                pass
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if child.returncode != 0:
        raise SystemExit(f"{spec['method']} ended with {child.returncode}:\n{stderr[-4000:]}")
    return {**json.loads(stdout.strip().splitlines()[-1]), "seconds": seconds,
            "peak_gb": peak / 1e9}


def table(shape, rows: dict) -> str:
    """The Markdown table of one size's runs."""
    import numpy as np

    lines = ["| method | s | peak GB | time / xeofs EOF | peak / xeofs EOF | "
             "time, peak / xeofs' same | ratios vs xeofs |", "|---|---:|---:|---:|---:|---:|---:|"]
    base = rows.get("xeofs-linear")
    for method, row in rows.items():
        if "skipped" in row:
            lines.append(f"| {method} | {row['skipped']} | | | | | |")
            continue
        name = method + (f" ({row['solver']})" if "solver" in row else "")
        against = ([f"{row['seconds'] / base['seconds']:.2f}",
                    f"{row['peak_gb'] / base['peak_gb']:.2f}"] if base else ["", ""])
        peer = rows.get(PEERS.get(method, ""), {})
        same = (f"{row['seconds'] / peer['seconds']:.2f}, {row['peak_gb'] / peer['peak_gb']:.2f}"
                if "seconds" in peer else "")
        agree = ""
        if "ratios" in peer:
            difference = np.abs(np.subtract(row["ratios"], peer["ratios"]))
            agree = f"{np.max(difference / np.abs(peer['ratios'])):.1e}"
        lines.append(f"| {name} | {row['seconds']:.1f} | {row['peak_gb']:.2f} | {against[0]} | "
                     f"{against[1]} | {same} | {agree} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2000x180x360,5000x720x360")
    parser.add_argument("--chunk", type=int, default=50, help="time steps per chunk")
    parser.add_argument("--modes", type=int, default=4)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--hilbert-most", type=float, default=2.0,
                        help="largest field (GB of float32) xeofs' HilbertEOF loads")
    parser.add_argument("--store-dir", type=Path, default=RESULTS / "fields")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(json.loads(args.measure))))
        return
    methods = [m for m in args.methods.split(",") if m]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    out = [f"{machine()}; load average before {os.getloadavg()[0]:.2f}"]
    for size in args.sizes.split(","):
        shape = tuple(int(v) for v in size.lower().split("x"))
        path = field_store(shape, args.chunk, args.store_dir)
        gigabytes = stored_bytes(path, shape) / 1e9
        rows: dict = {}
        for method in methods:
            if method == "xeofs-hilbert" and gigabytes > args.hilbert_most:
                rows[method] = {"skipped": f"skipped (loads the field: {gigabytes:.1f} GB)"}
                continue
            rows[method] = run_apart({"path": str(path), "method": method,
                                      "modes": args.modes})
            print(method, json.dumps(rows[method]), flush=True)
        out += [f"\n**{size}** float32 ({gigabytes:.2f} GB; chunks of {args.chunk} time steps "
                f"x the grid), load average after {os.getloadavg()[0]:.2f}:\n",
                table(shape, rows)]
    text = "\n".join(out)
    print(text)
    write_results("bench_fields", text, argv)


if __name__ == "__main__":
    main()
