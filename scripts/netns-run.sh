#!/usr/bin/env bash
# Runs a command in a network namespace of its own (unshare --net; root):
# its loopback up, and a bridge with no ports holding 198.18.0.1/24 (a range
# reserved for network tests) with the default route through it, because
# kube-apiserver picks its advertised address from the default route. The
# bridge has no port, so whatever is sent to it goes nowhere: every address
# the command serves or reaches is inside the namespace.
#   scripts/netns-run.sh COMMAND [ARG...]
set -euo pipefail
[[ $# -gt 0 ]] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }
exec unshare --net -- bash -c '
  set -e
  ip link set lo up
  ip link add lt0 type bridge
  ip addr add 198.18.0.1/24 dev lt0
  ip link set lt0 up
  ip route add default via 198.18.0.2 dev lt0
  exec "$@"' netns-run "$@"
