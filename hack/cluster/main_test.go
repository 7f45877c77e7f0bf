package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
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

// The node shares the machine's disk: the kubelet evicts only at an
// absolute, small free space (with the default 10%, or 1%, of a 252 GiB
// disk, pods were evicted with 2.5 GiB free and the chart's install timed
// out), and up refuses a disk that cannot hold the node.
func TestDiskThresholds(t *testing.T) {
	c := &cluster{state: "/var/lib/leasetune-cluster"}
	var kc struct {
		EvictionHard map[string]string `json:"evictionHard"`
	}
	if err := yaml.Unmarshal([]byte(c.kubeletConfig()), &kc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nodefs.available", "imagefs.available"} {
		v := kc.EvictionHard[k]
		if q, err := resource.ParseQuantity(v); err != nil || strings.HasSuffix(v, "%") || q.Value() >= minDiskFree {
			t.Errorf("evictionHard %s = %q: want an absolute quantity below minDiskFree (%d)", k, v, minDiskFree)
		}
	}
	dir := t.TempDir()
	if err := diskFree(dir, 1); err != nil {
		t.Errorf("diskFree(%s, 1): %v", dir, err)
	}
	err := diskFree(dir, 1<<62)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "MiB free") {
		t.Errorf("diskFree(%s, 4 EiB) = %v: want an error naming the folder and the free MiB", dir, err)
	}
}
