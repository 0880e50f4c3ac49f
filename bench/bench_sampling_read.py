"""Bytes a fit reads before its pass (the samples for gamma and the landmarks) and in it.

One Zarr store of n x 32 float32 blobs (``kpca-dask generate``), on local disk
and copied to an S3-compatible server on 127.0.0.1 (moto_server, as in
tests/deploy/test_object_storage.py). Each fit opens the store through a Zarr
store wrapper that counts the chunk objects and bytes it hands out; a
KernelPCA whose pass notes the count when it starts splits them into the
sampling read and the pass. The fit runs on the threaded scheduler in a
subprocess, once with this checkout's kpca_dask and, with ``--before PATH``,
once with another checkout's (the code before runs of rows), on the same store
in the same run.

Usage::

    python bench/bench_sampling_read.py --n 1e7 --before ../main
    python bench/bench_sampling_read.py --n 1e6 --chunk-rows 10000 --gamma median --no-s3
    python bench/bench_sampling_read.py --n 1e7 --before ../main --no-pass  # minutes, not hours

``--no-pass`` stops each fit where its pass would start: the bytes before the
pass are the same, and the pass of a fit reads each stored chunk once.

The markdown table goes to stdout and to bench/results/bench_sampling_read.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_results  # noqa: E402
from _fresh import run_python  # noqa: E402

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
MOTO_SERVER = Path(sys.executable).parent / "moto_server"
S3_OPTIONS = {"key": "testing", "secret": "testing"}


# -- the measured fit, run in a subprocess with the kpca_dask under test ------

def _measure(spec: dict) -> dict:
    """Fit the store named in ``spec``; bytes and chunks read before and in the pass."""
    import dask
    import zarr
    from zarr.storage import FsspecStore, LocalStore, WrapperStore

    from kpca_dask import KernelPCA
    from kpca_dask.io import open_array

    class CountingStore(WrapperStore):
        """Counts the chunk objects and their bytes handed to the reader."""

        def __init__(self, store, counts=None):
            super().__init__(store)
            self.counts = collections.Counter() if counts is None else counts

        def _with_store(self, store):
            return type(self)(store, self.counts)

        async def get(self, key, prototype, byte_range=None):
            value = await super().get(key, prototype, byte_range)
            if value is not None and key.startswith("c/"):
                self.counts["chunks"] += 1
                self.counts["bytes"] += len(value)
            return value

    if spec["url"].startswith("s3://"):
        base = FsspecStore.from_url(spec["url"], read_only=True, storage_options={
            **S3_OPTIONS, "client_kwargs": {"endpoint_url": spec["endpoint"]}})
    else:
        base = LocalStore(spec["url"], read_only=True)
    store = CountingStore(base)
    at_pass: dict = {}
    started = time.perf_counter()

    class PassStarts(Exception):
        pass

    from kpca_dask.model import fitting

    # The fit's pass function: compute_pass, or pass_statistics in older checkouts.
    name = "compute_pass" if hasattr(fitting, "compute_pass") else "pass_statistics"
    one_pass = getattr(fitting, name)

    def noting_pass(*args, **kwargs):
        """The fit's pass, noted as it starts: what was read before it was the sampling."""
        at_pass.update(store.counts, seconds=time.perf_counter() - started)
        if not spec["with_pass"]:
            raise PassStarts
        return one_pass(*args, **kwargs)

    setattr(fitting, name, noting_pass)  # this measuring process only
    X = open_array(zarr.open_array(store=store, mode="r"))
    kpca = KernelPCA(10, n_landmarks=spec["n_landmarks"], gamma=spec["gamma"],
                     dtype="float32", random_state=0)
    try:
        with dask.config.set(scheduler="threads"):
            kpca.fit(X)
    except PassStarts:
        pass
    return {"sampling_bytes": at_pass.get("bytes", 0), "sampling_chunks": at_pass.get("chunks", 0),
            "sampling_seconds": at_pass["seconds"],
            "pass_bytes": store.counts["bytes"] - at_pass.get("bytes", 0),
            "pass_chunks": store.counts["chunks"] - at_pass.get("chunks", 0),
            "fit_seconds": time.perf_counter() - started if spec["with_pass"] else None}


def run_measurement(checkout: Path, spec: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout),
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
    out = run_python([str(HERE), "--measure", json.dumps(spec)], env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# -- the data: one local store, and its copy on a loopback S3 server ----------

def write_store(path: Path, n: int, chunk_rows: int) -> None:
    run_python(["-m", "kpca_dask", "generate", "blobs", "--n-samples", str(n), "--n-features",
                "32", "--dtype", "float32", "--chunk-rows", str(chunk_rows), "--out", str(path)],
               env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)


def chunk_bytes(path: Path) -> tuple[int, int]:
    """Count and total size of the chunk objects of the Zarr array at ``path``."""
    chunks = [f for f in (path / "c").rglob("*") if f.is_file()]
    return len(chunks), sum(f.stat().st_size for f in chunks)


class MotoServer:
    """moto_server on a free loopback port, stopped by its process group on exit."""

    def __enter__(self):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2).close()
                return self
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)

    def __exit__(self, *exc):
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(10)


def copy_to_s3(path: Path, endpoint: str) -> str:
    import s3fs

    fs = s3fs.S3FileSystem(**S3_OPTIONS, client_kwargs={"endpoint_url": endpoint})
    fs.mkdir("bench")
    fs.put(str(path), "bench/data.zarr", recursive=True)
    return "s3://bench/data.zarr"


# -- the table -----------------------------------------------------------------

def table(rows: list[dict], args, n_chunks: int, total: int) -> str:
    lines = [
        f"n = {args.n:.0e} x 32 float32 blobs, {args.chunk_rows} rows per stored chunk "
        f"({n_chunks} chunks, {total / 2**20:.0f} MiB stored); m = {args.n_landmarks} k-means "
        f"landmarks, gamma={args.gamma}; threaded scheduler, {os.cpu_count()} cores, shared with "
        "other jobs (times are indicative).",
        "",
        "| store | code | read before the pass: chunks | MiB | % of stored bytes | s "
        "| pass: chunks | MiB | fit s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ran = r["fit_seconds"] is not None  # else stopped where the pass starts
        pass_cells = (f"{r['pass_chunks']} | {r['pass_bytes'] / 2**20:.0f} "
                      f"| {r['fit_seconds']:.1f}" if ran else "- | - | -")
        lines.append(
            f"| {r['store']} | {r['code']} | {r['sampling_chunks']} "
            f"| {r['sampling_bytes'] / 2**20:.1f} | {100 * r['sampling_bytes'] / total:.1f} "
            f"| {r['sampling_seconds']:.1f} | {pass_cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=float, default=1e7)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--n-landmarks", type=int, default=1000)
    parser.add_argument("--gamma", default="median",
                        help="'median', 'scale' or a number (no sample for gamma)")
    parser.add_argument("--before", type=Path,
                        help="a checkout of kpca-dask to compare with (its repository root)")
    parser.add_argument("--no-s3", action="store_true", help="local disk only")
    parser.add_argument("--no-pass", action="store_true",
                        help="stop each fit where its pass starts (the sampling read only)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(_measure(json.loads(args.measure))))
        return
    gamma = args.gamma if args.gamma in ("median", "scale") else float(args.gamma)
    codes = [("after", REPO)] + ([("before", args.before.resolve())] if args.before else [])
    workdir = Path(tempfile.mkdtemp(prefix="bench-sampling-", dir=args.workdir))
    rows = []
    try:
        path = workdir / "data.zarr"
        write_store(path, int(args.n), args.chunk_rows)
        n_chunks, total = chunk_bytes(path)
        spec = {"url": str(path), "n_landmarks": args.n_landmarks, "gamma": gamma,
                "with_pass": not args.no_pass}
        for code, checkout in codes:
            rows.append({"store": "local disk", "code": code,
                         **run_measurement(checkout, spec)})
            print(rows[-1], file=sys.stderr)
        if not args.no_s3:
            with MotoServer() as server:
                url = copy_to_s3(path, server.endpoint)
                for code, checkout in codes:
                    rows.append({"store": "S3 (moto, 127.0.0.1)", "code": code,
                                 **run_measurement(checkout, {**spec, "url": url,
                                                              "endpoint": server.endpoint})})
                    print(rows[-1], file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text = table(rows, args, n_chunks, total)
    print(text)
    write_results("bench_sampling_read", text, argv)


if __name__ == "__main__":
    main()
