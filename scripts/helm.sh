#!/usr/bin/env bash
# Builds the helm CLI pinned in tools/helm/go.mod into the machine's cache
# (scripts/lib/cache.sh), ~/.cache/leasetune/tools/helm-<version>/helm, once; prints the binary's path as
# the last line on stdout (progress goes to stderr):
#   HELM=$(scripts/helm.sh)
# LEASETUNE_HELM=4 builds helm v4 from tools/helm-v4 instead (what Rancher
# v2.15 and Fleet v0.15+ deploy with), ~/.cache/leasetune/tools/helm-<v4 version>/helm.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$root/scripts/lib/cache.sh"
case "${LEASETUNE_HELM:-3}" in
  3) tools="$root/tools/helm" mod=helm.sh/helm/v3 ;;
  4) tools="$root/tools/helm-v4" mod=helm.sh/helm/v4 ;;
  *) echo "helm: LEASETUNE_HELM=$LEASETUNE_HELM: want 3 or 4" >&2; exit 1 ;;
esac
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"
version="$(cd "$tools" && go list -mod=readonly -m -f '{{.Version}}' "$mod")"
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
  -ldflags "-s -w -X $mod/internal/version.version=$version" -o "$tmp" "$mod/cmd/helm") >&2
mv -f "$tmp" "$out/helm"
trap - EXIT
echo "helm: built in $((SECONDS - start))s" >&2
echo "$out/helm"
