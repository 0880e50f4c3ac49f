#!/bin/sh
# A Debian bookworm base image made from Debian's packages with debootstrap, for building
# deploy/Dockerfile where no image registry is reachable:
#
#   deploy/build-base.sh [TAG] [CACHE_DIR]     (as root; default kpca-dask-base:bookworm)
#
# The root file system is kept as CACHE_DIR/bookworm-base.tar (default .cache/deploy) and
# imported again when the engine lacks the image. The Debian mirror is the one apt uses on
# this host (/etc/apt/sources.list*), or $DEBIAN_MIRROR.
set -eu

tag=${1:-kpca-dask-base:bookworm}
cache=${2:-.cache/deploy}
suite=bookworm
tarball=$cache/$suite-base.tar

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base image $tag: present"
    exit 0
fi

debian_mirror() {
    # deb822 sources: the URIs of a stanza whose Suites name the suite itself.
    for file in /etc/apt/sources.list.d/*.sources; do
        [ -f "$file" ] || continue
        awk -v suite="$suite" 'BEGIN { RS = "" }
            { uri = ""; match_suite = 0
              n = split($0, lines, "\n")
              for (i = 1; i <= n; i++) {
                  if (lines[i] ~ /^URIs:/) { split(lines[i], f, /[ \t]+/); uri = f[2] }
                  if (lines[i] ~ /^Suites:/) {
                      m = split(lines[i], s, /[ \t]+/)
                      for (j = 2; j <= m; j++) if (s[j] == suite) match_suite = 1
                  }
              }
              if (uri != "" && match_suite) { print uri; exit } }' "$file"
    done
    # one-line sources: deb [options] URI suite components
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$file" ] || continue
        awk -v suite="$suite" '$1 == "deb" {
            for (i = 2; i < NF; i++) if ($i ~ /^[a-z+]+:\/\// && $(i + 1) == suite) { print $i; exit } }' "$file"
    done
}

remove_rootfs() {
    # debootstrap mounts /proc and /sys in the root while it configures packages; a
    # failed run can leave them there
    for dir in proc sys; do
        if mountpoint -q "$rootfs/$dir"; then umount "$rootfs/$dir" || true; fi
    done
    rm -rf --one-file-system "$rootfs"
}

if [ ! -f "$tarball" ]; then
    mirror=${DEBIAN_MIRROR:-$(debian_mirror | head -n 1)}
    if [ -z "$mirror" ]; then
        echo "no Debian $suite mirror in /etc/apt/sources.list*: set DEBIAN_MIRROR" >&2
        exit 1
    fi
    mkdir -p "$cache"
    rootfs=$(mktemp -d "$cache/rootfs.XXXXXX")
    trap remove_rootfs EXIT
    echo "debootstrap $suite from $mirror"
    # python3 is 3.11 in bookworm; python3-venv brings ensurepip for the image's venv.
    debootstrap --variant=minbase --include=python3,python3-venv,tini,ca-certificates \
        "$suite" "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
        tail -n 20 "$cache/debootstrap.log" >&2
        exit 1
    }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" --numeric-owner -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
fi

docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    "$tarball" "$tag" >/dev/null
echo "base image $tag: imported from $tarball"
