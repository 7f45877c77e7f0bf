#!/usr/bin/env bash
# Provides the Prometheus server for tests/integration/prometheus (the
# Grafana dashboard's queries on a real Prometheus) and prints its path as
# the last line on stdout (progress goes to stderr):
#   PROMETHEUS=$(scripts/prometheus.sh)
#
# 1. Builds github.com/prometheus/prometheus/cmd/prometheus at the version
#    tools/prometheus/go.mod pins into a git-ignored cache folder,
#    ~/.cache/leasetune/tools/prometheus-<version>-<tags>/prometheus
#    (scripts/lib/cache.sh), once (a few minutes on 2 cores the first time,
#    9 s to relink from Go's build cache; seconds afterwards). The folder
#    names the build tags too, so that a machine whose cache holds a build
#    with other tags (before Kubernetes discovery was added: the folder
#    prometheus-<version>) builds anew. Build tags:
#    - remove_all_sd and enable_kubernetes_sd: of the service-discovery
#      plugins only Kubernetes (plugins/plugin_*.go are `//go:build
#      !remove_all_sd || enable_<name>_sd`; plugins/plugin_kubernetes.go is
#      enable_kubernetes_sd), beside file and HTTP, which plugins/minimum.go
#      always keeps; no cloud SDKs. The dashboard's tests scrape static
#      targets; the test of the chart's ServiceMonitor (operator_test.go)
#      runs the configuration the Prometheus Operator generates, whose scrape
#      jobs find their targets with kubernetes_sd_configs (role endpoints);
#    - no builtinassets (web/ui/ui.go, `//go:build !builtinassets`, serves
#      the web UI from web/ui/static under the working directory, which is
#      not there): no UI; the tests use only the HTTP API.
# 2. If that build fails and this is a root shell with apt-get, installs
#    Debian's prometheus package instead (its service is kept from starting
#    while it installs) and prints /usr/bin/prometheus.
# Exits 1, saying why, when neither works; the test then skips with that
# message.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$root/scripts/lib/cache.sh"
tools="$root/tools/prometheus"
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"

build() {
  local module version out tmp start
  local tags=remove_all_sd,enable_kubernetes_sd
  module=github.com/prometheus/prometheus
  version="$(cd "$tools" && go list -mod=readonly -m -f '{{.Version}}' "$module")" || return 1
  out="$(leasetune_cache)/tools/prometheus-$version-${tags//,/-}"
  if [[ -x "$out/prometheus" ]]; then
    echo "$out/prometheus"
    return 0
  fi
  mkdir -p "$out"
  tmp="$out/.prometheus.tmp.$$"
  # Prometheus's module version v0.MMM.P is its release 3.(MMM-300).P.
  local release="${version#v0.}"
  release="3.$((10#${release%%.*} - 300)).${release#*.}"
  echo "prometheus: building $module $version (Prometheus $release, tags $tags) into $out (a few minutes, once) ..." >&2
  start=$SECONDS
  if ! (cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath -tags "$tags" \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.Branch=module-$version" \
    -o "$tmp" "$module/cmd/prometheus") >&2; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$out/prometheus"
  echo "prometheus: built in $((SECONDS - start))s" >&2
  echo "$out/prometheus"
}

if build; then
  exit 0
fi
echo "prometheus: building it from its Go module failed (above)" >&2

if [[ -x /usr/bin/prometheus ]]; then
  echo /usr/bin/prometheus
  exit 0
fi
if ! command -v apt-get >/dev/null || [[ "$(id -u)" != 0 ]]; then
  echo "prometheus: no Prometheus: the build failed, and Debian's package needs root and apt-get (sudo apt-get install -y prometheus)" >&2
  exit 1
fi
echo "prometheus: installing Debian's prometheus package (apt-get install -y prometheus) ..." >&2
export DEBIAN_FRONTEND=noninteractive
# Its maintainer scripts would start a Prometheus service on :9090; a
# policy-rc.d that refuses (exit 101) keeps it from starting, as in
# container images. The tests start their own on loopback.
policy=/usr/sbin/policy-rc.d
made_policy=
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made_policy=1
fi
status=0
{ apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus; } >&2 || status=$?
[[ -n "$made_policy" ]] && rm -f "$policy"
if [[ $status != 0 || ! -x /usr/bin/prometheus ]]; then
  echo "prometheus: apt-get install prometheus failed" >&2
  exit 1
fi
echo /usr/bin/prometheus
