#!/usr/bin/env bash
# The one way the project builds its images, for the release and for the
# tests (`make image`, `make cluster`), without Docker or a registry: a
# static binary (CGO_ENABLED=0) packed by tools/image (go-containerregistry,
# pinned there) into a docker-archive tarball that `ctr images import`,
# `docker load` and `crane push` take. Same sources and commit, same digest.
#   scripts/image.sh                 bin/leasetune-image.tar: leasetune:<appVersion>
#   scripts/image.sh pause           bin/pause-image.tar: the node's sandbox image and the
#                                    stand-in for Fleet's containers (hack/pause)
#   scripts/image.sh push REF        push bin/leasetune-image.tar to REF with crane (tools/image);
#                                    credentials from ~/.docker/config.json (crane auth login)
# The tarball's path is the last line on stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command -v go >/dev/null 2>&1 || PATH="/usr/local/go/bin:$PATH"
mkdir -p bin

app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/leasetune/Chart.yaml)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
# Every timestamp is the commit's time: rebuilding a commit gives the same digest.
created="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
[[ -z "$(git status --porcelain 2>/dev/null)" ]] || revision="$revision-dirty"
# The module path; LEASETUNE_IMAGE_SOURCE names another home (a fork).
source_url="${LEASETUNE_IMAGE_SOURCE:-https://leasetune.io/leasetune}"

# The tool runs here whatever GOOS/GOARCH the binary is built for (it reads
# the binary's architecture from the binary).
image() { (cd tools/image && env -u GOOS -u GOARCH go run -mod=readonly . "$@" -created "$created" -revision "$revision" -source "$source_url"); }
static() { CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o "$1" "$2"; }

case "${1:-leasetune}" in
leasetune)
  static bin/leasetune-static ./cmd/leasetune
  image -binary "$root/bin/leasetune-static" -name leasetune -version "$app_version" \
    -description "Rancher and Fleet leader-election timings as one validated setting" \
    -tags "leasetune:$app_version" -out "$root/bin/leasetune-image.tar" >&2
  echo "$root/bin/leasetune-image.tar"
  ;;
pause)
  static bin/pause-static ./hack/pause
  # fleetcontroller, fleetagent, fleet: the commands Fleet's Deployments run.
  image -binary "$root/bin/pause-static" -name pause -aliases fleetcontroller,fleetagent,fleet -version "$app_version" \
    -tags "leasetune.test/pause:1,leasetune.test/standin:1" -out "$root/bin/pause-image.tar" >&2
  echo "$root/bin/pause-image.tar"
  ;;
push)
  [[ $# -eq 2 ]] || { echo "usage: $0 push REGISTRY/REPOSITORY:TAG" >&2; exit 2; }
  "$root/scripts/image.sh" >/dev/null # rebuilt from this commit (seconds; the same digest when nothing changed)
  (cd tools/image && go run -mod=readonly github.com/google/go-containerregistry/cmd/crane push "$root/bin/leasetune-image.tar" "$2")
  ;;
*) echo "usage: $0 [leasetune|pause|push REF]" >&2; exit 2 ;;
esac
