// Package prometheus_test runs a real Prometheus (built from its Go module
// by scripts/prometheus.sh) that scrapes leasetune's /metrics and the test
// kube-apiserver's own /metrics every second, and evaluates the Grafana
// dashboard's queries (charts/leasetune/dashboards/leasetune.json) through
// its HTTP API: the restart ledger and the writes it shows equal what the
// controller's Events say; the Lease request rate it shows drops after a
// retry-period change of real client-go electors and matches `leasetune
// audit` on the apiserver's audit log of the same window within 10%; every
// query answers, and names only metrics and labels the targets expose.
// And the chart's ServiceMonitor and PrometheusRule through the real
// Prometheus Operator (scripts/prometheus-operator.sh), whose generated
// configuration and rules that Prometheus runs (operator_test.go).
// Without a Prometheus (the build failed and Debian's package cannot be
// installed) every test skips, saying why; without the operator, its test
// does.
package prometheus_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp       *framework.ControlPlane
	auditLog string
	// binary is leasetune built from this tree, for `leasetune audit`.
	binary string
	// prometheusBin is the Prometheus server; noPrometheus says why there
	// is none (the tests skip with it).
	prometheusBin, noPrometheus string
	// operatorBin is the Prometheus Operator (its CRDs in crds/ beside
	// it); noOperator says why there is none (operator_test.go skips with
	// it).
	operatorBin, noOperator string
	// shared is the installation, controller and Prometheus the tests
	// share (harness_test.go), started by the first test that needs it.
	shared *env
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "leasetune-prometheus-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	prometheusBin, noPrometheus = findPrometheus(root)
	operatorBin, noOperator = findOperator(root)
	if binary, err = framework.BuildLeasetune(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	auditLog = filepath.Join(dir, "audit.log")
	c, err := framework.Start(framework.Options{
		AuditLog:   auditLog,
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD, framework.StatusCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cp = c
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
	}
	return code
}

// findPrometheus returns $LEASETUNE_PROMETHEUS when set (another
// Prometheus to run the tests with, such as Debian's /usr/bin/prometheus),
// else runs scripts/prometheus.sh (builds Prometheus once, or installs
// Debian's) and returns the path it prints last, or, when it fails, why.
func findPrometheus(root string) (path, why string) {
	if p := os.Getenv("LEASETUNE_PROMETHEUS"); p != "" {
		return p, ""
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "prometheus.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Sprintf("no Prometheus: scripts/prometheus.sh: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], ""
}

// findOperator runs scripts/prometheus-operator.sh (builds the Prometheus
// Operator once, and puts its CRDs beside it) and returns the path it
// prints last, or, when it fails, why.
func findOperator(root string) (path, why string) {
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "prometheus-operator.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Sprintf("no Prometheus Operator: scripts/prometheus-operator.sh: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], ""
}
