#!/usr/bin/env bash
# Regenerates pkg/apis/**/zz_generated_*.go and pkg/generated/ with wrangler
# v2's controller-gen (pkg/codegen). controller-gen writes under
# $GOPATH/src/<output package>, so it runs with a temporary GOPATH whose
# src/leasetune.io/leasetune is a link to this repository.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
gopath="$(mktemp -d)"
trap 'rm -rf "$gopath"' EXIT
mkdir -p "$gopath/src/leasetune.io"
ln -s "$root" "$gopath/src/leasetune.io/leasetune"
rm -rf pkg/generated
find pkg/apis -name 'zz_generated_*.go' -delete
# The module cache stays where it is; only the output tree moves.
export GOMODCACHE="$(go env GOMODCACHE)"
(cd "$gopath/src/leasetune.io/leasetune" && GOPATH="$gopath" GO111MODULE=on go run ./pkg/codegen)
gofmt -w pkg/generated pkg/apis
