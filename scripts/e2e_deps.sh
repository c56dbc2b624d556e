#!/usr/bin/env bash
# Debian packages the end-to-end tier needs: MariaDB (Katib's MySQL backend), openssl, iproute2
# (podnet brings up loopback in a network namespace, the real node its bridge), util-linux's unshare,
# and the real node's runtime (below). Installs what is missing.
set -euo pipefail
missing=()
command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]] || missing+=(mariadb-server mariadb-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v ip >/dev/null 2>&1 || [[ -x /usr/sbin/ip ]] || missing+=(iproute2)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
# the real node (tests/node): containerd's CRI with runc, CNI's plugins, kube-proxy's iptables and
# conntrack; podman holds the images `make images` built, copied into containerd from it
command -v containerd >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || [[ -x /usr/sbin/runc ]] || missing+=(runc)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
command -v conntrack >/dev/null 2>&1 || [[ -x /usr/sbin/conntrack ]] || missing+=(conntrack)
command -v iptables >/dev/null 2>&1 || [[ -x /usr/sbin/iptables ]] || missing+=(iptables)
command -v podman >/dev/null 2>&1 || missing+=(podman)
if ((${#missing[@]})); then
  echo "e2e-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v go >/dev/null 2>&1 || { echo "e2e-deps: no Go toolchain on PATH (needed to build Katib)" >&2; exit 1; }
