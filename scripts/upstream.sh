#!/usr/bin/env bash
# Builds the real Rancher and Fleet that `make test-upstream` runs beside leasetune, from the
# sources and build scripts in ../shared/upstream/, into a cache outside the clone:
#   ${LEASETUNE_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasetune-upstream}/
#     rancher-v2.12.12/bin/rancher                 (and src/: Rancher's tree, its chart among it)
#     fleet-v0.13.14/bin/{fleetcontroller,fleetagent}, fleet-v0.13.14/tree/   (charts/ among it)
#     fleet-v0.14.10/...
# A build the cache already holds takes seconds (the shared scripts skip it); a cold one takes
# about 40 minutes for Rancher and 10 for each Fleet on 2 cores. One progress line per step, with
# its duration, on stderr; the cache folder is the last line on stdout.
#
#   scripts/upstream.sh           build what is missing, print the cache folder
#   scripts/upstream.sh --check [NAME...]
#                                 build nothing; exit 0 when everything (or the NAMEs among
#                                 rancher-v2.12.12 fleet-v0.13.14 fleet-v0.14.10) is built, else 1
#                                 with what is missing
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="$(cd "$root/.." && pwd)/shared/upstream"
cache="${LEASETUNE_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/leasetune-upstream}"
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"

rancher_tag=v2.12.12
fleet_tags=(v0.13.14 v0.14.10)

log() { echo "upstream: $*" >&2; }

# built_rancher / built_fleet TAG: what the shared scripts test before skipping a build
# (the binaries newer than their source archive), so --check agrees with them.
built_rancher() {
  local bin="$cache/rancher-$rancher_tag/bin/rancher"
  [[ -x "$bin" && "$bin" -nt "$shared/src/rancher-$rancher_tag.tar.gz" && -f "$cache/rancher-$rancher_tag/src/chart/Chart.yaml" ]]
}
built_fleet() {
  local out="$cache/fleet-$1"
  [[ -x "$out/bin/fleetcontroller" && -x "$out/bin/fleetagent" && "$out/bin/fleetagent" -nt "$shared/src/fleet-$1.tar.gz" && -d "$out/tree/charts/fleet" ]]
}

if [[ ! -d "$shared" ]]; then
  log "no $shared: the shared folder beside the clone holds the Rancher and Fleet sources"
  exit 1
fi

if [[ "${1:-}" == "--check" ]]; then
  shift
  wanted=("$@")
  [[ ${#wanted[@]} -gt 0 ]] || wanted=("rancher-$rancher_tag" "${fleet_tags[@]/#/fleet-}")
  missing=()
  for w in "${wanted[@]}"; do
    case "$w" in
      "rancher-$rancher_tag") built_rancher || missing+=("$w") ;;
      fleet-v0.13.14|fleet-v0.14.10) built_fleet "${w#fleet-}" || missing+=("$w") ;;
      *) log "unknown build $w"; exit 2 ;;
    esac
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    log "not built in $cache: ${missing[*]}"
    exit 1
  fi
  log "built in $cache: ${wanted[*]}"
  echo "$cache"
  exit 0
fi

mkdir -p "$cache"
step() { # step NAME WHAT COMMAND...: run one build with a progress line and its duration
  local name=$1 what=$2; shift 2
  local start=$SECONDS
  log "$name: $what ..."
  if ! "$@" >"$cache/$name.build.log" 2>&1; then
    log "$name: failed after $((SECONDS - start))s; the last lines of $cache/$name.build.log:"
    tail -n 20 "$cache/$name.build.log" >&2
    exit 1
  fi
  log "$name: ready in $((SECONDS - start))s"
}
if built_rancher; then log "rancher-$rancher_tag: already built"; else
  step "rancher-$rancher_tag" "building the Rancher server (about 40 minutes the first time on 2 cores)" \
    bash "$shared/build-rancher.sh" "$cache/rancher-$rancher_tag"
fi
for t in "${fleet_tags[@]}"; do
  if built_fleet "$t"; then log "fleet-$t: already built"; else
    step "fleet-$t" "building fleetcontroller and fleetagent (about 10 minutes the first time)" \
      bash "$shared/build-fleet.sh" "$t" "$cache/fleet-$t"
  fi
done
echo "$cache"
