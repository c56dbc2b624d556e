#!/usr/bin/env bash
# `make images`: build every image under images/ and the cluster example's trial image from the
# committed Dockerfiles, with podman (or docker where the machine has only a running Docker engine),
# then print each image's size.
#
#   scripts/images.sh [build] [NAME...]   build (default: all of $IMAGES), then print the sizes table
#   scripts/images.sh sizes [NAME...]     print the sizes table of images already built
#   scripts/images.sh base                make the local Debian base only (IMAGES_BASE=local)
#
# Names: collector, suggestion, earlystopping (images/NAME/Dockerfile, context = repository root) and
# example-custom-loop (examples/cluster/custom-loop/Dockerfile, context = that folder).
# Tags: [${IMAGE_REGISTRY}/]katib-progress/NAME:${IMAGE_TAG}, the names manifests/default, katib-config
# merge and the examples use (a registry of your own in front: IMAGE_REGISTRY=registry.example.com/team).
#
# Environment (make passes its variables of the same names):
#   IMAGE_REGISTRY     registry in front of katib-progress/NAME (default: none)
#   IMAGE_TAG          tag (default: the version in pyproject.toml)
#   IMAGES             the names to build (default: all four)
#   IMAGES_BASE        public (default): each Dockerfile's own BASE_IMAGE default, the public image a
#                      user pulls; local: a Debian bookworm base made here with mmdebstrap (python3,
#                      python3-venv, ca-certificates), for machines that reach no image registry
#                      (the e2e tier and CI). Made once and cached.
#   LOCAL_BASE_IMAGE   the local base's name (default localhost/katib-progress-base:bookworm)
#   DEBIAN_MIRROR      mmdebstrap's mirror (default http://deb.debian.org/debian)
#   CONTAINER_ENGINE   podman or docker (default: podman if installed, else a running docker)
#   IMAGES_CACHE       cache folder, outside the repository (default ~/.cache/katib-progress-images)
#
# podman runs with a containers.conf this script writes into IMAGES_CACHE and names through
# CONTAINERS_CONF (nothing under /etc is changed): default ulimits at the hard limits (a VM without
# CAP_SYS_RESOURCE cannot raise them, and podman's defaults are above them) and, where the cgroup
# hierarchy is v1 or hybrid, runc (crun refuses hybrid hierarchies) with the cgroupfs manager. Builds use the host network, and the host's CA
# bundle is mounted read-only over the build container's for pip's downloads (where outbound TLS is
# re-signed); a mount is not part of any layer, so the bundle does not end up in an image.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_IMAGES="collector suggestion earlystopping example-custom-loop"
VERSION=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
IMAGE_REGISTRY=${IMAGE_REGISTRY:-}
IMAGE_TAG=${IMAGE_TAG:-$VERSION}
IMAGES=${IMAGES:-$ALL_IMAGES}
IMAGES_BASE=${IMAGES_BASE:-public}
LOCAL_BASE_IMAGE=${LOCAL_BASE_IMAGE:-localhost/katib-progress-base:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
IMAGES_CACHE=${IMAGES_CACHE:-$HOME/.cache/katib-progress-images}
HOST_CA=/etc/ssl/certs/ca-certificates.crt

log() { echo "images: $*" >&2; }
die() { log "$*"; exit 1; }

apt_install() {
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 || die "missing: $* (install them: Debian packages)"
  log "installing $*"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

pick_engine() {
  ENGINE=${CONTAINER_ENGINE:-}
  if [[ -z $ENGINE ]]; then
    if command -v podman >/dev/null 2>&1; then
      ENGINE=podman
    elif command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
      ENGINE=docker
    else
      ENGINE=podman
    fi
  fi
  case $ENGINE in
    podman)
      local need=()
      command -v podman >/dev/null 2>&1 || need+=(podman)
      command -v buildah >/dev/null 2>&1 || need+=(buildah)
      cgroup_v2 || command -v runc >/dev/null 2>&1 || need+=(runc)
      [[ -d /usr/lib/cni ]] || need+=(containernetworking-plugins)
      command -v newuidmap >/dev/null 2>&1 || need+=(uidmap)
      command -v fuse-overlayfs >/dev/null 2>&1 || need+=(fuse-overlayfs)
      ((${#need[@]} == 0)) || apt_install "${need[@]}"
      podman_conf
      ;;
    docker) docker info >/dev/null 2>&1 || die "docker: no running Docker engine" ;;
    *) die "CONTAINER_ENGINE=$ENGINE: podman or docker" ;;
  esac
}

cgroup_v2() {
  [[ $(stat -fc %T /sys/fs/cgroup 2>/dev/null) == cgroup2fs ]]
}

podman_conf() {
  mkdir -p "$IMAGES_CACHE"
  local nofile nproc conf=$IMAGES_CACHE/containers.conf
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  # podman (containers/common) lowers its own nproc to kernel.pid_max, and runc may not raise a limit
  # past its parent's: a higher default is refused ("error setting rlimit type 6").
  local pid_max
  pid_max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)
  [[ $nproc == unlimited || $nproc -gt $pid_max ]] && nproc=$pid_max
  {
    echo "# Written by scripts/images.sh (katib-progress); used through CONTAINERS_CONF."
    echo "[containers]"
    local limits=()
    [[ $nofile == unlimited ]] || limits+=("\"nofile=$nofile:$nofile\"")
    [[ $nproc == unlimited ]] || limits+=("\"nproc=$nproc:$nproc\"")
    echo "default_ulimits = [$(IFS=,; echo "${limits[*]}")]"
    echo "[engine]"
    echo 'events_logger = "file"'
    if ! cgroup_v2; then
      echo 'runtime = "runc"'
      echo 'cgroup_manager = "cgroupfs"'
    fi
  } >"$conf.tmp"
  mv "$conf.tmp" "$conf"
  export CONTAINERS_CONF=$conf
}

image_exists() {
  "$ENGINE" image inspect "$1" >/dev/null 2>&1
}

local_base() {
  image_exists "$LOCAL_BASE_IMAGE" && return 0
  mkdir -p "$IMAGES_CACHE"
  local tar=$IMAGES_CACHE/base-bookworm.tar started=$SECONDS
  if [[ ! -s $tar ]]; then
    command -v mmdebstrap >/dev/null 2>&1 || apt_install mmdebstrap
    log "making the local Debian bookworm base with mmdebstrap"
    # minbase + python3, python3-venv (venv and ensurepip's wheels), ca-certificates; merged /usr
    # through the hook (not the usrmerge package, which pulls in perl); no docs, man pages, locales.
    nice mmdebstrap --quiet --variant=minbase --format=tar \
      --include=python3,python3-venv,ca-certificates \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
      --aptopt='Acquire::Check-Valid-Until "false"' \
      bookworm "$tar.tmp" "$DEBIAN_MIRROR" >"$IMAGES_CACHE/mmdebstrap.log" 2>&1 ||
      { tail -20 "$IMAGES_CACHE/mmdebstrap.log" >&2; rm -rf "$tar.tmp"; die "mmdebstrap failed"; }
    mv "$tar.tmp" "$tar"
  fi
  local quiet=()
  [[ $ENGINE == podman ]] && quiet=(--quiet)
  "$ENGINE" import "${quiet[@]}" --change 'ENV LANG=C.UTF-8' --change 'CMD ["/usr/bin/python3"]' \
    "$tar" "$LOCAL_BASE_IMAGE" >/dev/null
  log "local base $LOCAL_BASE_IMAGE ready ($((SECONDS - started)) s)"
}

ref() { echo "${IMAGE_REGISTRY:+$IMAGE_REGISTRY/}katib-progress/$1:$IMAGE_TAG"; }

build_one() {
  local name=$1 dockerfile context
  case $name in
    collector | suggestion | earlystopping) dockerfile=images/$name/Dockerfile context=. ;;
    example-custom-loop) dockerfile=examples/cluster/custom-loop/Dockerfile context=examples/cluster/custom-loop ;;
    *) die "unknown image $name (one of: $ALL_IMAGES)" ;;
  esac
  local args=(build --network=host -f "$dockerfile" -t "$(ref "$name")")
  [[ $IMAGES_BASE == local ]] && args+=(--build-arg "BASE_IMAGE=$LOCAL_BASE_IMAGE")
  if [[ $ENGINE == podman ]]; then
    # docker format keeps HEALTHCHECK (the OCI image config has no field for it)
    args+=(--format docker)
    [[ -s $HOST_CA ]] && args+=(-v "$HOST_CA:$HOST_CA:ro")
  fi
  local started=$SECONDS iid
  iid=$(mktemp)
  args+=(--iidfile "$iid")
  log "building $(ref "$name") from $dockerfile"
  if ! nice "$ENGINE" "${args[@]}" "$context"; then
    rm -f "$iid"
    [[ $IMAGES_BASE == public ]] && log "if the base image could not be pulled (no registry reachable), IMAGES_BASE=local builds on a local Debian base"
    die "building $(ref "$name") failed"
  fi
  # Tag the built image by its id as well: podman 4.3, finding every layer cached and the result already
  # held under another name with the same repository path (ghcr.io/katib-progress/collector, say),
  # resolves the short -t name to that image and adds no name of its own.
  "$ENGINE" tag "$(cat "$iid")" "$(ref "$name")"
  rm -f "$iid"
  log "built $(ref "$name") in $((SECONDS - started)) s"
}

sizes() {
  printf '%-20s %-60s %8s\n' image reference MB
  local name bytes
  for name in "$@"; do
    if bytes=$("$ENGINE" image inspect --format '{{.Size}}' "$(ref "$name")" 2>/dev/null); then
      printf '%-20s %-60s %8d\n' "$name" "$(ref "$name")" $(((bytes + 500000) / 1000000))
    else
      printf '%-20s %-60s %8s\n' "$name" "$(ref "$name")" missing
    fi
  done
}

cmd=build
case ${1:-} in build | sizes | base) cmd=$1; shift ;; esac
(($#)) && IMAGES="$*"
case $IMAGES_BASE in public | local) ;; *) die "IMAGES_BASE=$IMAGES_BASE: public or local" ;; esac
pick_engine
case $cmd in
  base) local_base ;;
  sizes) sizes $IMAGES ;;
  build)
    [[ $IMAGES_BASE == local ]] && local_base
    total=$SECONDS
    for name in $IMAGES; do build_one "$name"; done
    log "all built in $((SECONDS - total)) s"
    sizes $IMAGES
    ;;
esac
