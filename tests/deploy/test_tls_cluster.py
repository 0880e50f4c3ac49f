"""The pods' own commands, run for real as processes on 127.0.0.1 with TLS.

The scheduler, worker and fit-job command lines and the TLS environment are read
from the manifests in deploy/, and only what must differ on one machine is
changed: the scheduler's host name becomes 127.0.0.1, ports are free ones, the
Secret's mount point becomes a directory of certificates made by
deploy/make_certs.py, and the job's s3:// URLs become local Zarr stores (object
storage is tested in test_object_storage.py). One worker runs the plain
Deployment's command, the other the operator DaskCluster's.

Clients that must be refused are probed in subprocesses with timeouts: a client
that fails in-process can leave state behind that hangs the next one.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

x509 = pytest.importorskip("cryptography.x509")

from _deploy import (  # noqa: E402
    DEPLOY,
    KUSTOMIZE,
    OPERATOR,
    TLS_MOUNT,
    container_env,
    load_one,
    only_container,
    option,
    tls_env,
)

MAKE_CERTS = DEPLOY / "make_certs.py"
STARTUP_TIMEOUT_S = 60
FIT_TIMEOUT_S = 180
PROBE_TIMEOUT_S = 60


def _make_certs(out_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MAKE_CERTS), str(out_dir), *extra],
                          capture_output=True, text=True, timeout=60, check=False)


# -- the certificate script ---------------------------------------------------------


def test_make_certs_writes_a_chain_the_ca_verifies(tmp_path):
    """make_certs.py writes ca/tls certificates and keys; the CA signed the leaf."""
    result = _make_certs(tmp_path / "certs")
    assert result.returncode == 0, result.stderr
    certs = tmp_path / "certs"
    assert sorted(p.name for p in certs.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
    leaf = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
    leaf.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    # Dask's TLS is mutual: one certificate serves and connects.
    assert {u.dotted_string for u in usages} == {"1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"}
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kpca-dask-scheduler" in names.get_values_for_type(x509.DNSName)


def test_make_certs_keeps_private_keys_owner_only(tmp_path):
    """The private keys are written readable by their owner only."""
    assert _make_certs(tmp_path).returncode == 0
    for name in ("ca.key", "tls.key"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


def test_make_certs_refuses_to_overwrite(tmp_path):
    """A second run into the same directory fails and leaves the first files untouched."""
    assert _make_certs(tmp_path).returncode == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    result = _make_certs(tmp_path)
    assert result.returncode != 0
    assert "already holds" in result.stderr and "remove them" in result.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_make_certs_signs_with_an_existing_ca(tmp_path):
    """--ca-dir signs a further certificate with the same CA and copies only ca.crt."""
    assert _make_certs(tmp_path / "cluster").returncode == 0
    result = _make_certs(tmp_path / "alice", "--ca-dir", str(tmp_path / "cluster"),
                         "--common-name", "alice")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "alice").iterdir()) == \
        ["ca.crt", "tls.crt", "tls.key"]
    ca = x509.load_pem_x509_certificate((tmp_path / "cluster" / "ca.crt").read_bytes())
    x509.load_pem_x509_certificate(
        (tmp_path / "alice" / "tls.crt").read_bytes()).verify_directly_issued_by(ca)


# -- running the manifests' commands -------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _executable(args: list[str]) -> list[str]:
    """The pod's argv with its program taken from this environment (dask, kpca-dask)."""
    program = Path(sys.executable).parent / args[0]
    assert program.exists(), f"{args[0]} is not installed next to {sys.executable}"
    return [str(program), *args[1:]]


def _replace(args: list[str], replacements: dict[str, str]) -> list[str]:
    return [replacements.get(arg, arg) for arg in args]


def _local_env(certs: Path) -> dict[str, str]:
    """This process's environment plus the pods' TLS settings, pointing at ``certs``."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("DASK_")}
    for key, value in tls_env().items():
        env[key] = value.replace(TLS_MOUNT, str(certs))
    return env


class Processes:
    """Processes started by a test, each in its own session, stopped by PID at the end."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "wb")
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        log.close()
        self.started.append((name, process))
        return process

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")[-4000:]

    def raise_if_exited(self) -> None:
        for name, process in self.started:
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}:\n"
                                     f"{self.log(name)}")

    def stop_all(self) -> None:
        # Each process leads its own process group (a nanny and its worker, say):
        # signal the group whose id is the process's PID, SIGTERM first, then SIGKILL.
        for _, process in reversed(self.started):
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for _, process in reversed(self.started):
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process.pid, signal.SIGKILL)
            process.wait(10)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _http_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


def _wait_until(condition, what: str, processes: Processes, timeout=STARTUP_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        processes.raise_if_exited()
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """The cluster's CA and certificate, and a certificate from an unrelated CA."""
    root = tmp_path_factory.mktemp("certs")
    for name in ("cluster", "other"):
        result = _make_certs(root / name)
        assert result.returncode == 0, result.stderr
    return {"cluster": root / "cluster", "other": root / "other"}


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory, certificates):
    """`dask scheduler` and two `dask worker`s as the manifests run them, over TLS."""
    logs = tmp_path_factory.mktemp("logs")
    processes = Processes(logs)
    env = _local_env(certificates["cluster"])
    port, dashboard = _free_port(), _free_port()
    address = f"tls://127.0.0.1:{port}"
    try:
        scheduler = only_container(
            load_one(KUSTOMIZE / "scheduler-deployment.yaml")["spec"]["template"]["spec"])
        args = _replace(scheduler["args"], {option(scheduler["args"], "--port"): str(port),
                                            ":8787": f"127.0.0.1:{dashboard}"})
        processes.start("scheduler", _executable(args) + ["--host", "127.0.0.1"], env)
        probe = scheduler["readinessProbe"]["httpGet"]["path"]
        _wait_until(lambda: _http_json(f"http://127.0.0.1:{dashboard}{probe}")[0] == 200,
                    "the scheduler's readiness probe", processes)

        worker_dashboards, threads = [], 0
        plain = only_container(
            load_one(KUSTOMIZE / "worker-deployment.yaml")["spec"]["template"]["spec"])
        operator = only_container(
            load_one(OPERATOR / "daskcluster.yaml")["spec"]["worker"]["spec"])
        for name, container, pod_name in [("worker-plain", plain, "$(POD_NAME)"),
                                          ("worker-operator", operator, "$(DASK_WORKER_NAME)")]:
            worker_dashboards.append(_free_port())
            threads += int(option(container["args"], "--nthreads"))
            args = _replace(container["args"], {
                "tls://kpca-dask-scheduler:8786": address,
                pod_name: name,
                ":8788": f"127.0.0.1:{worker_dashboards[-1]}",
            })
            worker_env = dict(env)
            for key, value in container_env(container).items():
                worker_env[key] = value.replace("tls://kpca-dask-scheduler:8786", address)
            processes.start(name, _executable(args) + ["--host", "127.0.0.1"], worker_env)

        def both_workers_joined():
            status, body = _http_json(f"http://127.0.0.1:{dashboard}/json/counts.json")
            return status == 200 and json.loads(body)["workers"] == 2

        _wait_until(both_workers_joined, "both workers to join", processes)
        yield {"address": address, "dashboard": dashboard,
               "worker_dashboards": worker_dashboards, "threads": threads, "env": env,
               "processes": processes, "workdir": tmp_path_factory.mktemp("work")}
    finally:
        processes.stop_all()


@pytest.mark.slow
def test_cluster_runs_tls_only_with_healthy_workers(tls_cluster):
    """Scheduler and workers speak tls:// only, and each worker's health probe answers."""
    status, body = _http_json(f"http://127.0.0.1:{tls_cluster['dashboard']}"
                              "/json/identity.json")
    identity = json.loads(body)
    assert identity["address"] == tls_cluster["address"]
    workers = identity["workers"]
    assert len(workers) == 2 and all(w.startswith("tls://127.0.0.1:") for w in workers)
    probe = only_container(load_one(KUSTOMIZE / "worker-deployment.yaml")
                           ["spec"]["template"]["spec"])["readinessProbe"]["httpGet"]["path"]
    for port in tls_cluster["worker_dashboards"]:
        assert _http_json(f"http://127.0.0.1:{port}{probe}")[0] == 200


@pytest.mark.slow
def test_fit_job_command_writes_the_model_over_tls(tls_cluster):
    """The fit Job's `kpca-dask fit` runs against the TLS cluster and writes a valid model."""
    import dask.array as da

    import kpca_dask

    workdir = tls_cluster["workdir"]
    data, model_path = workdir / "input.zarr", workdir / "model.zarr"
    # Few rows keep the job's m x m problem small: m = min(--n-landmarks, rows).
    X = da.random.default_rng(0).standard_normal((400, 5), chunks=(100, 5))
    X.to_zarr(str(data))
    job = only_container(load_one(KUSTOMIZE / "fit-job.yaml")["spec"]["template"]["spec"])
    args = _replace(job["args"], {
        "s3://kpca-dask-data/input.zarr": str(data),
        "s3://kpca-dask-data/model.zarr": str(model_path),
        "tls://kpca-dask-scheduler:8786": tls_cluster["address"],
    })
    assert not [a for a in args if "s3://" in a or "kpca-dask-scheduler" in a]
    result = subprocess.run(_executable(args), env=tls_cluster["env"], capture_output=True,
                            text=True, timeout=FIT_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    # It ran on this cluster, not on a local one of its own.
    where = f"2 worker(s), {tls_cluster['threads']} thread(s) at {tls_cluster['address']}"
    assert where in result.stderr

    model = kpca_dask.load(str(model_path))
    assert model.n_components_ == int(option(args, "--n-components"))
    assert model.kernel_ == option(args, "--kernel")
    # The same fit on this process's threads: the cluster changes nothing (docs/design.md §5).
    reference = kpca_dask.KernelPCA(**model.get_params()).fit(da.from_zarr(str(data)))
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10)


# A client that tries to use the cluster, run as `python -c PROBE JSON`. Prints one JSON line.
PROBE = r"""
import json, socket, ssl, sys
args = json.loads(sys.argv[1])
if args["kind"] == "dask":
    from distributed import Client
    from distributed.security import Security
    try:
        with Client(args["address"], security=Security(**args["security"]),
                    timeout="20s") as client:
            n = len(client.scheduler_info()["workers"])
        print(json.dumps({"connected": True, "workers": n}))
    except Exception as error:
        print(json.dumps({"connected": False, "error": f"{type(error).__name__}: {error}"}))
else:
    # Raw TLS: trust the cluster's CA, present a certificate or none, and read what the
    # scheduler sends first (a dask handshake, only to a peer it accepted).
    context = ssl.create_default_context(cafile=args["ca_file"])
    context.check_hostname = False
    if args.get("cert"):
        context.load_cert_chain(args["cert"], args["key"])
    host, port = args["address"].removeprefix("tls://").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with context.wrap_socket(raw) as tls:
                data = tls.recv(64)
        print(json.dumps({"connected": bool(data), "error": "" if data else "closed"}))
    except (OSError, ssl.SSLError) as error:
        print(json.dumps({"connected": False, "error": f"{type(error).__name__}: {error}"}))
"""


def _probe(request: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(request)],
                            env={k: v for k, v in os.environ.items() if not k.startswith("DASK_")},
                            capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                            check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


#: How a TLS 1.3 client learns that the server rejected its certificate: the server's alert,
#: or, when the client writes before reading it, the connection closed under it.
SERVER_REFUSAL = ("alert", "eof occurred", "connection reset", "closed")


def _refused_by_server(outcome: dict, alert: str) -> bool:
    error = outcome["error"].lower()
    if outcome["connected"] or "timed out" in error:
        return False
    return alert in error or any(sign in error for sign in SERVER_REFUSAL)


def _security(certs: Path, ca: Path | None = None) -> dict:
    return {"tls_ca_file": str((ca or certs) / "ca.crt"),
            "tls_client_cert": str(certs / "tls.crt"),
            "tls_client_key": str(certs / "tls.key"),
            "require_encryption": True}


@pytest.mark.slow
def test_client_with_the_cluster_certificate_connects(tls_cluster, certificates):
    """Control for the probes below: with the cluster's certificate, both probes get in."""
    cluster = certificates["cluster"]
    seen = _probe({"kind": "dask", "address": tls_cluster["address"],
                   "security": _security(cluster)})
    assert seen == {"connected": True, "workers": 2}
    raw = _probe({"kind": "raw", "address": tls_cluster["address"],
                  "ca_file": str(cluster / "ca.crt"), "cert": str(cluster / "tls.crt"),
                  "key": str(cluster / "tls.key")})
    assert raw["connected"] is True


@pytest.mark.slow
def test_client_without_certificate_is_refused(tls_cluster, certificates):
    """A TLS client that trusts the cluster's CA but shows no certificate gets nothing."""
    seen = _probe({"kind": "raw", "address": tls_cluster["address"],
                   "ca_file": str(certificates["cluster"] / "ca.crt")})
    # The scheduler's TLS alert (or its closing the connection), not a fault of the probe.
    assert _refused_by_server(seen, "certificate required"), seen


@pytest.mark.slow
def test_dask_client_without_tls_settings_is_refused(tls_cluster):
    """A dask Client with no TLS configuration cannot use the tls:// scheduler."""
    seen = _probe({"kind": "dask", "address": tls_cluster["address"], "security": {}})
    assert seen["connected"] is False, seen
    assert "TLS" in seen["error"], seen


@pytest.mark.slow
def test_client_with_certificate_from_another_ca_is_refused(tls_cluster, certificates):
    """A certificate signed by another CA is refused, even by a client trusting the server."""
    other, cluster = certificates["other"], certificates["cluster"]
    seen = _probe({"kind": "dask", "address": tls_cluster["address"],
                   "security": _security(other, ca=cluster)})
    raw = _probe({"kind": "raw", "address": tls_cluster["address"],
                  "ca_file": str(cluster / "ca.crt"), "cert": str(other / "tls.crt"),
                  "key": str(other / "tls.key")})
    # The client trusts the scheduler, so an "unknown ca" alert or a closed connection is
    # the scheduler's refusal.
    for outcome in (seen, raw):
        assert _refused_by_server(outcome, "unknown ca"), outcome


@pytest.mark.slow
def test_cluster_still_serves_after_refused_clients(tls_cluster, certificates):
    """Refused connections leave scheduler and workers running and reachable."""
    tls_cluster["processes"].raise_if_exited()
    seen = _probe({"kind": "dask", "address": tls_cluster["address"],
                   "security": _security(certificates["cluster"])})
    assert seen == {"connected": True, "workers": 2}
