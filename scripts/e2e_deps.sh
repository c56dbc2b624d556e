#!/usr/bin/env bash
# Debian packages the end-to-end tier needs: MariaDB (Katib's MySQL backend), openssl, iproute2
# (podnet brings up loopback in a network namespace), util-linux's unshare. Installs what is missing.
set -euo pipefail
missing=()
command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]] || missing+=(mariadb-server mariadb-client)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v ip >/dev/null 2>&1 || [[ -x /usr/sbin/ip ]] || missing+=(iproute2)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
if ((${#missing[@]})); then
  echo "e2e-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v go >/dev/null 2>&1 || { echo "e2e-deps: no Go toolchain on PATH (needed to build Katib)" >&2; exit 1; }
