#!/usr/bin/env bash
# Builds the helm CLI pinned in tools/helm/go.mod into the machine's cache
# (scripts/lib/cache.sh), ~/.cache/leasetune/tools/helm-<version>/helm, once; prints the binary's path as
# the last line on stdout (progress goes to stderr):
#   HELM=$(scripts/helm.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$root/scripts/lib/cache.sh"
tools="$root/tools/helm"
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"
version="$(cd "$tools" && go list -mod=readonly -m -f '{{.Version}}' helm.sh/helm/v3)"
out="$(leasetune_cache)/tools/helm-$version"
if [[ -x "$out/helm" ]]; then
  echo "$out/helm"
  exit 0
fi
mkdir -p "$out"
tmp="$out/.helm.tmp.$$"
trap 'rm -f "$tmp"' EXIT
echo "helm: building helm $version into $out ..." >&2
start=$SECONDS
(cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version" -o "$tmp" helm.sh/helm/v3/cmd/helm) >&2
mv -f "$tmp" "$out/helm"
trap - EXIT
echo "helm: built in $((SECONDS - start))s" >&2
echo "$out/helm"
