"""The image run for real: a TLS cluster of containers, started as the pods are.

A scheduler container, two worker containers and `kpca-dask fit` job containers run
the image with the commands, arguments, environment, user, security settings, limits
and volumes of the plain manifests (deploy/kustomize/), read from them: the
certificates of deploy/make_certs.py are mounted where the kpca-dask-tls Secret is, the
TLS settings come from the kpca-dask-tls-env ConfigMap, emptyDir volumes are tmpfs.
Every container shares the host's network and talks over 127.0.0.1 only, so what
differs from the pods is what must differ on one machine: the scheduler's service name
resolves to 127.0.0.1 (``--add-host``), processes listen on 127.0.0.1 (``--host``), the
two workers' dashboards get free ports, and so do the scheduler's if 8786 or 8787 is
taken. Data and model live on a mounted volume, and once on a loopback S3 server.

The image is built by ``make test-deploy`` (deploy/test-deploy.sh), never here: without
a running Docker engine or without the image these tests are skipped, and they fail
instead when KPCA_DASK_REQUIRE_DOCKER=1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cryptography")
s3fs = pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
from _deploy import (  # noqa: E402
    KUSTOMIZE,
    TLS_ENV_CONFIGMAP,
    TLS_MOUNT,
    TLS_SECRET,
    expand_variables,
    image_reference,
    kubernetes_bytes,
    load_one,
    only_container,
    option,
    pod_environment,
    tls_env,
)
from _s3 import S3_CREDENTIALS as CREDENTIALS  # noqa: E402
from test_tls_cluster import (  # noqa: E402
    PROBE,
    _free_port,
    _http_json,
    _make_certs,
    _refused_by_server,
)

import kpca_dask  # noqa: E402
from kpca_dask.blocks.statistics import statistics_of_block  # noqa: E402
from kpca_dask.io import write_array  # noqa: E402

#: Name of the pass's per-block tasks, whose results a killed worker holds.
BLOCK_TASK = statistics_of_block.__name__

pytestmark = pytest.mark.slow

REQUIRE_DOCKER = os.environ.get("KPCA_DASK_REQUIRE_DOCKER") == "1"
IMAGE = os.environ.get("KPCA_DASK_IMAGE") or image_reference()
#: The scheduler Service's name, as the workers and the job address it.
SCHEDULER_HOST = "kpca-dask-scheduler"
S3_SECRET = "kpca-dask-s3"
DATA_MOUNT = "/data"
STARTUP_TIMEOUT_S = 120
FIT_TIMEOUT_S = 300


def _pod(name: str) -> dict:
    return load_one(KUSTOMIZE / name)["spec"]["template"]["spec"]


SCHEDULER_POD = _pod("scheduler-deployment.yaml")
WORKER_POD = _pod("worker-deployment.yaml")
JOB_POD = _pod("fit-job.yaml")
WORKER_POD_REPLICAS = load_one(KUSTOMIZE / "worker-deployment.yaml")["spec"]["replicas"]


# -- docker ---------------------------------------------------------------------------


def _unavailable(reason: str):
    if REQUIRE_DOCKER:
        pytest.fail(f"{reason} (KPCA_DASK_REQUIRE_DOCKER=1)", pytrace=False)
    pytest.skip(reason)


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["docker", *args], capture_output=True, text=True,
                            timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:2])} failed ({result.returncode}):\n"
                             f"{result.stdout}{result.stderr}")
    return result


@pytest.fixture(scope="module")
def image() -> str:
    """The image, when a Docker engine runs and holds it; else skip (or fail)."""
    if shutil.which("docker") is None:
        _unavailable("no docker command: `make test-deploy` installs Docker and runs these")
    info = docker("info", "--format", "{{.ServerVersion}}", timeout=30, check=False)
    if info.returncode != 0:
        _unavailable("no Docker engine is running: `make test-deploy` starts one and runs these")
    if docker("image", "inspect", IMAGE, timeout=30, check=False).returncode != 0:
        _unavailable(f"image {IMAGE} is not built: `make test-deploy` builds it and runs these")
    return IMAGE


class Containers:
    """Containers started by a test run, labelled with its id and removed at the end."""

    def __init__(self, image: str):
        self.image = image
        self.run_id = uuid.uuid4().hex[:8]

    def name(self, role: str) -> str:
        return f"kpca-dask-test-{self.run_id}-{role}"

    def run(self, name: str, options: list[str], args: list[str]) -> str:
        docker("run", "--detach", "--name", name, "--label", f"kpca-dask-test={self.run_id}",
               *options, self.image, *args)
        return name

    def run_to_end(self, name: str, options: list[str], args: list[str],
                   timeout: float = FIT_TIMEOUT_S) -> tuple[int, str]:
        """Runs a container to its end: (exit code, output)."""
        self.run(name, options, args)
        code = int(docker("wait", name, timeout=timeout).stdout.strip())
        return code, self.logs(name)

    def logs(self, name: str) -> str:
        result = docker("logs", name, check=False)
        return (result.stdout + result.stderr)[-6000:]

    def state(self, name: str) -> dict:
        return json.loads(docker("inspect", "--format", "{{json .State}}", name).stdout)

    def remove_all(self) -> None:
        ids = docker("ps", "--all", "--quiet", "--filter", f"label=kpca-dask-test={self.run_id}",
                     check=False).stdout.split()
        if ids:
            docker("rm", "--force", "--volumes", *ids, check=False)


def pod_options(pod_spec: dict, name: str, *, secret_dir: Path,
                s3_env: dict[str, str] | None = None,
                mounts: dict[Path, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """`docker run` options that give a container what the pod gives its container.

    Returns the options and the container's environment (for ``$(VAR)`` in its args).
    """
    container = only_container(pod_spec)
    pod_security = pod_spec.get("securityContext", {})
    security = container.get("securityContext", {})
    options = ["--network", "host", "--add-host", f"{SCHEDULER_HOST}:127.0.0.1",
               "--user", f"{pod_security['runAsUser']}:{pod_security['runAsGroup']}",
               "--stop-timeout", str(pod_spec.get("terminationGracePeriodSeconds", 30))]
    if "fsGroup" in pod_security:
        options += ["--group-add", str(pod_security["fsGroup"])]
    if security.get("readOnlyRootFilesystem"):
        options.append("--read-only")
    if security.get("allowPrivilegeEscalation") is False:
        options += ["--security-opt", "no-new-privileges"]
    for capability in security.get("capabilities", {}).get("drop", []):
        options += ["--cap-drop", capability]
    limits = container.get("resources", {}).get("limits", {})
    if "memory" in limits:
        options += ["--memory", str(kubernetes_bytes(limits["memory"]))]
    if "cpu" in limits:  # docker refuses more CPUs than the machine has
        options += ["--cpus", str(min(float(limits["cpu"]), os.cpu_count() or 1))]

    volumes = {volume["name"]: volume for volume in pod_spec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "secret" in volume:
            assert volume["secret"]["secretName"] == TLS_SECRET, volume
            options += ["--volume", f"{secret_dir}:{mount['mountPath']}:ro"]
        elif "emptyDir" in volume:
            size = kubernetes_bytes(volume["emptyDir"].get("sizeLimit", "1Gi"))
            options += ["--tmpfs", f"{mount['mountPath']}:rw,size={size},mode=1777"]
        else:
            raise AssertionError(f"no stand-in for volume {volume}")
    for host_path, container_path in (mounts or {}).items():
        options += ["--volume", f"{host_path}:{container_path}"]

    secrets = {S3_SECRET: s3_env} if s3_env else {}
    env = pod_environment(pod_spec, name, {TLS_ENV_CONFIGMAP: tls_env()}, secrets)
    for key, value in env.items():
        options += ["--env", f"{key}={value}"]
    return options, env


# -- the cluster ------------------------------------------------------------------------


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_until(condition, what: str, containers: Containers, names: list[str],
                timeout: float = STARTUP_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in names:
            if not containers.state(name)["Running"]:
                raise AssertionError(f"{name} is not running:\n{containers.logs(name)}")
        try:
            if condition():
                return
        except OSError:
            pass
        time.sleep(0.5)
    logs = "\n".join(f"--- {name}\n{containers.logs(name)}" for name in names)
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


def _secret_dir(certs: Path, target: Path, names=("ca.crt", "tls.crt", "tls.key"),
                ca: Path | None = None) -> Path:
    """``certs`` as the Secret volume shows them: group fsGroup, mode defaultMode (0440).

    ``ca``: a directory whose ca.crt to take instead of the one in ``certs``.
    """
    mode = SCHEDULER_POD["volumes"][0]["secret"]["defaultMode"]
    group = SCHEDULER_POD["securityContext"]["fsGroup"]
    target.mkdir(mode=0o755)
    for name in names:
        source = (ca or certs) if name == "ca.crt" else certs
        shutil.copyfile(source / name, target / name)
        if os.geteuid() == 0:
            os.chown(target / name, 0, group)
            os.chmod(target / name, mode)
        else:  # only root can give the files to the pod's group: let everyone read them
            os.chmod(target / name, 0o444)
    return target


def _s3_env(endpoint: str) -> dict[str, str]:
    """What the kpca-dask-s3 Secret holds, pointing at the loopback S3 server."""
    keys = set(load_one(KUSTOMIZE / "s3-secret.template.yaml")["stringData"])
    env = {**CREDENTIALS, "AWS_ENDPOINT_URL_S3": endpoint}
    assert keys <= env.keys()
    return env


@pytest.fixture(scope="module")
def cluster(image, tmp_path_factory, s3_endpoint):  # noqa: F811 (fixture)
    """The scheduler and two workers in containers, as the Deployments run them."""
    root = tmp_path_factory.mktemp("containers")
    for name in ("cluster", "other"):
        result = _make_certs(root / f"certs-{name}")
        assert result.returncode == 0, result.stderr
    secrets = {"cluster": _secret_dir(root / "certs-cluster", root / "secret-cluster"),
               # another CA's certificate beside the cluster's CA: trusts the scheduler,
               # is not trusted by it
               "other": _secret_dir(root / "certs-other", root / "secret-other",
                                    ca=root / "certs-cluster"),
               "ca-only": _secret_dir(root / "certs-cluster", root / "secret-ca-only",
                                      names=("ca.crt",))}
    data = root / "data"
    data.mkdir()
    data.chmod(0o777)  # the pods' uid writes models there
    s3_env = _s3_env(s3_endpoint)

    scheduler_args = only_container(SCHEDULER_POD)["args"]
    port = int(option(scheduler_args, "--port"))
    dashboard = int(option(scheduler_args, "--dashboard-address").rsplit(":", 1)[1])
    manifest_ports = _port_is_free(port) and _port_is_free(dashboard)
    if not manifest_ports:  # another cluster on this machine: the same, on free ports
        port, dashboard = _free_port(), _free_port()
    manifest_address = f"tls://{SCHEDULER_HOST}:{option(scheduler_args, '--port')}"
    address = f"tls://{SCHEDULER_HOST}:{port}"

    containers = Containers(image)
    try:
        name = containers.name("scheduler")
        options, env = pod_options(SCHEDULER_POD, name, secret_dir=secrets["cluster"])
        args = [expand_variables(arg, env) for arg in scheduler_args]
        args[args.index("--port") + 1] = str(port)
        args[args.index("--dashboard-address") + 1] = f"127.0.0.1:{dashboard}"
        scheduler = containers.run(name, options, args + ["--host", "127.0.0.1"])
        probe = only_container(SCHEDULER_POD)["readinessProbe"]["httpGet"]["path"]
        _wait_until(lambda: _http_json(f"http://127.0.0.1:{dashboard}{probe}")[0] == 200,
                    "the scheduler's readiness probe", containers, [scheduler])

        workers, worker_dashboards = [], []
        worker = only_container(WORKER_POD)
        for i in range(WORKER_POD_REPLICAS):
            name = containers.name(f"worker-{i}")
            options, env = pod_options(WORKER_POD, name, secret_dir=secrets["cluster"],
                                       s3_env=s3_env, mounts={data: DATA_MOUNT})
            worker_dashboards.append(_free_port())
            args = [expand_variables(arg, env) for arg in worker["args"]]
            args = [address if arg == manifest_address else arg for arg in args]
            args[args.index("--dashboard-address") + 1] = f"127.0.0.1:{worker_dashboards[-1]}"
            workers.append(containers.run(name, options, args + ["--host", "127.0.0.1"]))

        def all_workers_joined():
            status, body = _http_json(f"http://127.0.0.1:{dashboard}/json/counts.json")
            return status == 200 and json.loads(body)["workers"] == len(workers)

        _wait_until(all_workers_joined, "the workers to join", containers,
                    [scheduler, *workers])
        yield {"containers": containers, "scheduler": scheduler, "workers": workers,
               "address": address, "manifest_address": manifest_address,
               "host_address": f"tls://127.0.0.1:{port}", "port": port,
               "dashboard": dashboard, "manifest_ports": manifest_ports,
               "worker_dashboards": worker_dashboards,
               "secrets": secrets, "certs": root / "certs-cluster", "data": data,
               "s3_env": s3_env, "s3_endpoint": s3_endpoint,
               "threads": len(workers) * int(option(worker["args"], "--nthreads"))}
    finally:
        containers.remove_all()


def _job_args(cluster: dict, replacements: dict[str, str]) -> list[str]:
    """The fit Job's command line, with the given URLs replaced and the scheduler's port."""
    args = only_container(JOB_POD)["args"]
    replacements = {cluster["manifest_address"]: cluster["address"], **replacements}
    return [replacements.get(arg, arg) for arg in args]


def _run_job(cluster: dict, role: str, args: list[str], s3: bool = False) -> tuple[int, str]:
    containers = cluster["containers"]
    name = containers.name(role)
    options, _ = pod_options(JOB_POD, name, secret_dir=cluster["secrets"]["cluster"],
                             s3_env=cluster["s3_env"] if s3 else None,
                             mounts={cluster["data"]: DATA_MOUNT})
    return containers.run_to_end(name, options, args)


def _small_data() -> da.Array:
    # Few rows keep the job's m x m problem small: m = min(--n-landmarks, rows).
    return da.random.default_rng(0).standard_normal((400, 5), chunks=(100, 5))


def _local_fit(model, X: da.Array):
    """The same fit on this process's threads (docs/design.md §5: the cluster changes nothing)."""
    with dask.config.set(scheduler="threads"):
        return kpca_dask.KernelPCA(**model.get_params()).fit(X)


# -- the image ---------------------------------------------------------------------------


def test_image_version_matches_the_package(image):
    """`kpca-dask --version` in the image is the version of this package."""
    result = docker("run", "--rm", "--network", "host", image, "kpca-dask", "--version")
    assert result.stdout.strip() == f"kpca-dask {kpca_dask.__version__}"


#: Run in a worker's container: every built-in kernel in both dtypes, then how many of the
#: compiled epilogue's signatures numba loaded from its cache and how many it had to compile.
_COMPILE_PROBE = """
import json, numba, numpy as np, warnings
from kpca_dask import KernelPCA
from kpca_dask.blocks import epilogue
warnings.simplefilter("ignore")
X = np.random.default_rng(0).normal(size=(500, 4))
for dtype in ("float64", "float32"):
    for kernel in ("rbf", "laplacian", "matern", "polynomial", "sigmoid", "cosine", "linear"):
        KernelPCA(n_components=2, kernel=kernel, n_landmarks=20, landmarks="uniform",
                  dtype=dtype, random_state=0).fit_transform(X)
stats = {name: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
         for name, f in vars(epilogue).items()
         if isinstance(f, numba.core.dispatcher.Dispatcher) and f.signatures}
print("STATS" + json.dumps(stats))
"""


def test_worker_container_starts_warm(cluster):
    """A worker's container (read-only root, /tmp an emptyDir) runs every built-in kernel
    in float64 and float32 with the epilogue compiled when the image was built: numba
    loads every signature from its cache and compiles none."""
    containers = cluster["containers"]
    options, _ = pod_options(WORKER_POD, containers.name("compile-probe"),
                             secret_dir=cluster["secrets"]["cluster"])
    code, output = containers.run_to_end(containers.name("compile-probe"), options,
                                         ["python", "-c", _COMPILE_PROBE], timeout=300)
    assert code == 0, output
    stats = json.loads(output.split("STATS", 1)[1].splitlines()[0])
    assert stats, output
    compiled = {name: misses for name, (hits, misses) in stats.items() if misses}
    assert not compiled, f"compiled at run time: {compiled} (all: {stats})"
    assert all(hits >= 2 for hits, _ in stats.values()), stats  # float32 and float64


# -- the cluster -------------------------------------------------------------------------


def _processes(cluster: dict, container: str) -> dict:
    """PID 1's command line and the uid/gid of every process in a running container."""
    script = ("import json, os\n"
              "procs = {}\n"
              "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
              "    try:\n"
              "        status = open(f'/proc/{pid}/status').read().splitlines()\n"
              "        cmd = open(f'/proc/{pid}/cmdline').read().split(chr(0))[:-1]\n"
              "    except OSError:\n"
              "        continue\n"
              "    ids = {l.split(':')[0]: l.split()[1:] for l in status"
              " if l.startswith(('Uid', 'Gid'))}\n"
              "    procs[pid] = {'cmd': cmd, **ids}\n"
              "print(json.dumps(procs))\n")
    result = docker("exec", container, "python", "-c", script)
    return json.loads(result.stdout)


def test_processes_run_as_uid_1000_under_tini(cluster):
    """In the scheduler and worker containers, PID 1 is tini running the pod's command and
    every process runs as 1000."""
    pod_security = SCHEDULER_POD["securityContext"]
    for container in [cluster["scheduler"], *cluster["workers"]]:
        processes = _processes(cluster, container)
        init = processes["1"]["cmd"]
        assert init[:2] == ["/usr/bin/tini", "--"], init
        # The image's entrypoint: a shell that puts numba's cache where numba can load it,
        # then execs the pod's command.
        command = init[init.index("sh", 3) + 1:] if init[2] == "/bin/sh" else init[2:]
        assert command[0] == "dask", init
        for pid, process in processes.items():
            assert set(process["Uid"]) == {str(pod_security["runAsUser"])}, (pid, process)
            assert set(process["Gid"]) == {str(pod_security["runAsGroup"])}, (pid, process)
        # the scheduler, or a worker's nanny and the worker it starts, beside tini
        assert len([p for p in processes.values() if p["cmd"][:1] != ["/usr/bin/tini"]]) >= 2


def test_dashboard_and_health_answer(cluster):
    """The scheduler's dashboard answers on its port; so do the health probes of all."""
    if cluster["manifest_ports"]:
        dashboard = option(only_container(SCHEDULER_POD)["args"], "--dashboard-address")
        assert cluster["dashboard"] == int(dashboard.rsplit(":", 1)[1]) == 8787
    status, body = _http_json(f"http://127.0.0.1:{cluster['dashboard']}/status")
    assert status == 200 and b"bokeh" in body.lower()
    status, body = _http_json(f"http://127.0.0.1:{cluster['dashboard']}/health")
    assert (status, body) == (200, b"ok")
    probe = only_container(WORKER_POD)["readinessProbe"]["httpGet"]["path"]
    for port in cluster["worker_dashboards"]:
        assert _http_json(f"http://127.0.0.1:{port}{probe}") == (200, b"ok")
    status, body = _http_json(f"http://127.0.0.1:{cluster['dashboard']}/json/identity.json")
    workers = json.loads(body)["workers"]
    assert all(address.startswith("tls://127.0.0.1:") for address in workers), workers


def test_fit_job_on_a_mounted_volume_equals_a_local_fit(cluster):
    """The Job's `kpca-dask fit`, data and model on a volume: the model of a local fit."""
    data = cluster["data"]
    _small_data().to_zarr(str(data / "input.zarr"))
    args = _job_args(cluster, {"s3://kpca-dask-data/input.zarr": f"{DATA_MOUNT}/input.zarr",
                               "s3://kpca-dask-data/model.zarr": f"{DATA_MOUNT}/model.zarr"})
    code, output = _run_job(cluster, "job-volume", args)
    assert code == 0, output
    threads, address = cluster["threads"], cluster["address"]
    assert f"{WORKER_POD_REPLICAS} worker(s), {threads} thread(s) at {address}" in output, output

    model = kpca_dask.load(str(data / "model.zarr"))
    assert model.n_components_ == int(option(args, "--n-components"))
    assert model.kernel_ == option(args, "--kernel")
    reference = _local_fit(model, da.from_zarr(str(data / "input.zarr")))
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10)


def test_fit_job_through_s3_equals_a_local_fit(cluster):
    """The Job's own s3:// URLs, on a loopback S3 server given by the Secret's variables."""
    options = {"key": CREDENTIALS["AWS_ACCESS_KEY_ID"],
               "secret": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
               "client_kwargs": {"endpoint_url": cluster["s3_endpoint"]}}
    args = _job_args(cluster, {})
    data_url, model_url = args[2], option(args, "--model")
    s3fs.S3FileSystem.clear_instance_cache()
    s3fs.S3FileSystem(**options).mkdir(data_url.removeprefix("s3://").split("/", 1)[0])
    write_array(_small_data(), data_url, storage_options=options)

    code, output = _run_job(cluster, "job-s3", args, s3=True)
    assert code == 0, output
    model = kpca_dask.load(model_url, storage_options=options)
    assert model.n_components_ == int(option(args, "--n-components"))
    reference = _local_fit(model, _small_data())
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10)


# A client container that tries to use the cluster (PROBE of test_tls_cluster.py).


def _probe_container(cluster: dict, role: str, secret: str, request: dict) -> dict:
    """Runs PROBE in a container of the image with the ``secret`` directory at the mount."""
    containers = cluster["containers"]
    name = containers.name(role)
    options = ["--network", "host", "--add-host", f"{SCHEDULER_HOST}:127.0.0.1",
               "--volume", f"{cluster['secrets'][secret]}:{TLS_MOUNT}:ro",
               "--user", "1000:1000", "--group-add", "1000"]
    code, output = containers.run_to_end(name, options,
                                         ["python", "-c", PROBE, json.dumps(request)],
                                         timeout=120)
    assert code == 0, output
    return json.loads(output.strip().splitlines()[-1])


def _container_security(secret_mount: str = TLS_MOUNT) -> dict:
    return {"tls_ca_file": f"{secret_mount}/ca.crt",
            "tls_client_cert": f"{secret_mount}/tls.crt",
            "tls_client_key": f"{secret_mount}/tls.key", "require_encryption": True}


def test_client_container_with_the_certificate_connects(cluster):
    """Control: a container with the cluster's certificate uses the cluster."""
    seen = _probe_container(cluster, "probe-cluster", "cluster",
                            {"kind": "dask", "address": cluster["address"],
                             "security": _container_security()})
    assert seen == {"connected": True, "workers": WORKER_POD_REPLICAS}, seen


def test_client_container_without_certificate_is_refused(cluster):
    """A container with the cluster's CA but no certificate of its own is refused."""
    raw = _probe_container(cluster, "probe-no-cert", "ca-only",
                           {"kind": "raw", "address": cluster["address"],
                            "ca_file": f"{TLS_MOUNT}/ca.crt"})
    assert _refused_by_server(raw, "certificate required"), raw
    plain = _probe_container(cluster, "probe-no-tls", "ca-only",
                             {"kind": "dask", "address": cluster["address"], "security": {}})
    assert plain["connected"] is False and "TLS" in plain["error"], plain


def test_client_container_with_another_ca_is_refused(cluster):
    """A certificate of another CA is refused, even to a client that trusts the scheduler."""
    seen = _probe_container(cluster, "probe-other-ca", "other",
                            {"kind": "dask", "address": cluster["address"],
                             "security": _container_security()})
    # The client trusts the scheduler, so an "unknown ca" alert or a closed connection is
    # the scheduler's refusal.
    assert _refused_by_server(seen, "unknown ca"), seen


# -- a worker container killed in the middle of a fit -----------------------------------------


def _large_data() -> da.Array:
    """32 row blocks (as in test_worker_loss.py): a fit long enough to be interrupted."""
    return da.random.default_rng(0).standard_normal((160_000, 8), chunks=(5_000, 8))


# The watching client runs this environment's dask, which may differ from the image's.
@pytest.mark.faults
@pytest.mark.filterwarnings("ignore::distributed.versions.VersionMismatchWarning")
def test_worker_container_killed_mid_fit_gives_the_same_model(cluster):
    """`docker kill` of a worker holding block results mid-fit: the undisturbed model."""
    from distributed import Client
    from distributed.security import Security

    data, containers = cluster["data"], cluster["containers"]
    _large_data().to_zarr(str(data / "large.zarr"))
    args = _job_args(cluster, {"s3://kpca-dask-data/input.zarr": f"{DATA_MOUNT}/large.zarr",
                               "s3://kpca-dask-data/model.zarr": f"{DATA_MOUNT}/killed.zarr"})
    job = containers.name("job-kill")
    options, _ = pod_options(JOB_POD, job, secret_dir=cluster["secrets"]["cluster"],
                             mounts={data: DATA_MOUNT})
    certs = cluster["certs"]
    security = Security(tls_ca_file=str(certs / "ca.crt"),
                        tls_client_cert=str(certs / "tls.crt"),
                        tls_client_key=str(certs / "tls.key"), require_encryption=True)
    with Client(cluster["host_address"], security=security, timeout="30s") as client:
        names = {address: info["name"]
                 for address, info in client.scheduler_info()["workers"].items()}
        containers.run(job, options, args)
        victim = None
        deadline = time.monotonic() + FIT_TIMEOUT_S
        while victim is None and time.monotonic() < deadline:
            assert containers.state(job)["Running"], containers.logs(job)
            for address, keys in client.has_what().items():
                if any(BLOCK_TASK in str(key) for key in keys):
                    victim = names[address]
                    break
            else:
                time.sleep(0.02)
        assert victim is not None, f"no worker held a {BLOCK_TASK} result"
        docker("kill", victim)
        killed_mid_fit = containers.state(job)["Running"]
        code = int(docker("wait", job, timeout=FIT_TIMEOUT_S).stdout.strip())
        output = containers.logs(job)
        assert code == 0, output
        assert killed_mid_fit, "the job had ended before the kill: nothing was tested"
        assert containers.state(victim)["ExitCode"] == 137  # SIGKILL, as the OOM killer

        # As the Deployment would replace the pod: the same container starts again.
        docker("start", victim)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while len(client.scheduler_info()["workers"]) < WORKER_POD_REPLICAS:
            assert time.monotonic() < deadline, containers.logs(victim)
            time.sleep(0.5)

    model = kpca_dask.load(str(data / "killed.zarr"))
    reference = _local_fit(model, da.from_zarr(str(data / "large.zarr")))
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-10)


# -- stopping ----------------------------------------------------------------------------


def test_docker_stop_ends_the_scheduler_within_its_grace_period(cluster):
    """SIGTERM through tini: the scheduler closes and exits 0 before SIGKILL would come."""
    containers, scheduler = cluster["containers"], cluster["scheduler"]
    grace = SCHEDULER_POD.get("terminationGracePeriodSeconds", 30)
    start = time.monotonic()
    docker("stop", "--time", str(grace), scheduler, timeout=grace + 30)
    elapsed = time.monotonic() - start
    state = containers.state(scheduler)
    output = containers.logs(scheduler)
    assert state["ExitCode"] == 0 and not state["OOMKilled"], (state, output)
    assert elapsed < grace, f"{elapsed:.1f} s: the scheduler waited for SIGKILL\n{output}"
    assert "End scheduler" in output, output

