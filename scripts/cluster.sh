#!/usr/bin/env bash
# `make cluster` / `make cluster-down` (docs/cluster.md): a single-node
# Kubernetes on this machine with leasetune installed by its chart.
#   scripts/cluster.sh up     installs containerd, runc, the CNI plugins, iptables and conntrack
#                             from Debian when missing; builds the Kubernetes binaries
#                             (scripts/controlplane.sh node), helm and the images
#                             (scripts/image.sh); then hack/cluster up
#   scripts/cluster.sh down   hack/cluster down
# Root only. State in $LEASETUNE_CLUSTER_STATE (/var/lib/leasetune-cluster).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"
state="${LEASETUNE_CLUSTER_STATE:-/var/lib/leasetune-cluster}"
log() { echo "cluster: $*" >&2; }
[[ $EUID -eq 0 ]] || { log "needs root (containerd, runc, network namespaces)"; exit 1; }

case "${1:-}" in
up)
  pkgs=()
  command -v containerd >/dev/null || pkgs+=(containerd)
  command -v runc >/dev/null || pkgs+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || pkgs+=(containernetworking-plugins)
  command -v iptables >/dev/null || pkgs+=(iptables)
  command -v conntrack >/dev/null || pkgs+=(conntrack)
  command -v nsenter >/dev/null || pkgs+=(util-linux)
  if (( ${#pkgs[@]} )); then
    log "apt-get install ${pkgs[*]} ..."
    start=$SECONDS
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null ||
      { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null; }
    log "installed in $((SECONDS - start))s"
  fi
  log "Kubernetes binaries (scripts/controlplane.sh node; built once, minutes) ..."
  assets="$(scripts/controlplane.sh node)"
  helm="$(scripts/helm.sh)"
  log "images (scripts/image.sh) ..."
  leasetune_image="$(scripts/image.sh)"
  pause_image="$(scripts/image.sh pause)"
  fixtures="${LEASETUNE_FIXTURES:-$root/../shared/fixtures}"
  go build -o bin/cluster ./hack/cluster
  exec bin/cluster up -state "$state" -assets "$assets" -repo "$root" -helm "$helm" \
    -fixtures "$fixtures" -images "$pause_image,$leasetune_image"
  ;;
down)
  go build -o bin/cluster ./hack/cluster
  exec bin/cluster down -state "$state"
  ;;
*) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
