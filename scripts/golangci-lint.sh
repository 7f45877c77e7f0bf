#!/usr/bin/env bash
# Builds the golangci-lint pinned in tools/golangci-lint/go.mod into the
# machine's cache (scripts/lib/cache.sh),
# ~/.cache/leasetune/tools/golangci-lint-<version>/golangci-lint, once; prints the binary's path as the last line on stdout (progress goes to
# stderr):
#   GOLANGCI_LINT=$(scripts/golangci-lint.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$root/scripts/lib/cache.sh"
tools="$root/tools/golangci-lint"
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"
version="$(cd "$tools" && go list -mod=readonly -m -f '{{.Version}}' github.com/golangci/golangci-lint/v2)"
out="$(leasetune_cache)/tools/golangci-lint-$version"
if [[ -x "$out/golangci-lint" ]]; then
  echo "$out/golangci-lint"
  exit 0
fi
mkdir -p "$out"
tmp="$out/.golangci-lint.tmp.$$"
trap 'rm -f "$tmp"' EXIT
echo "golangci-lint: building $version into $out (a few minutes, once) ..." >&2
start=$SECONDS
(cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath \
  -ldflags "-s -w -X main.version=${version#v}" -o "$tmp" github.com/golangci/golangci-lint/v2/cmd/golangci-lint) >&2
mv -f "$tmp" "$out/golangci-lint"
trap - EXIT
echo "golangci-lint: built in $((SECONDS - start))s" >&2
echo "$out/golangci-lint"
