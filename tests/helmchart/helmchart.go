// Package helmchart renders the project's Helm chart, charts/leasetune,
// with the helm CLI the project pins (tools/helm, built once by
// scripts/helm.sh), for tests that need no cluster: tests/chart (the Rancher
// Apps page files) and tests/promrules (the alerts). It starts no control
// plane; the integration framework gets helm from Path too, and renders
// with its own renderer.
package helmchart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The API versions the chart looks for (.Capabilities.APIVersions) before
// it renders an object of a kind only some clusters serve; helm template
// is told they are served with --api-versions.
const (
	// UIPlugin: Rancher's UI extension kind (templates/uiplugin.yaml).
	UIPlugin = "catalog.cattle.io/v1/UIPlugin"
	// ServiceMonitor and PrometheusRule: the Prometheus Operator's kinds
	// (templates/servicemonitor.yaml, templates/prometheusrule.yaml).
	ServiceMonitor = "monitoring.coreos.com/v1/ServiceMonitor"
	PrometheusRule = "monitoring.coreos.com/v1/PrometheusRule"
)

// Namespace is the release namespace of every render.
const Namespace = "leasetune-system"

var (
	rootOnce sync.Once
	root     string
	rootErr  error
	helmMu   sync.Mutex
	helms    = map[int]helmBuild{}
)

type helmBuild struct {
	path string
	err  error
}

// Majors are the helm majors the chart is tested with: v3 (tools/helm) and
// v4 (tools/helm-v4: what Rancher v2.15 and Fleet v0.15+ deploy with).
var Majors = []int{3, 4}

// Root returns the repository's root: the first folder above the working
// directory whose go.mod is the module leasetune.io/leasetune.
func Root() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module leasetune.io/leasetune\n")) {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = errors.New("no go.mod of leasetune.io/leasetune above the working directory")
				return
			}
			dir = parent
		}
	})
	return root, rootErr
}

// Chart returns the chart's folder, charts/leasetune.
func Chart(t testing.TB) string {
	t.Helper()
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(r, "charts", "leasetune")
}

// Path returns the path of the pinned helm v3 CLI (PathOf(3)).
func Path() (string, error) { return PathOf(3) }

// PathOf returns the path of the pinned helm CLI of that major, building
// it first when missing (scripts/helm.sh with LEASETUNE_HELM=major:
// minutes, once per machine; its last line of output is the path), or the
// script's error with its output.
func PathOf(major int) (string, error) {
	helmMu.Lock()
	defer helmMu.Unlock()
	if b, ok := helms[major]; ok {
		return b.path, b.err
	}
	var b helmBuild
	defer func() { helms[major] = b }()
	r, err := Root()
	if err != nil {
		b.err = err
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(r, "scripts", "helm.sh"))
	cmd.Env = append(os.Environ(), fmt.Sprintf("LEASETUNE_HELM=%d", major))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.err = fmt.Errorf("scripts/helm.sh (LEASETUNE_HELM=%d): %w\n%s", major, err, stderr.String())
		return "", b.err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	b.path = lines[len(lines)-1]
	return b.path, nil
}

// Helm is Path for a test: it fails t when helm cannot be had.
func Helm(t testing.TB) string {
	t.Helper()
	p, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Template runs helm (v3) template on the chart (release leasetune,
// namespace Namespace, Kubernetes 1.30) with the extra arguments args
// (--set, --set-string, --api-versions ...) and returns its output, or the
// error with helm's stderr.
func Template(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	return TemplateWith(t, Helm(t), args...)
}

// TemplateWith is Template with the helm CLI at path helm.
func TemplateWith(t testing.TB, helm string, args ...string) ([]byte, error) {
	t.Helper()
	full := append([]string{"template", "leasetune", Chart(t), "--namespace", Namespace, "--kube-version", "1.30.0"}, args...)
	cmd := exec.Command(helm, full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// Render is Template, failing t on an error, split into its documents
// (comments kept, empty ones left out).
func Render(t testing.TB, args ...string) [][]byte {
	t.Helper()
	out, err := Template(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Split(out)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// Split returns the non-empty documents of a multi-document YAML stream
// (helm template's output), or the reader's error.
func Split(out []byte) ([][]byte, error) {
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
}

// Object is a rendered document decoded: its kind, name and whole content.
type Object struct {
	Kind string
	Name string
	Doc  map[string]interface{}
}

// Objects decodes docs (from Render); documents that are only comments
// are left out.
func Objects(t testing.TB, docs [][]byte) []Object {
	t.Helper()
	var out []Object
	for _, d := range docs {
		var m map[string]interface{}
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatalf("decode a rendered document: %v\n%s", err, d)
		}
		if m == nil {
			continue
		}
		kind, _ := m["kind"].(string)
		meta, _ := m["metadata"].(map[string]interface{})
		name, _ := meta["name"].(string)
		out = append(out, Object{Kind: kind, Name: name, Doc: m})
	}
	return out
}

// Find returns the objects of kind among objs.
func Find(objs []Object, kind string) []Object {
	var out []Object
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// Lookup returns the value at the dotted path (a question's variable, a
// --set key) in values decoded from YAML or JSON, and whether it is there.
func Lookup(values map[string]interface{}, path string) (interface{}, bool) {
	var cur interface{} = values
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}
