package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"leasetune.io/leasetune/hack/auditgen"
)

// sampleLog writes a generated log (the SURE-3805 mix, 30 minutes) and
// returns its path.
func sampleLog(t *testing.T, gz bool) string {
	t.Helper()
	var buf bytes.Buffer
	o := auditgen.SURE3805(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	o.Duration = 30 * time.Minute
	if _, err := auditgen.Write(&buf, o); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if gz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(data)
		_ = zw.Close()
		data = z.Bytes()
	}
	p := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runCmd runs the command line args with stdin as its input and returns
// the exit code, stdout and stderr.
func runCmd(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestAuditText(t *testing.T) {
	p := sampleLog(t, true)
	code, out, errs := runCmd(t, "", "audit", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"requests from 2024-01-01T00:00:0",
		"top 10 request URIs:",
		"/apis/coordination.k8s.io/v1/namespaces/cattle-fleet-system/leases/fleet-controller-lock?timeout=10s",
		"leader-election locks (5):",
		"cloud-controller-manager (inferred)",
		"system:serviceaccount:cattle-fleet-system:fleet-controller (fleetcontroller/v0.0.0)",
		"locks leasetune manages, now and with the triples from the settings' defaults:",
		"fleet-agent leaseDuration=30s renewDeadline=25s retryPeriod=10s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cluster-autoscaler-status (") || strings.Contains(out, "kube-node-lease ") {
		t.Errorf("a non-lock among the locks:\n%s", out)
	}
}

func TestAuditJSON(t *testing.T) {
	p := sampleLog(t, false)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Two files: the log and the same log from stdin.
	code, out, errs := runCmd(t, string(raw), "audit", "--output", "json", "--top", "3", "--retry-period", "20s", "--renew-deadline", "40s", "--lease-duration", "41s",
		"--rancher-retry-period", "10s", "--rancher-renew-deadline", "25s", "--rancher-lease-duration", "30s", p, "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Requests int       `json:"requests"`
		From     time.Time `json:"from"`
		To       time.Time `json:"to"`
		Top      []struct {
			RequestURI string `json:"requestURI"`
			Count      int    `json:"count"`
		} `json:"top"`
		Locks []struct {
			Resource, Namespace, Name string
			Requests                  int
			PerHour, Share            float64
			Holders                   []struct{ User, UserAgent string }
		} `json:"locks"`
		Managed struct {
			Source           string  `json:"source"`
			ProjectedPerHour float64 `json:"projectedPerHour"`
		} `json:"managed"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if r.Requests == 0 || len(r.Top) != 3 || r.Top[0].Count < r.Top[1].Count || len(r.Locks) != 5 || r.From.IsZero() {
		t.Errorf("report: %+v", r)
	}
	for _, l := range r.Locks {
		if l.Requests == 0 || l.PerHour <= 0 || l.Share <= 0 || len(l.Holders) == 0 || l.Holders[0].User == "" {
			t.Errorf("lock %+v", l)
		}
	}
	// Three Fleet locks, no followers, at 20s: 360 an hour each (a get and
	// an update per renewal); Rancher's cattle-controllers at 10s with the
	// 4 followers the doubled log implies (2 in each copy): 720 for the
	// leader, 3600/(1.6×10) = 225 for each follower.
	if r.Managed.Source != "flags" || r.Managed.ProjectedPerHour != 3*360+720+4*225 {
		t.Errorf("managed: %+v", r.Managed)
	}
}

func TestAuditInputs(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.log")
	_ = os.WriteFile(empty, nil, 0o600)
	code, out, _ := runCmd(t, "", "audit", empty)
	if code != 0 || !strings.Contains(out, "no requests in "+empty) {
		t.Errorf("empty log: exit %d, %q", code, out)
	}

	gz, _ := os.ReadFile(sampleLog(t, true))
	cut := filepath.Join(dir, "cut.log.gz")
	_ = os.WriteFile(cut, gz[:len(gz)/2], 0o600)
	code, _, errs := runCmd(t, "", "audit", cut)
	if code != 1 || !strings.Contains(errs, cut) || !strings.Contains(errs, "truncated gzip") {
		t.Errorf("truncated gzip: exit %d, %q", code, errs)
	}

	// Lines, none an event: the report, then an error (the wrong file).
	code, out, errs = runCmd(t, "not json\n{}\n", "audit", "-")
	if code != 1 || !strings.Contains(out, "not an audit event: stdin line 1:") || !strings.Contains(out, "stdin line 2:") ||
		!strings.Contains(errs, "none of the 2 lines in stdin is an audit event") {
		t.Errorf("no line an event: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = runCmd(t, "not json\n", "audit", "-o", "json", "-")
	if code != 1 || !strings.Contains(out, `"badLines": 1`) || !strings.Contains(errs, "none of the 1 lines in stdin") {
		t.Errorf("no line an event, -o json: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// Bad lines among events are counted, never fatal.
	good, _ := os.ReadFile(sampleLog(t, false))
	code, out, errs = runCmd(t, "not json\n"+string(good), "audit", "-")
	if code != 0 || !strings.Contains(out, "not an audit event: stdin line 1:") {
		t.Errorf("a bad line among events: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	for _, args := range [][]string{
		{"audit"},
		{"audit", "--output", "yaml", "x"},
		{"audit", "--retry-period", "30s", empty}, // 30s/25s/30s is invalid
		{"audit", "--top", "-1", empty},
	} {
		if code, _, errs := runCmd(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, errs)
		}
	}
	if code, _, errs := runCmd(t, "", "audit", filepath.Join(dir, "missing")); code != 1 || !strings.Contains(errs, "missing") {
		t.Errorf("missing file: exit %d: %s", code, errs)
	}
}

// TestAuditLeftAlone: a Rancher v2.13+ log's rancher-turtles and Cluster
// API Leases are named by component in the lock table and listed, with
// how to change them, as locks leasetune's settings do not reach.
func TestAuditLeftAlone(t *testing.T) {
	o := auditgen.SURE3805(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	o.Duration = 10 * time.Minute
	o.Locks = append(o.Locks, auditgen.Lock{Resource: "leases", Namespace: "cattle-turtles-system", Name: "controller-leader-election-rancher-turtles",
		User: "system:serviceaccount:cattle-turtles-system:rancher-turtles-manager", UserAgent: "manager/v0.0.0", RetryPeriod: 2 * time.Second})
	var buf bytes.Buffer
	if _, err := auditgen.Write(&buf, o); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd(t, buf.String(), "audit", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"NAME                                        COMPONENT         HOLDER",
		"locks of components leasetune's settings do not reach (their triple is theirs to change):",
		"cattle-turtles-system  controller-leader-election-rancher-turtles  rancher-turtles",
		"leaseDuration=15s renewDeadline=10s retryPeriod=2s",
		"rancher-turtles: the flags --leader-elect-lease-duration",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCmd(t, buf.String(), "audit", "--output", "json", "-")
	var r struct {
		LeftAlone []struct{ Name, Component, Defaults, Change string } `json:"leftAlone"`
		Locks     []struct{ Name, Component string }                   `json:"locks"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	if len(r.LeftAlone) != 1 || r.LeftAlone[0].Component != "rancher-turtles" || r.LeftAlone[0].Change == "" {
		t.Errorf("leftAlone %+v", r.LeftAlone)
	}
}
