package uiplugin

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// bundleFS is the built extension: bundle/manifest.json and
// bundle/plugin/* (`make ui` writes them from ui/dist-pkg; `make
// verify-ui` checks they are what the sources build to).
//
//go:embed all:bundle
var bundleFS embed.FS

// BundleDir is the repository path of the embedded bundle.
const BundleDir = "pkg/uiplugin/bundle"

// Manifest is bundle/manifest.json: what `make ui` read from the
// extension's package.json (ui/pkg/leasetune/package.json).
type Manifest struct {
	// Name is the extension's package name ("leasetune"): the UIPlugin's
	// spec.plugin.name, and the first part of the script Rancher's UI
	// loads, <name>-<version>.umd.min.js.
	Name string `json:"name"`
	// Version is its semver version: spec.plugin.version, and the version
	// plugin/package.json states (Rancher refuses a mismatch).
	Version string `json:"version"`
	// Main is the script Rancher's UI loads (@rancher/shell
	// shell/core/extension-manager-impl.js, loadPluginAsync:
	// metadata.main, else <name>-<version>.umd.min.js).
	Main string `json:"main"`
	// Annotations are the package.json's rancher.annotations: the
	// compatibility metadata Rancher's UI checks before it loads the
	// extension (shell/config/uiplugins.js shouldNotLoadPlugin at
	// shell-pkg-v3.0.8: catalog.cattle.io/ui-extensions-version is
	// mandatory, "plugins.error.apiAnnotationMissing" otherwise;
	// catalog.cattle.io/rancher-version is checked when present).
	Annotations map[string]string `json:"annotations"`
}

// Bundle is the extension as served: its manifest and its files.
type Bundle struct {
	Manifest
	// Files maps each path under the endpoint ("plugin/package.json",
	// "plugin/leasetune-0.1.0.umd.min.js", ...) to its content.
	Files map[string][]byte
	// SHA256 is the hex SHA-256 of files.txt and every file in its order:
	// it changes whenever any served byte does.
	SHA256 string
}

// Embedded returns the bundle built into the binary. Errors: a manifest
// that is missing or does not parse, a name or version that is empty, or a
// main script or plugin/package.json that is not there (the bundle was not
// built: run `make ui`), or a plugin/package.json whose version is not the
// manifest's.
func Embedded() (*Bundle, error) {
	sub, err := fs.Sub(bundleFS, "bundle")
	if err != nil {
		return nil, err
	}
	return Load(sub)
}

// Load reads a bundle from fsys (a manifest.json and a plugin/ folder), with
// the checks of Embedded.
func Load(fsys fs.FS) (*Bundle, error) {
	raw, err := fs.ReadFile(fsys, "manifest.json")
	if err != nil {
		return nil, fmt.Errorf("UI bundle: %w (run make ui)", err)
	}
	var b Bundle
	if err := json.Unmarshal(raw, &b.Manifest); err != nil {
		return nil, fmt.Errorf("UI bundle manifest.json: %w", err)
	}
	if b.Name == "" || b.Version == "" || b.Main == "" {
		return nil, fmt.Errorf("UI bundle manifest.json: name %q, version %q and main %q must all be set", b.Name, b.Version, b.Main)
	}
	b.Files = map[string][]byte{}
	err = fs.WalkDir(fsys, "plugin", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		b.Files[p] = data
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("UI bundle: %w", err)
	}
	for _, want := range []string{"plugin/package.json", "plugin/" + b.Main} {
		if _, ok := b.Files[want]; !ok {
			return nil, fmt.Errorf("UI bundle: %s is missing (run make ui)", want)
		}
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b.Files["plugin/package.json"], &pkg); err != nil || pkg.Version != b.Version {
		return nil, fmt.Errorf("UI bundle: plugin/package.json version %q is not the manifest's %q (%w)", pkg.Version, b.Version, err)
	}
	h := sha256.New()
	h.Write(b.FilesTxt())
	for _, p := range b.Paths() {
		h.Write(b.Files[p])
	}
	b.SHA256 = hex.EncodeToString(h.Sum(nil))
	return &b, nil
}

// Paths returns the served paths in the order files.txt lists them
// (sorted, as Rancher's own `find plugin -type f | sort` makes them:
// @rancher/shell shell/scripts/extension/publish).
func (b *Bundle) Paths() []string {
	out := make([]string, 0, len(b.Files))
	for p := range b.Files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// FilesTxt returns files.txt: every served path, one a line, each line
// ending in a newline.
func (b *Bundle) FilesTxt() []byte {
	var sb strings.Builder
	for _, p := range b.Paths() {
		sb.WriteString(p)
		sb.WriteByte('\n')
	}
	return []byte(sb.String())
}

// PathPrefix is the versioned path the bundle is served at,
// "/uiplugin/<name>/<version>" (no trailing slash): the path part of the
// UIPlugin's endpoint.
func (b *Bundle) PathPrefix() string {
	return path.Join("/uiplugin", b.Name, b.Version)
}

// ScriptURL is the path Rancher's UI loads the extension from, on
// Rancher's own server: /v1/uiplugins/<name>/<version>/plugin/<main>
// (shell/core/extension-manager-impl.js loadPluginAsync and
// shell/config/uiplugins.js UI_PLUGIN_BASE_URL at shell-pkg-v3.0.8; served
// by rancher/rancher v2.11.3 pkg/api/steve/catalog/plugin.go pluginHandler).
func (b *Bundle) ScriptURL() string {
	return path.Join("/v1/uiplugins", b.Name, b.Version, "plugin", b.Main)
}

// GlobalName is the window property the script defines,
// "<name>-<version>", whose default export Rancher's UI calls with the
// extension's Plugin (extension-manager-impl.js loadAsync).
func (b *Bundle) GlobalName() string { return b.Name + "-" + b.Version }
