#!/usr/bin/env bash
# Builds the upstream programs the end-to-end tier runs against, from the Go module proxy, into a cache
# OUTSIDE the repository keyed by version (a second run finds them and returns at once). Nothing upstream
# is copied into the repository: sources are read from the Go module cache at build time.
#
#   scripts/e2e_build.sh            build what is missing, print the cache's bin directory
#   KP_E2E_CACHE=/some/dir ...      another cache root (default ~/.cache/katib-progress-e2e)
#
# What it builds (versions below):
#   etcd             go.etcd.io/etcd/server/v3's etcdmain behind a 3-line main (the root module
#                    go.etcd.io/etcd/v3, which holds etcd's own main, is not served by the proxy)
#   kube-apiserver   k8s.io/kubernetes/cmd/kube-apiserver/app behind a 3-line main, in a wrapper module whose
#                    replace list pins every staging module (k8s.io/kubernetes's go.mod `=> ./staging/...`)
#                    to the published v0.<minor>.<patch> of the same release; generated from that go.mod
#   kube-controller-manager  the same way (the tier runs its garbage collector and namespace controller)
#   katib            katib-controller, katib-db-manager, goptuna suggestion (plain `go install`, no replaces)
#   node             the real node (tests/node): kubelet, kube-scheduler, kube-proxy and kubectl the same
#                    way as kube-apiserver (with the release's version in their ldflags), CoreDNS
#                    (plain `go install`)
#   ghz              (target `ghz` only) the gRPC load generator of benchmarks/bench_sink.py
#   trainer          Kubeflow Trainer's trainer-controller-manager (plain `go install`); its CRDs and the
#                    torch-distributed runtime are read from the trainer module, JobSet's CRD from
#                    sigs.k8s.io/jobset (`jobset-source`), both in the Go module cache
set -euo pipefail

ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
K8S_VERSION=${K8S_VERSION:-v1.34.4}
KATIB_VERSION=${KATIB_VERSION:-v0.19.0}
TRAINER_VERSION=${TRAINER_VERSION:-v2.3.0}
GHZ_VERSION=${GHZ_VERSION:-v0.93.0}
COREDNS_VERSION=${COREDNS_VERSION:-v1.12.4}  # its go.mod requires client-go v0.34, as K8S_VERSION
CACHE=${KP_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/katib-progress-e2e}
export GOFLAGS=${GOFLAGS:--buildvcs=false}
export CGO_ENABLED=0

log() { echo "e2e-build: $*" >&2; }

# build_wrapper NAME VERSION MODULE@VERSION MAIN_GO [REPLACES]
# A wrapper module in a temp dir (deleted afterwards) with one main.go; binary -> $CACHE/NAME-VERSION/NAME.
build_wrapper() {
  local name=$1 version=$2 require=$3 main_go=$4 replaces=${5:-}
  local out="$CACHE/$name-$version/$name"
  [[ -x $out ]] && return 0
  log "building $name $version (first run only)"
  local dir; dir=$(mktemp -d)
  mkdir -p "$(dirname "$out")"
  cat >"$dir/go.mod" <<GOMOD
module katib-progress.local/e2e/$name

go 1.24.0

require ${require/@/ }
$replaces
GOMOD
  printf '%s\n' "$main_go" >"$dir/main.go"
  (cd "$dir" && go mod tidy >&2 && go build -trimpath -ldflags="${LDFLAGS:--s}" -o "$out.tmp" . >&2)
  rm -rf "$dir"
  mv "$out.tmp" "$out"
}

build_etcd() {
  build_wrapper etcd "$ETCD_VERSION" "go.etcd.io/etcd/server/v3@$ETCD_VERSION" 'package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }'
}

# k8s.io/kubernetes's `replace ... => ./staging/...` lines turned into pins to the published modules
staging_replaces() {
  go mod download "k8s.io/kubernetes@$K8S_VERSION" >&2
  local gomod; gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  local staging="v0${K8S_VERSION#v1}"
  # every `k8s.io/x => ./staging/src/k8s.io/x` becomes `k8s.io/x => k8s.io/x v0.<minor>.<patch>`
  local replaces
  replaces=$(awk -v v="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\// {print "replace " $1 " => " $1 " " v}' "$gomod")
  [[ -n $replaces ]] || { log "no staging replaces found in $gomod"; return 1; }
  echo "$replaces"
}

build_apiserver() {
  [[ -x "$CACHE/kube-apiserver-$K8S_VERSION/kube-apiserver" ]] && return 0
  local replaces; replaces=$(staging_replaces)
  build_wrapper kube-apiserver "$K8S_VERSION" "k8s.io/kubernetes@$K8S_VERSION" 'package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }' "$replaces"
}

# kube-controller-manager: the tier runs only its garbage collector and namespace controller
build_controller_manager() {
  [[ -x "$CACHE/kube-controller-manager-$K8S_VERSION/kube-controller-manager" ]] && return 0
  local replaces; replaces=$(staging_replaces)
  build_wrapper kube-controller-manager "$K8S_VERSION" "k8s.io/kubernetes@$K8S_VERSION" 'package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }' "$replaces"
}

# The real node (kubelet, kube-scheduler, kube-proxy): the same wrapper module, with the release's
# version stamped in (without it every binary reports v0.0.0-master and the kubelet registers as such)
k8s_ldflags() {
  local v=$K8S_VERSION minor; minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local p=k8s.io/component-base/version
  echo "-s -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
}

build_k8s_component() {
  local name=$1 import=$2 constructor=$3 extra=${4:-}
  [[ -x "$CACHE/$name-$K8S_VERSION/$name" ]] && return 0
  local replaces; replaces=$(staging_replaces)
  LDFLAGS=$(k8s_ldflags) build_wrapper "$name" "$K8S_VERSION" "k8s.io/kubernetes@$K8S_VERSION" "package main

import (
	$extra\"os\"

	\"k8s.io/component-base/cli\"
	\"$import\"
)

func main() { os.Exit(cli.Run($constructor)) }" "$replaces"
}

build_node() {
  build_k8s_component kubelet k8s.io/kubernetes/cmd/kubelet/app "app.NewKubeletCommand(context.Background())" \
    '"context"
	'

  build_k8s_component kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler/app "app.NewSchedulerCommand()"
  build_k8s_component kube-proxy k8s.io/kubernetes/cmd/kube-proxy/app "app.NewProxyCommand()"
  # kubectl of the same release (the tier runs `kubectl apply -k` as docs/deploy.md says; a
  # machine's own kubectl may be outside the version-skew policy)
  build_k8s_component kubectl k8s.io/kubectl/pkg/cmd "cmd.NewDefaultKubectlCommand()"
  build_coredns
}

# CoreDNS, the cluster DNS of the real node (plain `go install`: its go.mod has no replace)
build_coredns() {
  local dir="$CACHE/coredns-$COREDNS_VERSION"
  [[ -x $dir/coredns ]] && return 0
  log "building coredns $COREDNS_VERSION (first run only)"
  mkdir -p "$dir"
  local tmp; tmp=$(mktemp -d)
  GOBIN=$tmp go install -trimpath -ldflags=-s "github.com/coredns/coredns@$COREDNS_VERSION" >&2
  mv "$tmp/coredns" "$dir/coredns"
  rm -rf "$tmp"
}

build_katib() {
  local dir="$CACHE/katib-$KATIB_VERSION"
  [[ -x $dir/katib-db-manager && -x $dir/katib-controller && -x $dir/goptuna-suggestion ]] && return 0
  log "building katib $KATIB_VERSION (first run only)"
  mkdir -p "$dir"
  local pkg
  for pkg in katib-controller:cmd/katib-controller/v1beta1 katib-db-manager:cmd/db-manager/v1beta1 \
    goptuna-suggestion:cmd/suggestion/goptuna/v1beta1; do
    [[ -x $dir/${pkg%%:*} ]] && continue
    local tmp; tmp=$(mktemp -d)
    GOBIN=$tmp go install -trimpath -ldflags=-s "github.com/kubeflow/katib/${pkg#*:}@$KATIB_VERSION" >&2
    mv "$tmp"/* "$dir/${pkg%%:*}"
    rm -rf "$tmp"
  done
}

build_trainer() {
  local dir="$CACHE/trainer-$TRAINER_VERSION"
  [[ -x $dir/trainer-controller-manager ]] && return 0
  log "building trainer-controller-manager $TRAINER_VERSION (first run only)"
  mkdir -p "$dir"
  local tmp; tmp=$(mktemp -d)
  GOBIN=$tmp go install -trimpath -ldflags=-s \
    "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager@$TRAINER_VERSION" >&2
  mv "$tmp/trainer-controller-manager" "$dir/trainer-controller-manager"
  rm -rf "$tmp"
}

# ghz, the gRPC load generator of benchmarks/bench_sink.py (not part of `all`: the e2e tier does not use it)
build_ghz() {
  local dir="$CACHE/ghz"
  [[ -x $dir/ghz ]] && return 0
  log "building ghz $GHZ_VERSION (first run only)"
  mkdir -p "$dir"
  GOBIN=$dir go install -trimpath -ldflags=-s "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION" >&2
}

katib_source() { go mod download -json "github.com/kubeflow/katib@$KATIB_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }
trainer_source() { go mod download -json "github.com/kubeflow/trainer/v2@$TRAINER_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'; }
# the JobSet version Trainer's go.mod requires (its CRD is what Trainer's controller was built against)
jobset_source() {
  local gomod; gomod=$(go mod download -json "github.com/kubeflow/trainer/v2@$TRAINER_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  local version; version=$(awk '$1 == "sigs.k8s.io/jobset" {print $2; exit}' "$gomod")
  go mod download -json "sigs.k8s.io/jobset@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'
}

main() {
  case "${1:-all}" in
    etcd) build_etcd ;;
    apiserver) build_apiserver ;;
    controller-manager) build_controller_manager ;;
    katib) build_katib ;;
    katib-source) katib_source; return ;;
    trainer) build_trainer ;;
    ghz) build_ghz ;;
    node) build_node ;;
    trainer-source) trainer_source; return ;;
    jobset-source) jobset_source; return ;;
    all) build_etcd; build_apiserver; build_controller_manager; build_katib; build_trainer; build_node ;;
    *) log "unknown target $1"; return 2 ;;
  esac
  echo "$CACHE"
}
main "$@"
