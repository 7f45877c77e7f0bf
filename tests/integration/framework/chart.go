package framework

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"leasetune.io/leasetune/tests/helmchart"
)

// HelmPath returns the helm CLI the project pins (tools/helm), built once
// per machine by scripts/helm.sh (helmchart.Path).
func HelmPath() (string, error) { return helmchart.Path() }

// RenderChart returns the documents of charts/leasetune rendered by helm
// template (Kubernetes 1.30) with the given --set values.
func RenderChart(t testing.TB, set ...string) [][]byte {
	t.Helper()
	return RenderChartAPIs(t, nil, set...)
}

// UIPluginAPIVersion is what helm template is told is served
// (--api-versions) for the chart to render its UIPlugin, as helm install
// finds where Rancher runs.
const UIPluginAPIVersion = "catalog.cattle.io/v1/UIPlugin"

// RenderChartAPIs is RenderChart with more API versions the chart may
// look for (.Capabilities.APIVersions; helm template's --api-versions),
// such as UIPluginAPIVersion.
func RenderChartAPIs(t testing.TB, apiVersions []string, set ...string) [][]byte {
	t.Helper()
	helm, err := HelmPath()
	if err != nil {
		t.Fatal(err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "leasetune", filepath.Join(root, "charts", "leasetune"), "--kube-version", "1.30.0"}
	for _, v := range apiVersions {
		args = append(args, "--api-versions", v)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helm, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, &stderr)
	}
	docs, err := helmchart.Split(b)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// InstallWebhookConfig installs the ValidatingWebhookConfiguration among
// docs (the rendered chart) with each webhook pointed by URL at
// https://addr instead of the chart's Service, and removes it when t ends.
func (c *ControlPlane) InstallWebhookConfig(t testing.TB, docs [][]byte, addr string) {
	t.Helper()
	for _, doc := range docs {
		if !bytes.Contains(doc, []byte("kind: ValidatingWebhookConfiguration")) {
			continue
		}
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := utilyaml.Unmarshal(doc, &vwc); err != nil {
			t.Fatal(err)
		}
		for i := range vwc.Webhooks {
			u := "https://" + addr + *vwc.Webhooks[i].ClientConfig.Service.Path
			vwc.Webhooks[i].ClientConfig.Service, vwc.Webhooks[i].ClientConfig.URL = nil, &u
		}
		vwcs := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		_ = vwcs.Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
		if _, err := vwcs.Create(context.Background(), &vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = vwcs.Delete(context.Background(), vwc.Name, metav1.DeleteOptions{}) })
		return
	}
	t.Fatal("no ValidatingWebhookConfiguration in the chart")
}

// ResetSettings deletes the webhook configuration "leasetune" (so that
// nothing refuses the deletes; only the chart installs it, the manager
// never creates one) and every Setting object, and waits until none is
// left: each test that needs fresh Settings starts from none, as a new
// installation does. It fails t when the list or a delete fails.
func (c *ControlPlane) ResetSettings(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	_ = c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "leasetune", metav1.DeleteOptions{})
	res := c.Dynamic.Resource(SettingsGVR)
	l, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list settings: %v", err)
	}
	for _, it := range l.Items {
		if err := res.Delete(ctx, it.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete setting %s: %v", it.GetName(), err)
		}
	}
	Eventually(t, "settings gone", func() bool {
		l, err := res.List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})
}

// FreeAddr returns a loopback address with a port free now, for a server a
// test starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// KubectlPath returns the kubectl built beside the control plane
// (scripts/controlplane.sh, k8s.io/kubernetes v1.36.3 by default), in the folder
// KUBEBUILDER_ASSETS names.
func KubectlPath() (string, error) {
	dir, err := assetsDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kubectl"), nil
}
