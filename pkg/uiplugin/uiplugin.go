package uiplugin

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The UIPlugin kind and where Rancher reads it.
var (
	// UIPluginGVR is catalog.cattle.io/v1 uiplugins (rancher/rancher
	// v2.12.12 pkg/apis/catalog.cattle.io/v1/plugin.go).
	UIPluginGVR = schema.GroupVersionResource{Group: "catalog.cattle.io", Version: "v1", Resource: "uiplugins"}
)

const (
	// CRDName is the UIPlugin CRD Rancher installs (rancher/rancher
	// v2.12.12 pkg/crds/names.go UIPluginsCRD).
	CRDName = "uiplugins.catalog.cattle.io"
	// Namespace is the only namespace Rancher reads UIPlugins from
	// (rancher/rancher v2.12.12 pkg/namespace/namespace_utils.go
	// UIPluginNamespace, listed by pkg/controllers/dashboard/plugin/
	// controller.go OnPluginChange; Rancher makes it at start:
	// pkg/data/dashboard/namespace.go addCattleGlobalNamespaces).
	Namespace = "cattle-ui-plugin-system"
	// Name is the UIPlugin's name (the extension's package name, which
	// Embedded's manifest also says).
	Name = "leasetune"
	// BundleHashKey, in spec.plugin.metadata, is the bundle's SHA-256: a new
	// bundle under the same version changes the UIPlugin's spec, so
	// Rancher's controller (rancher/rancher v2.12.12
	// pkg/controllers/dashboard/plugin/controller.go OnPluginChange:
	// Generation > Status.ObservedGeneration is forceUpdate, which
	// fscache.go SyncWithControllersCache turns into deleting the cached
	// copy) fetches it again instead of serving the cached name and version.
	BundleHashKey = "leasetune.io/bundle-sha256"
)

// ChartFile is the repository path of the file the Helm chart renders its
// UIPlugin from (charts/leasetune/templates/uiplugin.yaml reads it with
// .Files.Get): ChartPlugin of the embedded bundle, written by
// `go run ./hack/uiplugin` (`make ui` runs it) so that the chart and the
// binary built from one commit name the same version and metadata.
const ChartFile = "charts/leasetune/uiplugin.json"

// ChartPlugin is what the chart's UIPlugin takes from the bundle.
type ChartPlugin struct {
	// Note says where the file comes from.
	Note string `json:"note"`
	// Name is spec.plugin.name and metadata.name (Rancher's index is keyed
	// by the one and updates readiness by the other: rancher/rancher
	// v2.12.12 pkg/controllers/dashboard/plugin/index.go Generate and Ready).
	Name string `json:"name"`
	// Version is spec.plugin.version: the bundle's, which its
	// plugin/package.json states (Rancher's cache refuses a mismatch:
	// fscache.go cacheEndpoint).
	Version string `json:"version"`
	// Metadata is spec.plugin.metadata: the package.json's rancher
	// annotations (catalog.cattle.io/rancher-version,
	// catalog.cattle.io/ui-extensions-version, ...; one source for them:
	// ui/pkg/leasetune/package.json) and BundleHashKey.
	Metadata map[string]string `json:"metadata"`
}

// Chart returns ChartPlugin for b.
func (b *Bundle) Chart() ChartPlugin {
	meta := map[string]string{BundleHashKey: b.SHA256}
	for k, v := range b.Annotations {
		meta[k] = v
	}
	return ChartPlugin{
		Note:     "written by `go run ./hack/uiplugin` (make ui) from " + BundleDir + "; read by templates/uiplugin.yaml; do not edit",
		Name:     b.Name,
		Version:  b.Version,
		Metadata: meta,
	}
}

// EncodeChart returns c as ChartFile holds it: indented JSON (keys sorted)
// ending in a newline. Errors: none in practice (json.Marshal of strings).
func EncodeChart(c ChartPlugin) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("encode %s: %w", ChartFile, err)
	}
	return buf.Bytes(), nil
}
