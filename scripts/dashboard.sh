#!/usr/bin/env bash
# Builds Rancher's dashboard from @rancher/shell 3.0.8 (the packages of ui/package-lock.json,
# installed by scripts/ui.sh deps) the way Rancher serves it at /dashboard/, into the upstream
# cache, once (about 10 minutes on 2 cores; seconds when built):
#   ${LEASETUNE_UPSTREAM_CACHE:-~/.cache/leasetune-upstream}/dashboard-shell-3.0.8/ui-dashboard/dashboard/index.html
# Rancher serves it with the settings ui-offline-preferred=true and ui-dashboard-path=<that
# ui-dashboard folder> (rancher/rancher v2.12.12 pkg/ui/handler.go; steve pkg/ui/handler.go).
# The cache folder is the last line on stdout; progress goes to stderr.
#   scripts/dashboard.sh [--check]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${LEASETUNE_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasetune-upstream}"
shell_version="$(node -p "require('$root/ui/package.json').dependencies['@rancher/shell']")"
out="$cache/dashboard-shell-$shell_version"
index="$out/ui-dashboard/dashboard/index.html"
log() { echo "dashboard: $*" >&2; }
if [[ -f "$index" && "$index" -nt "$root/ui/package-lock.json" ]]; then echo "$out"; exit 0; fi
if [[ "${1:-}" == "--check" ]]; then log "not built: $index"; exit 1; fi
"$root/scripts/ui.sh" deps >&2
build="$out/build"
rm -rf "$build" "$out/ui-dashboard.tmp"; mkdir -p "$build"
cp "$root/tests/upstream/dashboard/"{package.json,vue.config.js,babel.config.js} "$build/"
ln -s "$root/ui/node_modules" "$build/node_modules"
log "building Rancher's dashboard from @rancher/shell $shell_version into $out (about 10 minutes) ..."
start=$SECONDS
(cd "$build" && NODE_ENV=production NODE_OPTIONS=--max-old-space-size=8192 ROUTER_BASE=/dashboard/ RESOURCE_BASE=/dashboard/ \
  OUTPUT_DIR="$out/ui-dashboard.tmp/dashboard" ./node_modules/.bin/vue-cli-service build) > "$out/build.log" 2>&1 || {
  log "failed after $((SECONDS - start))s; the last lines of $out/build.log:"; tail -n 30 "$out/build.log" >&2; exit 1; }
rm -rf "$out/ui-dashboard"; mv "$out/ui-dashboard.tmp" "$out/ui-dashboard"
log "built in $((SECONDS - start))s"
echo "$out"
