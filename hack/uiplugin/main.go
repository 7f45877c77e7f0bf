// Command uiplugin writes charts/leasetune/uiplugin.json (uiplugin.ChartFile):
// the name, version and spec.plugin.metadata of the Rancher UI extension's
// bundle, which the Helm chart's UIPlugin template renders, so that the
// chart and the binary built from one commit agree (the binary serves only
// its own bundle's version). `make ui` runs it after building the bundle;
// `make verify-ui` and pkg/uiplugin's TestChartFileCurrent fail when the
// committed file is not what it writes.
//
// Usage, from the repository root:
//
//	go run ./hack/uiplugin [-bundle DIR] [-o FILE]
//
// -bundle reads a bundle folder (manifest.json and plugin/) instead of the
// one embedded in this build; -o writes elsewhere than uiplugin.ChartFile.
package main

import (
	"flag"
	"fmt"
	"os"

	"leasetune.io/leasetune/pkg/uiplugin"
)

func main() {
	bundleDir := flag.String("bundle", "", "a bundle folder to read (default: the bundle embedded from "+uiplugin.BundleDir+")")
	out := flag.String("o", uiplugin.ChartFile, "the file to write")
	flag.Parse()
	if err := run(*bundleDir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "uiplugin:", err)
		os.Exit(1)
	}
}

func run(bundleDir, out string) error {
	var b *uiplugin.Bundle
	var err error
	if bundleDir == "" {
		b, err = uiplugin.Embedded()
	} else {
		b, err = uiplugin.Load(os.DirFS(bundleDir))
	}
	if err != nil {
		return err
	}
	data, err := uiplugin.EncodeChart(b.Chart())
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
