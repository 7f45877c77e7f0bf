package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkState guards what down removes: only a folder up made.
func TestCheckState(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign")
	marked := filepath.Join(dir, "marked")
	for _, d := range []string{foreign, marked} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(foreign, "data"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(marked, marker), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for state, want := range map[string]string{
		"":                             "want an absolute",
		"/":                            "want an absolute",
		"/var":                         "want an absolute",
		"var/lib/x":                    "want an absolute",
		"/var/lib/../lib/x":            "want an absolute",
		"/var/lib/x/":                  "want an absolute",
		foreign:                        "did not make",
		marked:                         "",
		filepath.Join(dir, "none-yet"): "",
		t.TempDir():                    "", // empty
	} {
		err := checkState(state)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("checkState(%q) = %v, want %q", state, err, want)
		}
	}
}

// A shim's socket: sha256 of <containerd's address>/<namespace>/<id>
// under /run/containerd/s (containerd runtime/v2/shim/util_unix.go).
// The state folder is the test's own: a node of make cluster up on this
// machine (its state under /var/lib/leasetune-cluster, its logs linked
// from /var/log/containers) adds nothing.
func TestOutsideFiles(t *testing.T) {
	state := t.TempDir()
	c := &cluster{state: state}
	got := c.outsideFiles([]string{"abc"})
	sum := sha256.Sum256([]byte(state + "/run/containerd/containerd.sock/k8s.io/abc"))
	want := []string{fmt.Sprintf("/run/containerd/s/%x", sum),
		"/var/lib/cni/results/leasetune-abc-eth0", "/var/lib/cni/results/cni-loopback-abc-lo"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outsideFiles = %v, want %v", got, want)
	}
}
