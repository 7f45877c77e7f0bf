#!/usr/bin/env bash
# Provides the Prometheus Operator for tests/integration/prometheus (the
# chart's ServiceMonitor and PrometheusRule through a real operator:
# operator_test.go) and prints the binary's path as the last line on stdout
# (progress goes to stderr):
#   OPERATOR=$(scripts/prometheus-operator.sh)
#
# Builds github.com/prometheus-operator/prometheus-operator/cmd/operator at
# the version tools/prometheus-operator/go.mod pins (v0.75.1, the operator
# rancher-monitoring 105.x ships) into a git-ignored cache folder,
# ~/.cache/leasetune/tools/prometheus-operator-<version>/operator
# (scripts/lib/cache.sh), once per machine. Beside it, in crds/, it copies
# the operator's CRDs from the same module's
# example/prometheus-operator-crd/ (monitoring.coreos.com_*.yaml; in the
# module zip), which the test installs on its kube-apiserver: the CRDs and
# the binary are of one version. The CRDs are put in place before the
# binary, so a binary in the cache means its CRDs are there.
# Exits 1, saying why, when the build fails; the test then skips with that
# message.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$root/scripts/lib/cache.sh"
tools="$root/tools/prometheus-operator"
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"
module=github.com/prometheus-operator/prometheus-operator

version="$(cd "$tools" && go list -mod=readonly -m -f '{{.Version}}' "$module")"
out="$(leasetune_cache)/tools/prometheus-operator-$version"
if [[ -x "$out/operator" && -d "$out/crds" ]]; then
  echo "$out/operator"
  exit 0
fi
mkdir -p "$out"
tmp="$out/.operator.tmp.$$"
tmpcrds="$out/.crds.tmp.$$"
trap 'rm -rf "$tmp" "$tmpcrds"' EXIT

# The module's folder in Go's module cache (downloaded when missing).
(cd "$tools" && go mod download "$module") >&2
dir="$(cd "$tools" && go list -mod=readonly -m -f '{{.Dir}}' "$module")"
src="$dir/example/prometheus-operator-crd"
if ! compgen -G "$src/monitoring.coreos.com_*.yaml" >/dev/null; then
  echo "prometheus-operator: no CRDs in $src" >&2
  exit 1
fi
rm -rf "$out/crds"
mkdir -p "$tmpcrds"
cp "$src"/monitoring.coreos.com_*.yaml "$tmpcrds/"
chmod u+w "$tmpcrds"/*.yaml # the module cache's files are read-only
mv "$tmpcrds" "$out/crds"

echo "prometheus-operator: building $module/cmd/operator $version into $out (minutes, once) ..." >&2
start=$SECONDS
(cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v} -X github.com/prometheus/common/version.Branch=module-$version" \
  -o "$tmp" "$module/cmd/operator") >&2
mv -f "$tmp" "$out/operator"
trap - EXIT
echo "prometheus-operator: built in $((SECONDS - start))s" >&2
echo "$out/operator"
