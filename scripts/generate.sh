#!/usr/bin/env bash
# Regenerates pkg/apis/**/zz_generated_*.go and pkg/generated/ with wrangler
# v2's controller-gen (pkg/codegen).
#
# controller-gen writes under $GOPATH/src/<output package> and then copies
# $GOPATH/src/<first three parts of the package path> into the working
# directory. With this two-part module path that is the whole of pkg/, so
# it runs on a copy of the sources inside a temporary GOPATH, and only the
# generated files are copied back.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gopath="$(mktemp -d)"
trap 'rm -rf "$gopath"' EXIT
work="$gopath/src/leasetune.io/leasetune"
mkdir -p "$work"
(cd "$root" && tar --exclude=./.git --exclude=./.cache --exclude=./bin -cf - .) | (cd "$work" && tar -xf -)
rm -rf "$work/pkg/generated"
find "$work/pkg/apis" -name 'zz_generated_*.go' -delete
export GOMODCACHE="$(go env GOMODCACHE)" # keep using the shared module cache
(cd "$work" && GOPATH="$gopath" GO111MODULE=on go run ./pkg/codegen)
gofmt -w "$work/pkg/generated" "$work/pkg/apis"

# Copy back exactly the generated files.
rm -rf "$root/pkg/generated"
find "$root/pkg/apis" -name 'zz_generated_*.go' -delete
cp -a "$work/pkg/generated" "$root/pkg/generated"
(cd "$work" && find pkg/apis -name 'zz_generated_*.go' -print0) | while IFS= read -r -d '' f; do
  cp "$work/$f" "$root/$f"
done
