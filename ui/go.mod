// This file only keeps ui/ out of the leasetune.io/leasetune module: npm
// packages under ui/node_modules ship Go files (flatted/golang), which
// `go build ./...`, `go vet ./...` and `go test ./...` would otherwise try
// to compile. Nothing here is Go.
module leasetune.io/leasetune/ui-npm-excluded

go 1.22
