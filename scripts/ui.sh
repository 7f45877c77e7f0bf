#!/usr/bin/env bash
# The Rancher UI extension (ui/), for the Makefile:
#   scripts/ui.sh deps     npm ci in ui/, unless ui/node_modules already holds
#                          exactly ui/package-lock.json (a stamp of its hash)
#   scripts/ui.sh ci       npm ci in ui/ (always)
#   scripts/ui.sh build    the extension into pkg/uiplugin/bundle (embedded in
#                          the binary and committed), then what the chart's
#                          UIPlugin takes from it into charts/leasetune/uiplugin.json
#                          (go run ./hack/uiplugin)
#   scripts/ui.sh verify   build into a temporary folder and fail when
#                          pkg/uiplugin/bundle or charts/leasetune/uiplugin.json
#                          differs (stale or hand-edited), or when a bundle holds
#                          what the page must never do (forbidden, below)
#   scripts/ui.sh test     the jest tests (golden cases and components)
# Needs Node 20+ and npm. No binary is downloaded: Cypress's and Puppeteer's
# browser downloads are switched off (the browser test uses Debian's chromium).
set -euo pipefail
cd "$(dirname "$0")/../ui"
export CYPRESS_INSTALL_BINARY=0 PUPPETEER_SKIP_DOWNLOAD=1 PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=1
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

need_node() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "ui: node and npm are needed (Node 20 or later; Debian: apt-get install nodejs npm)" >&2
    exit 1
  fi
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if [ "$major" -lt 20 ]; then
    echo "ui: Node $(node --version) is too old: @rancher/shell 3.0.0 needs Node 20 or later" >&2
    exit 1
  fi
}

# What no bundle may contain: the page holds no credential of its own and
# calls nothing but Rancher's own API through the dashboard's store (issue
# 25): no Rancher token minted (/v3/tokens), no header of its own, no call
# of leasetune's former page API.
FORBIDDEN=('/v3/tokens' 'X-Leasetune-Token' '/leasetune/v1')

# forbidden DIR fails when a file under DIR contains one of FORBIDDEN.
forbidden() {
  local dir="$1" bad=0 s
  for s in "${FORBIDDEN[@]}"; do
    if grep -rlF -- "$s" "$dir" >/dev/null 2>&1; then
      echo "ui: $(grep -rlF -- "$s" "$dir" | tr '\n' ' ')contains \"$s\", which the page must never use" >&2
      bad=1
    fi
  done
  return "$bad"
}

stamp=node_modules/.leasetune-lock-sha256
lock_sum() { sha256sum package-lock.json | cut -d' ' -f1; }

ci() {
  need_node
  echo "ui: npm ci (about 2 minutes on 2 cores) ..."
  local start=$SECONDS
  npm ci --no-audit --no-fund --loglevel=error
  lock_sum > "$stamp"
  echo "ui: npm ci done in $((SECONDS - start))s"
}

deps() {
  need_node
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(lock_sum)" ]; then
    return 0
  fi
  ci
}

case "${1:-}" in
  deps) deps ;;
  ci) ci ;;
  build)
    deps
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    node build/bundle.js "$tmp/bundle"
    forbidden "$tmp/bundle"
    rm -rf ../pkg/uiplugin/bundle
    cp -r "$tmp/bundle" ../pkg/uiplugin/bundle
    (cd .. && "${GO:-go}" run ./hack/uiplugin)
    ;;
  verify)
    deps
    # The committed bundle first: a forbidden call fails even when it is current.
    forbidden ../pkg/uiplugin/bundle
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    node build/bundle.js "$tmp/bundle" >/dev/null
    forbidden "$tmp/bundle"
    if ! diff -r "$tmp/bundle" ../pkg/uiplugin/bundle; then
      echo "ui: pkg/uiplugin/bundle is not what ui/ builds to: run make ui and commit pkg/uiplugin/bundle" >&2
      exit 1
    fi
    (cd .. && "${GO:-go}" run ./hack/uiplugin -bundle "$tmp/bundle" -o "$tmp/uiplugin.json")
    if ! diff ../charts/leasetune/uiplugin.json "$tmp/uiplugin.json"; then
      echo "ui: charts/leasetune/uiplugin.json is not what the bundle says: run make ui (or go run ./hack/uiplugin) and commit it" >&2
      exit 1
    fi
    echo "ui: pkg/uiplugin/bundle and charts/leasetune/uiplugin.json are current"
    ;;
  test)
    deps
    npx --no-install jest --ci
    ;;
  *)
    echo "usage: scripts/ui.sh deps|ci|build|verify|test" >&2
    exit 2
    ;;
esac
