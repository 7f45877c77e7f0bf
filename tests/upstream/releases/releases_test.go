package releases

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	for r, want := range map[*Release]string{
		&RancherV21212:              "LEASETUNE_RANCHER_V2_12_12",
		&FleetV01314:                "LEASETUNE_FLEET_V0_13_14",
		&FleetV01410:                "LEASETUNE_FLEET_V0_14_10",
		&RancherV2150:               "LEASETUNE_RANCHER_V2_15_0",
		&WebhookV0110:               "LEASETUNE_WEBHOOK_V0_11_0",
		ptr(Rancher("v2.15.0-rc1")): "LEASETUNE_RANCHER_V2_15_0_RC1",
	} {
		if got := r.Env(); got != want {
			t.Errorf("%s %s: %s, want %s", r.Repo, r.Tag, got, want)
		}
	}
}

func ptr(r Release) *Release { return &r }

// TestDir: the folder counts only when it holds everything the suite runs;
// otherwise the error names the variable, the release and what is missing.
func TestDir(t *testing.T) {
	r := FleetV01410
	t.Setenv(r.Env(), "")
	if _, err := r.Dir(); err == nil || !strings.Contains(err.Error(), "LEASETUNE_FLEET_V0_14_10 unset") ||
		!strings.Contains(err.Error(), "rancher/fleet v0.14.10") || !strings.Contains(err.Error(), "bin/fleetagent") {
		t.Errorf("unset: %v", err)
	}
	t.Setenv(r.Env(), "builds/fleet")
	if _, err := r.Dir(); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("a relative path: %v", err)
	}
	dir := t.TempDir()
	t.Setenv(r.Env(), dir)
	for i, p := range r.Contains {
		_, err := r.Dir()
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), strings.Join(r.Contains[i:], ", ")) {
			t.Errorf("with %v only: %v", r.Contains[:i], err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := r.Dir(); err != nil || got != dir {
		t.Errorf("complete: %q, %v", got, err)
	}
}

// TestMissing: a suite beside Rancher says what each of its releases lacks,
// and nothing once both are there.
func TestMissing(t *testing.T) {
	s, ok := Of("tests/upstream/rancher", "rancher-v2.15.0")
	if !ok {
		t.Fatal("no suite rancher-v2.15.0 of tests/upstream/rancher")
	}
	for _, r := range s.Releases() {
		t.Setenv(r.Env(), "")
	}
	line := s.SkipLine("Test01Fleet")
	for _, want := range []string{"upstream: skip tests/upstream/rancher Test01Fleet (rancher-v2.15.0): ",
		"LEASETUNE_RANCHER_V2_15_0", "LEASETUNE_FLEET_V0_16_1", "LEASETUNE_WEBHOOK_V0_11_0"} {
		if !strings.Contains(line, want) {
			t.Errorf("skip line %q lacks %q", line, want)
		}
	}
	for _, r := range s.Releases() {
		fill(t, r)
	}
	if m := s.Missing(); m != "" {
		t.Errorf("with every folder: %s", m)
	}
}

// TestSuitesAreThePackages: the cases of each suite are the Test functions
// of its package, in the order go test runs them (files by name, then as
// declared), and every package of tests/upstream with tests is a suite.
func TestSuitesAreThePackages(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	dirs, err := filepath.Glob(filepath.Join(root, "tests", "upstream", "*", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string][]string{}
	sort.Strings(dirs)
	for _, f := range dirs {
		pkg := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(f, root+string(filepath.Separator))))
		if pkg == "tests/upstream/releases" {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain" {
				found[pkg] = append(found[pkg], fn.Name.Name)
			}
		}
	}
	pkgs := map[string]bool{}
	for _, s := range Suites {
		pkgs[s.Package] = true
	}
	if len(found) != len(pkgs) {
		t.Errorf("packages with tests %v, packages of suites %v", found, pkgs)
	}
	for _, s := range Suites {
		if !reflect.DeepEqual(found[s.Package], s.Cases) {
			t.Errorf("%s: the package's tests are %v, the suite lists %v", s.Package, found[s.Package], s.Cases)
		}
	}
}

// TestOf: a package's suite by name; without a name its only one, or the
// first whose folders are all there, or its first; names are unique.
func TestOf(t *testing.T) {
	names := map[string]bool{}
	for _, s := range Suites {
		if s.Name == "" || names[s.Name] {
			t.Errorf("suite of %s: name %q empty or not unique", s.Package, s.Name)
		}
		names[s.Name] = true
		for _, r := range s.Releases() {
			t.Setenv(r.Env(), "")
		}
	}
	if s, ok := Of("tests/upstream/fleet", ""); !ok || s.Name != "fleet-v0.14.10" {
		t.Errorf("the only suite of tests/upstream/fleet: %v %v", s.Name, ok)
	}
	if s, ok := Of("tests/upstream/rancher", ""); !ok || s.Name != "rancher-v2.12.12" {
		t.Errorf("no folder set: the first suite, got %v %v", s.Name, ok)
	}
	v215, _ := Of("tests/upstream/rancher", "rancher-v2.15.0")
	for _, r := range v215.Releases() {
		fill(t, r)
	}
	if s, ok := Of("tests/upstream/rancher", ""); !ok || s.Name != "rancher-v2.15.0" {
		t.Errorf("v2.15.0's folders set: that suite, got %v %v", s.Name, ok)
	}
	if s, ok := Of("tests/upstream/rancher", "rancher-v2.12.12"); !ok || s.Name != "rancher-v2.12.12" {
		t.Errorf("by name: %v %v", s.Name, ok)
	}
	if _, ok := Of("tests/upstream/rancher", "rancher-v9"); ok {
		t.Error("an unknown name found a suite")
	}
	if s, ok := Newest("tests/upstream/rancher"); !ok || s.Name != "rancher-v2.15.0" {
		t.Errorf("the newest Rancher suite: %v %v", s.Name, ok)
	}
	if _, ok := Newest("tests/upstream/none"); ok {
		t.Error("a package without suites has a newest")
	}
}

// TestShellsAndKube: each Rancher suite's dashboard folder exists, and its
// control plane is one scripts/controlplane.sh builds.
func TestShellsAndKube(t *testing.T) {
	for _, s := range Suites {
		if s.Rancher != nil {
			if _, err := os.Stat(filepath.Join("..", "dashboard", "shell-"+s.Shell, "package-lock.json")); err != nil {
				t.Errorf("suite %s: dashboard of @rancher/shell %q: %v", s.Name, s.Shell, err)
			}
		}
		tools := "controlplane-" + s.Kube
		if s.Kube == "1.36" {
			tools = "controlplane"
		}
		if _, err := os.Stat(filepath.Join("..", "..", "..", "tools", tools, "go.mod")); err != nil {
			t.Errorf("suite %s: Kubernetes %s: %v", s.Name, s.Kube, err)
		}
	}
}

// fill makes a folder that holds everything r's folder must, and names it
// in r's variable.
func fill(t *testing.T, r Release) {
	t.Helper()
	dir := t.TempDir()
	for _, p := range r.Contains {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(r.Env(), dir)
}
