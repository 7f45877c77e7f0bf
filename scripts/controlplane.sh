#!/usr/bin/env bash
# Builds a real kube-apiserver, etcd and kubectl for envtest and `make run` from the pinned Go modules
# in tools/controlplane/go.mod, into the machine's cache (scripts/lib/cache.sh):
#   ~/.cache/leasetune/controlplane/k8s-<kubernetes version>-etcd-<etcd version>/
# Idempotent: if both binaries are already there, nothing is built.
# The absolute folder path is the LAST line on stdout (progress goes to stderr):
#   KUBEBUILDER_ASSETS=$(scripts/controlplane.sh)
# With the argument `node`, also kube-controller-manager, kube-scheduler,
# kubelet and kube-proxy of the same version, for the single-node cluster of
# `make cluster` (hack/cluster):  scripts/controlplane.sh node
set -euo pipefail
node=
[[ "${1:-}" == node ]] && node=1

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$root/scripts/lib/cache.sh"
# The default is tools/controlplane (kube-apiserver v1.36). LEASETUNE_KUBE=1.28
# builds tools/controlplane-1.28 instead (the oldest Kubernetes the chart
# claims: `make test-smoke`), LEASETUNE_KUBE=1.32 tools/controlplane-1.32
# (the suite beside the real Rancher v2.12.12: its chart wants < 1.34),
# LEASETUNE_KUBE=1.34 tools/controlplane-1.34 (the suites beside v2.13.8 and
# v2.14.4).
# LEASETUNE_KUBE_FLAVOUR=rke2 builds the same kube-apiserver reporting the
# version RKE2 gives it (v1.36.3+rke2r1), into a folder of its own: the
# downstream cluster of the suite beside Rancher, which Rancher's provider
# detection then takes for RKE2 (rancher/kubernetes-provider-detector
# providers/rke2.go: "+rke2" in the server's gitVersion).
kube="${LEASETUNE_KUBE:-}"
flavour="${LEASETUNE_KUBE_FLAVOUR:-}"
case "$flavour" in
  "") suffix= ;;
  rke2) suffix=+rke2r1 ;;
  *) echo "controlplane: LEASETUNE_KUBE_FLAVOUR=$flavour: want rke2 or nothing" >&2; exit 1 ;;
esac
[[ "$kube" == 1.36 ]] && kube= # the default's own version names it too
tools="$root/tools/controlplane${kube:+-$kube}"
[[ -f "$tools/go.mod" ]] || { echo "controlplane: no $tools/go.mod (LEASETUNE_KUBE=${LEASETUNE_KUBE:-})" >&2; exit 1; }
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"

log() { echo "controlplane: $*" >&2; }

# Versions come from the tools module only (single source of truth).
modver() { (cd "$tools" && go list -mod=readonly -m -f "$2" "$1"); }
k8s_version="$(modver k8s.io/kubernetes '{{.Version}}')"              # e.g. v1.36.3
k8s_date="$(modver k8s.io/kubernetes '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}')"
etcd_version="$(modver go.etcd.io/etcd/server/v3 '{{.Version}}')"      # e.g. v3.6.8

k8s_version+="$suffix"
out="$(leasetune_cache)/controlplane/k8s-${k8s_version}-etcd-${etcd_version}"
node_bins=(kube-controller-manager kube-scheduler kubelet kube-proxy)
have_all() {
  local b
  for b in kube-apiserver etcd kubectl ${node:+"${node_bins[@]}"}; do [[ -x "$out/$b" ]] || return 1; done
}
if have_all; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"

# Without these ldflags kube-apiserver reports v0.0.0.
IFS=. read -r k8s_major k8s_minor _ <<<"${k8s_version#v}"
vpkg=k8s.io/component-base/version
apiserver_ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=$k8s_major"
apiserver_ldflags+=" -X $vpkg.gitMinor=$k8s_minor -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=$k8s_date"

# build <name> <package> <ldflags>: build to a temp name, then rename, so an
# interrupted build never leaves a half-written binary under the final name.
build() {
  local name="$1" pkg="$2" ldflags="$3" tmp="$out/.$1.tmp.$$"
  [[ -x "$out/$name" ]] && return 0
  log "building $name ($pkg) into $out ..."
  trap 'rm -f "$tmp"' EXIT
  local start=$SECONDS
  (cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") >&2
  chmod +x "$tmp"
  mv -f "$tmp" "$out/$name"
  trap - EXIT
  log "built $name in $((SECONDS - start))s"
}

build etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$apiserver_ldflags"
# kubectl, for `make run` (the commands it prints) and for envtest.
build kubectl k8s.io/kubernetes/cmd/kubectl "$apiserver_ldflags"
if [[ -n "$node" ]]; then
  for b in "${node_bins[@]}"; do build "$b" "k8s.io/kubernetes/cmd/$b" "$apiserver_ldflags"; done
fi

echo "$out"
