"""Reading deploy/: the manifests, their pods and the settings the tests run them with.

Shared by the offline checks of the manifests and by the tests that run the pods'
commands as local processes, so that both look at the same lines of the same files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUSTOMIZE = DEPLOY / "kustomize"
OPERATOR = DEPLOY / "operator"
CRDS = DEPLOY / "crds"

#: Where every pod mounts the kpca-dask-tls Secret.
TLS_MOUNT = "/etc/dask-tls"
TLS_SECRET = "kpca-dask-tls"
TLS_ENV_CONFIGMAP = "kpca-dask-tls-env"
SCHEDULER_PORT = 8786

# The C loader parses the operator's 900 kB of CRDs in a fraction of the time.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def manifest_files() -> list[Path]:
    """Every Kubernetes YAML file of deploy/ except the vendored CRDs."""
    return sorted(p for p in DEPLOY.rglob("*.yaml") if CRDS not in p.parents)


def load_documents(path: Path) -> list[dict]:
    """The non-empty YAML documents of a file."""
    with open(path) as file:
        return [doc for doc in yaml.load_all(file, Loader=_LOADER) if doc is not None]


def load_one(path: Path) -> dict:
    (doc,) = load_documents(path)
    return doc


def tls_env() -> dict[str, str]:
    """The DASK_DISTRIBUTED__COMM__* variables every pod receives (the ConfigMap's data)."""
    doc = load_one(KUSTOMIZE / "tls-env.yaml")
    assert doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == TLS_ENV_CONFIGMAP
    return dict(doc["data"])


def pod_specs() -> Iterator[tuple[str, str, dict]]:
    """(where, role, pod spec) for every pod either route starts; role is scheduler/worker/job."""
    for name, role in [("scheduler-deployment.yaml", "scheduler"),
                       ("worker-deployment.yaml", "worker"),
                       ("fit-job.yaml", "job")]:
        yield f"kustomize/{name}", role, load_one(KUSTOMIZE / name)["spec"]["template"]["spec"]
    cluster = load_one(OPERATOR / "daskcluster.yaml")
    yield from _operator_cluster_pods("operator/daskcluster.yaml", cluster["spec"])
    job = load_one(OPERATOR / "daskjob.yaml")
    yield "operator/daskjob.yaml job", "job", job["spec"]["job"]["spec"]
    yield from _operator_cluster_pods("operator/daskjob.yaml", job["spec"]["cluster"]["spec"])


def _operator_cluster_pods(where: str, spec: dict) -> Iterator[tuple[str, str, dict]]:
    yield f"{where} scheduler", "scheduler", spec["scheduler"]["spec"]
    yield f"{where} worker", "worker", spec["worker"]["spec"]


def only_container(pod_spec: dict) -> dict:
    (container,) = pod_spec["containers"]
    return container


def container_env(container: dict) -> dict[str, str]:
    """The literal env values of a container (valueFrom entries left out)."""
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def scheduler_address(container: dict) -> str | None:
    """The scheduler a dask process connects to: a tls:// argument, else DASK_SCHEDULER_ADDRESS."""
    for arg in container["args"]:
        if re.match(r"^[a-z]+://", arg) and not arg.startswith("s3://"):
            return arg
    return container_env(container).get("DASK_SCHEDULER_ADDRESS")


def option(args: list[str], name: str) -> str:
    """The value following ``name`` in an argument list."""
    return args[args.index(name) + 1]


_K8S_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
                 "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}


def kubernetes_bytes(quantity: str) -> int:
    """Bytes of a Kubernetes memory quantity such as ``6Gi`` or ``500M``."""
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T|)", str(quantity))
    assert match, f"unsupported memory quantity {quantity!r}"
    return int(match[1]) * _K8S_SUFFIXES[match[2]]


def image_reference() -> str:
    """The image the plain manifests run (kustomization.yaml ``images:``), as name:tag."""
    images = load_one(KUSTOMIZE / "kustomization.yaml")["images"]
    (entry,) = [image for image in images if image["name"] == "kpca-dask"]
    return f"{entry.get('newName', entry['name'])}:{entry['newTag']}"


def pod_environment(pod_spec: dict, pod_name: str,
                    config_maps: dict[str, dict[str, str]],
                    secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The environment Kubernetes gives the pod's container: envFrom, then env.

    ``config_maps`` and ``secrets`` hold the data of the objects by name; an optional
    secretRef that is not given is left out, as Kubernetes does. Of ``valueFrom`` only
    ``fieldRef: metadata.name`` (the pod's name) is supported.
    """
    container = only_container(pod_spec)
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(config_maps[source["configMapRef"]["name"]])
        else:
            ref = source["secretRef"]
            if ref["name"] in secrets:
                env.update(secrets[ref["name"]])
            else:
                assert ref.get("optional"), f"secret {ref['name']} is not optional"
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = expand_variables(entry["value"], env)
        else:
            assert entry["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}, entry
            env[entry["name"]] = pod_name
    return env


def expand_variables(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(NAME)`` references in args and env values; unknown ones stay."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), text)
