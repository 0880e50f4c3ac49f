"""Parquet against Zarr on an S3-compatible server on loopback: fit, then transform
with the ids kept, the same rows in both formats, in the same run.

The rows are float32 features plus an int64 ``id``; Parquet is written with
row groups of ``--row-group`` rows, Zarr with chunks of ``--block-rows``
rows (what the Parquet reader merges row groups up to). The server is moto's
(``pip install 'kpca-dask[deploy]'``), started on 127.0.0.1 and stopped by
its PID. Compute is dask's threaded scheduler in this process, so the peak
resident memory sampled here is that of the whole computation.

Bytes read are the loopback interface's traffic during a step (the server's
responses; requests are a few hundred bytes each), so run it on an otherwise
quiet machine: for the whole fit, for the pass alone (a second fit given the
first one's landmarks and gamma, so it samples nothing) and their difference,
the sampling read (gamma, landmarks); and for the transform (which also
writes its output over loopback).

    python bench/bench_tables.py --rows 200000 --features 32
    python bench/bench_tables.py --rows 10000000 --row-group 100000 --block-rows 100000 \
        --rows-per-file 100000 --landmarks 1000     # the documentation's table (~15 min)

moto answers a ranged GET by reading the whole object (moto/s3/models.py,
``FakeKey.value``), so a ranged read of one 2 GB Parquet file costs what
reading all of it does; S3 itself reads only the range. ``--rows-per-file``
writes the table as a dataset of files, as ``dask.dataframe.to_parquet`` does.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PeakMemory, write_results  # noqa: E402


def _moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H",
                               "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
            return server, endpoint
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _write_data(fs, options, n, p, row_group, block_rows, rows_per_file, seed=0):
    """The same rows as Parquet (files of rows_per_file rows in row groups of row_group,
    ``part.<i>.parquet`` as dask writes them) and as Zarr (chunks of block_rows)."""
    import dask.array as da
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kpca_dask.io import write_array

    rng = np.random.default_rng(seed)
    names = [f"f{i}" for i in range(p)]
    schema = pa.schema([("id", pa.int64())] + [(name, pa.float32()) for name in names])
    pieces = []
    for part, first in enumerate(range(0, n, rows_per_file)):
        last = min(first + rows_per_file, n)
        with (fs.open(f"bench/t.parquet/part.{part}.parquet", "wb") as f,
              pq.ParquetWriter(f, schema) as writer):
            for start in range(first, last, row_group):
                rows = min(row_group, last - start)
                X = rng.standard_normal((rows, p), dtype=np.float32)
                pieces.append(X)
                columns = [pa.array(np.arange(start, start + rows, dtype=np.int64))]
                columns += [pa.array(X[:, j]) for j in range(p)]
                writer.write_table(pa.Table.from_arrays(columns, schema=schema))
    X = da.from_array(np.concatenate(pieces), chunks=(block_rows, p))
    write_array(X, "s3://bench/t.zarr", storage_options=options)
    return names


def _served(server: subprocess.Popen) -> int:
    """Bytes sent over loopback so far: the server's responses and the requests."""
    import psutil

    return psutil.net_io_counters(pernic=True)["lo"].bytes_sent


def _timed(step, server):
    memory = PeakMemory()
    served = _served(server)
    started = time.perf_counter()
    step()
    seconds = time.perf_counter() - started
    return seconds, memory.stop().above_start_gib, _served(server) - served


def _run(kind, model, names, options, args, server):
    """Fit from the URL of ``kind``, then transform and write beside it: seconds, GiB, bytes."""
    from kpca_dask.io import open_array, write_embedding
    from kpca_dask.io.parquet_out import write_table
    from kpca_dask.model.table_outputs import transform_table

    url = f"s3://bench/t.{kind}"
    extra = {"columns": names} if kind == "parquet" else {}
    def data():
        return open_array(url, storage_options=options, block_rows=args.block_rows, **extra)

    fit_s, fit_gib, fit_bytes = _timed(lambda: model.fit(data()), server)
    again = type(model)(**{**model.get_params(), "landmarks": model.landmarks_,
                           "n_landmarks": model.n_landmarks_, "gamma": model.gamma_})
    _, _, pass_bytes = _timed(lambda: again.fit(data()), server)
    if kind == "zarr":
        def out():
            write_embedding(model.transform(open_array(url, storage_options=options)),
                            "s3://bench/emb.zarr", storage_options=options)
    else:
        import dask.dataframe as dd

        frame = dd.read_parquet(url, storage_options=options,
                                split_row_groups=max(1, args.block_rows // args.row_group),
                                open_file_options={"precache_options": {"method": "parquet"}})

        def out():
            write_table(transform_table(model, frame, columns=names, keep_columns=["id"]),
                        "s3://bench/emb.parquet", storage_options=options)
    tr_s, tr_gib, tr_bytes = _timed(out, server)
    return kind, fit_s, fit_gib, tr_s, tr_gib, (fit_bytes - pass_bytes, pass_bytes, tr_bytes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--row-group", type=int, default=2_000)
    parser.add_argument("--block-rows", type=int, default=20_000)
    parser.add_argument("--rows-per-file", type=int, default=None,
                        help="rows in each Parquet file (default: one file). moto reads a whole "
                             "object for each ranged GET, so large single files measure moto")
    parser.add_argument("--landmarks", type=int, default=500)
    args = parser.parse_args(argv)

    import dask
    import s3fs

    from kpca_dask import KernelPCA

    server, endpoint = _moto()
    try:
        options = {"key": "testing", "secret": "testing",
                   "client_kwargs": {"endpoint_url": endpoint}}
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("bench")
        names = _write_data(fs, options, args.rows, args.features, args.row_group,
                            args.block_rows, args.rows_per_file or args.rows)
        params = {"n_components": 10, "n_landmarks": args.landmarks, "dtype": "float32",
                  "random_state": 0}
        rows, models = [], {}
        with dask.config.set(scheduler="threads"):
            for kind in ("zarr", "parquet"):
                models[kind] = KernelPCA(**params)
                rows.append(_run(kind, models[kind], names, options, args, server))
        same = np.allclose(models["zarr"].eigenvalues_, models["parquet"].eigenvalues_,
                           rtol=1e-5)
        stored = {kind: sum(info["size"] for info in fs.find(f"bench/t.{kind}",
                                                               detail=True).values())
                  for kind in ("zarr", "parquet")}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)

    base = {kind: (fit_s, tr_s) for kind, fit_s, _, tr_s, _, _ in rows}
    files = -(-args.rows // (args.rows_per_file or args.rows))
    lines = [f"{args.rows} rows x {args.features} float32 + int64 id, Parquet row groups of "
             f"{args.row_group} in {files} file(s), Zarr chunks of {args.block_rows}, "
             f"m = {args.landmarks}, "
             f"threaded scheduler, S3-compatible server (moto) on loopback; "
             f"{os.cpu_count()} CPU(s). Same eigenvalues (1e-5): {same}.", "",
             "| input | stored MB | fit s | fit peak GiB above start | read by sampling MB | "
             "read by the pass MB | transform + write s | transform peak GiB | "
             "read by transform MB | time / Zarr's (fit, transform) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, fit_s, fit_gib, tr_s, tr_gib, (sample_b, pass_b, tr_b) in rows:
        lines.append(f"| {kind} | {stored[kind] / 1e6:.0f} | {fit_s:.2f} | {fit_gib:.2f} | "
                     f"{sample_b / 1e6:.0f} | {pass_b / 1e6:.0f} | {tr_s:.2f} | {tr_gib:.2f} | "
                     f"{tr_b / 1e6:.0f} | "
                     f"{fit_s / base['zarr'][0]:.2f}, {tr_s / base['zarr'][1]:.2f} |")
    text = "\n".join(lines)
    print(text)
    print(f"written to {write_results('bench_tables', text, argv)}")


if __name__ == "__main__":
    main()
