"""An S3-compatible server on loopback for the object-storage tests.

moto's server mode runs as a subprocess on 127.0.0.1 and is reached through
s3fs as AWS or any S3 store would be; only the endpoint differs.
``s3_endpoint`` (one server per test module) reaches every test through
tests/conftest.py; the credentials it accepts are imported from here.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

MOTO_SERVER = Path(sys.executable).parent / "moto_server"
#: What the server accepts (moto's defaults), as the variables a pod is given.
S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                  "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    """URL of an S3-compatible server on loopback, stopped by its PID afterwards."""
    if not MOTO_SERVER.exists():
        pytest.skip("moto_server is not installed (pip install 'kpca-dask[deploy]')")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    server = subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"moto_server exited with {server.returncode}"
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "moto_server did not start in 60 s"
                time.sleep(0.2)
        yield endpoint
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
