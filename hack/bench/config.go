package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	sigsyaml "sigs.k8s.io/yaml"
)

// configuration is how the bench runs leasetune: each is measured on its
// own control plane, in the same run, and is a column of the table.
type configuration struct {
	// name is the -configs name and the table's column.
	name string
	// chart runs leasetune as the chart's defaults do: the Fleet agent
	// channel detected (from Fleet v0.9.9's Deployments), the settle time
	// of the chart's values, the admission webhook registered as the chart
	// renders it (its ValidatingWebhookConfiguration, every cluster write
	// passing its match conditions), the UI server on, and the chart's
	// ElectionStatus CRD installed (so the status controller runs). Without
	// it, the bench's first configuration: the channel given
	// (cluster-env-v0.9), --settle 0s, the webhook served but not
	// registered, no UI server, no ElectionStatus CRD.
	chart bool
	// fleet is the Fleet release whose Deployments and Cluster CRD the
	// control plane holds (../shared/fixtures/fleet); "" is v0.9.9, where
	// a global agent change writes every cluster.
	fleet string
	// today: the run of runToday (Fleet v0.13+: a global agent change is
	// one write to fleet-agentmanagement), not the rounds of runOne.
	today bool
}

// fleetVersion is c's Fleet release.
func (c configuration) fleetVersion() string {
	if c.fleet == "" {
		return "v0.9.9"
	}
	return c.fleet
}

// configurations are the known -configs names.
var configurations = map[string]configuration{
	"bench": {name: "bench"},
	"chart": {name: "chart", chart: true},
	"today": {name: "today", chart: true, fleet: todayFleet, today: true},
}

// describe says what c sets, for the table.
func (c configuration) describe(settle string) string {
	if !c.chart {
		return "--fleet-agent-channel cluster-env-v0.9, --settle 0s, webhook served but not registered, no UI server, no ElectionStatus CRD"
	}
	return fmt.Sprintf("the chart's defaults: --fleet-agent-channel auto (detected: Fleet v0.9.9's Deployments), --settle %s (excluded from the change's clock), the chart's ValidatingWebhookConfiguration registered, UI server on, ElectionStatus CRD installed (status controller on)", settle)
}

// chartValues are the values of charts/leasetune/values.yaml the bench
// runs leasetune with.
type chartValues struct {
	GoMemLimit string `json:"goMemLimit"`
	Settle     string `json:"settle"`
}

// readChartValues reads the chart's values (from the repository root).
func readChartValues(path string) (chartValues, error) {
	var v chartValues
	b, err := os.ReadFile(path)
	if err != nil {
		return v, fmt.Errorf("read the chart's values (run from the repository root): %w", err)
	}
	if err := sigsyaml.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// chartCRDs is the chart's crds/ folder (the ElectionStatus CRD).
const chartCRDs = "charts/leasetune/crds"

// registerWebhook creates the chart's ValidatingWebhookConfiguration as
// `helm template` renders it with the chart's defaults, each webhook's
// clientConfig pointing at addr (the controller's --webhook-addr on
// loopback: the test apiserver has no Service network) at the same path.
// leasetune fills in its caBundle (--webhook-config leasetune).
func registerWebhook(ctx context.Context, cs kubernetes.Interface, helm, addr string) error {
	chart, err := filepath.Abs("charts/leasetune")
	if err != nil {
		return err
	}
	// The chart's kubeVersion constraint is checked against the version
	// helm is told; without --kube-version helm assumes v1.20.0.
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("the apiserver's version: %w", err)
	}
	cmd := exec.CommandContext(ctx, helm, "template", "leasetune", chart, "--namespace", "leasetune-system",
		"--kube-version", v.GitVersion, "--show-only", "templates/webhook.yaml")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("helm template: %w", err)
	}
	n := 0
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		var meta metav1.TypeMeta
		if err := sigsyaml.Unmarshal(d, &meta); err != nil {
			return err
		}
		if meta.Kind != "ValidatingWebhookConfiguration" {
			continue
		}
		var vwc admissionv1.ValidatingWebhookConfiguration
		if err := sigsyaml.UnmarshalStrict(d, &vwc); err != nil {
			return fmt.Errorf("the chart's ValidatingWebhookConfiguration: %w", err)
		}
		for i := range vwc.Webhooks {
			cc := &vwc.Webhooks[i].ClientConfig
			if cc.Service == nil || cc.Service.Path == nil {
				return fmt.Errorf("webhook %s: no service path in the chart", vwc.Webhooks[i].Name)
			}
			url := "https://" + addr + *cc.Service.Path
			cc.Service, cc.URL = nil, &url
		}
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &vwc, metav1.CreateOptions{}); err != nil {
			return err
		}
		logf("registered the chart's ValidatingWebhookConfiguration %s (%d webhooks, at https://%s)", vwc.Name, len(vwc.Webhooks), addr)
		n++
	}
	if n == 0 {
		return fmt.Errorf("helm template rendered no ValidatingWebhookConfiguration:\n%s", strings.TrimSpace(string(out)))
	}
	return nil
}
