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
	s, ok := Of("tests/upstream/rancher")
	if !ok {
		t.Fatal("no suite tests/upstream/rancher")
	}
	for _, r := range s.Releases() {
		t.Setenv(r.Env(), "")
	}
	line := s.SkipLine("Test01Fleet")
	for _, want := range []string{"upstream: skip tests/upstream/rancher Test01Fleet: ", "LEASETUNE_RANCHER_V2_12_12", "LEASETUNE_FLEET_V0_13_14"} {
		if !strings.Contains(line, want) {
			t.Errorf("skip line %q lacks %q", line, want)
		}
	}
	for _, r := range s.Releases() {
		dir := t.TempDir()
		for _, p := range r.Contains {
			_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
			if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv(r.Env(), dir)
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
	if len(found) != len(Suites) {
		t.Errorf("packages with tests %v, suites %d", found, len(Suites))
	}
	for _, s := range Suites {
		if !reflect.DeepEqual(found[s.Package], s.Cases) {
			t.Errorf("%s: the package's tests are %v, the suite lists %v", s.Package, found[s.Package], s.Cases)
		}
	}
}
