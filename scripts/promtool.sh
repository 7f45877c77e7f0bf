#!/usr/bin/env bash
# Provides promtool for the alert rules' tests (tests/promrules) and prints
# its path as the last line on stdout (progress goes to stderr):
#   PROMTOOL=$(scripts/promtool.sh)
# In this order:
#   1. $PROMTOOL, when it names an executable;
#   2. github.com/prometheus/prometheus/cmd/promtool at the version
#      tools/prometheus/go.mod pins (the module scripts/prometheus.sh builds
#      the server from), built once into the git-ignored cache folder
#      ~/.cache/leasetune/tools/promtool-<version>/promtool
#      (scripts/lib/cache.sh), with the build tag remove_all_sd: promtool
#      registers the service-discovery plugins (cmd/promtool/main.go imports
#      plugins/), and with that tag only file and HTTP discovery are built
#      (plugins/plugin_*.go are `//go:build !remove_all_sd ||
#      enable_<name>_sd`), which the rules' checks and tests never use. What
#      CI uses: it needs only the Go module proxy (and Go 1.26, which the
#      module requires);
#   3. when that build fails: a promtool on PATH, else, as root with apt-get,
#      Debian's prometheus package (which ships /usr/bin/promtool; installed
#      by scripts/prometheus.sh, which keeps its service from starting).
# Exits 1, saying why, when none can be had; the tests then skip with that
# message.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=lib/cache.sh
source "$root/scripts/lib/cache.sh"
tools="$root/tools/prometheus"
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"

if [[ -n "${PROMTOOL:-}" && -x "${PROMTOOL}" ]]; then
  echo "$PROMTOOL"
  exit 0
fi

build() {
  local module version out tmp start release
  module=github.com/prometheus/prometheus
  version="$(cd "$tools" && go list -mod=readonly -m -f '{{.Version}}' "$module")" || return 1
  out="$(leasetune_cache)/tools/promtool-$version"
  if [[ -x "$out/promtool" ]]; then
    echo "$out/promtool"
    return 0
  fi
  mkdir -p "$out"
  tmp="$out/.promtool.tmp.$$"
  # Prometheus's module version v0.MMM.P is its release 3.(MMM-300).P.
  release="${version#v0.}"
  release="3.$((10#${release%%.*} - 300)).${release#*.}"
  echo "promtool: building $module/cmd/promtool $version (Prometheus $release) into $out (minutes, once) ..." >&2
  start=$SECONDS
  if ! (cd "$tools" && CGO_ENABLED=0 go build -mod=readonly -trimpath -tags remove_all_sd \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release -X github.com/prometheus/common/version.Branch=module-$version" \
    -o "$tmp" "$module/cmd/promtool") >&2; then
    rm -f "$tmp"
    return 1
  fi
  mv -f "$tmp" "$out/promtool"
  echo "promtool: built in $((SECONDS - start))s" >&2
  echo "$out/promtool"
}

if build; then
  exit 0
fi
echo "promtool: building it from its Go module failed (above); looking for another promtool" >&2
if command -v promtool >/dev/null 2>&1; then
  command -v promtool
  exit 0
fi
if bash "$root/scripts/prometheus.sh" >/dev/null && [[ -x /usr/bin/promtool ]]; then
  echo /usr/bin/promtool
  exit 0
fi
echo "promtool: none could be had (no build from tools/prometheus, none on PATH, no Debian package)" >&2
exit 1
