#!/bin/bash
# `make test-deploy`: the image built as on an air-gapped host, and a TLS cluster of
# containers run as the pods are (tests/deploy/test_deploy_containers.py). From a fresh machine:
#
#  1. installs docker.io and debootstrap from Debian's packages when missing (root);
#  2. starts dockerd when none runs, with no default bridge and no iptables rules
#     (every container uses the host's network, on 127.0.0.1), and stops it at the end;
#  3. makes a Debian bookworm base with debootstrap (deploy/build-base.sh, cached);
#  4. fills deploy/wheelhouse/ with wheels of the dependencies (cached per pyproject.toml);
#  5. builds deploy/Dockerfile on that base from those wheels, with --network host;
#  6. runs the container tests, which fail rather than skip if anything is missing.
#
# Environment: PYTHON (the interpreter with the test dependencies, default python3),
# KPCA_DASK_IMAGE (default kpca-dask:<version>), KPCA_DASK_DEPLOY_CACHE (.cache/deploy),
# DEBIAN_MIRROR (default: the mirror apt uses here).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
CACHE=${KPCA_DASK_DEPLOY_CACHE:-.cache/deploy}
BASE=kpca-dask-base:bookworm
WHEELHOUSE=deploy/wheelhouse
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
IMAGE=${KPCA_DASK_IMAGE:-kpca-dask:$VERSION}
mkdir -p "$CACHE"

step_start=$SECONDS
step() {
    [ "$step_start" = "$SECONDS" ] || printf '   (%d s)\n' $((SECONDS - step_start))
    step_start=$SECONDS
    printf '\n== %s\n' "$*"
}

# -- 1. packages ------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if ((${#missing[@]})); then
    step "installing ${missing[*]} from Debian's packages"
    if [ "$(id -u)" != 0 ]; then
        echo "needs root: apt-get install ${missing[*]}" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# -- 2. the Docker engine ---------------------------------------------------------------
dockerd_pid=
stop_dockerd() {
    [ -n "$dockerd_pid" ] || return 0
    kill "$dockerd_pid" 2>/dev/null || true
    for _ in $(seq 60); do
        kill -0 "$dockerd_pid" 2>/dev/null || break
        sleep 0.5
    done
    echo "stopped the dockerd this run started (pid $dockerd_pid)"
    dockerd_pid=
}
trap stop_dockerd EXIT

start_dockerd() {  # $1: storage driver
    dockerd --bridge=none --iptables=false --storage-driver="$1" \
        --pidfile "$CACHE/dockerd.pid" >"$CACHE/dockerd.log" 2>&1 &
    dockerd_pid=$!
    for _ in $(seq 60); do
        if ! kill -0 "$dockerd_pid" 2>/dev/null; then
            dockerd_pid=
            return 1
        fi
        docker info >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    stop_dockerd
    return 1
}

# A container must start on the base: overlay2 can start yet fail there (nested overlays).
base_runs() { docker run --rm --network host "$BASE" true >/dev/null 2>&1; }

step "docker engine"
if docker info >/dev/null 2>&1; then
    echo "using the running engine ($(docker info --format '{{.ServerVersion}}, {{.Driver}}'))"
    driver=
else
    driver=overlay2
    start_dockerd overlay2 || { driver=vfs; start_dockerd vfs; } || {
        tail -n 20 "$CACHE/dockerd.log" >&2
        exit 1
    }
    echo "started dockerd (pid $dockerd_pid, $(docker info --format '{{.Driver}}'))"
fi

# -- 3. the base --------------------------------------------------------------------------
step "base image $BASE"
deploy/build-base.sh "$BASE" "$CACHE"
if ! base_runs; then
    if [ -n "$dockerd_pid" ] && [ "$driver" = overlay2 ]; then
        echo "no container starts with overlay2 here: restarting dockerd with vfs"
        stop_dockerd
        start_dockerd vfs || { tail -n 20 "$CACHE/dockerd.log" >&2; exit 1; }
        deploy/build-base.sh "$BASE" "$CACHE"
    fi
    base_runs || { docker run --rm --network host "$BASE" true; exit 1; }
fi
host_python=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
base_python=$(docker run --rm --network host "$BASE" \
    python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$host_python" != "$base_python" ]; then
    echo "the wheels are built with Python $host_python, the image has $base_python:" \
         "set PYTHON to a python$base_python with the test dependencies" >&2
    exit 1
fi

# -- 4. the wheelhouse ------------------------------------------------------------------
step "wheelhouse $WHEELHOUSE"
stamp=$WHEELHOUSE/.complete
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
    find "$WHEELHOUSE" -name '*.whl' -delete
    "$PYTHON" -m pip wheel --disable-pip-version-check --wheel-dir "$WHEELHOUSE" \
        --constraint constraints.txt '.[cloud]' setuptools wheel >"$CACHE/wheelhouse.log" 2>&1 || {
        tail -n 40 "$CACHE/wheelhouse.log" >&2
        exit 1
    }
    rm -f "$WHEELHOUSE"/kpca_dask-*.whl  # the image builds the package from the source
    touch "$stamp"
fi
echo "$(find "$WHEELHOUSE" -name '*.whl' | wc -l) wheels, $(du -sh "$WHEELHOUSE" | cut -f1)"

# -- 5. the image -----------------------------------------------------------------------
step "image $IMAGE"
start=$(date +%s)
docker build --network host -f deploy/Dockerfile --build-arg PYTHON_IMAGE="$BASE" \
    -t "$IMAGE" . >"$CACHE/build.log" 2>&1 || { tail -n 40 "$CACHE/build.log" >&2; exit 1; }
seconds=$(($(date +%s) - start))
size=$(docker image inspect --format '{{.Size}}' "$IMAGE")
base_size=$(docker image inspect --format '{{.Size}}' "$BASE")
echo "built in ${seconds} s (log: $CACHE/build.log);" \
     "$((size / 1000000)) MB, of which the base $((base_size / 1000000)) MB"

# A worker starts warm: under a read-only root with a writable /tmp, as in the pods, the
# kernel epilogue loads from the cache compiled at build time and compiles nothing.
docker run --rm --network host --read-only --tmpfs /tmp "$IMAGE" python -c '
from kpca_dask.blocks import epilogue
epilogue.compile_all()
misses = sum(epilogue._finish.stats.cache_misses.values())
assert misses == 0, f"the kernel epilogue compiled at run time ({misses} signatures)"
print("kernel epilogue loaded from the image cache, nothing compiled")' || exit 1

# -- 6. the cluster in containers -------------------------------------------------------
step "tests/deploy/test_deploy_containers.py"
KPCA_DASK_REQUIRE_DOCKER=1 KPCA_DASK_IMAGE="$IMAGE" \
    "$PYTHON" -m pytest -p no:cacheprovider -v \
    tests/deploy/test_deploy_containers.py tests/deploy/test_deploy_manifests.py::test_dockerfile_passes_hadolint
echo "total $SECONDS s"
