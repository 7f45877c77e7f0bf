package framework

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// WebhookDeployment is rancher-webhook's Deployment and Service in
// RancherNamespace (rancher/webhook v0.11.0 charts/rancher-webhook
// templates/deployment.yaml and service.yaml; pkg/server/server.go:
// serviceName rancher-webhook, namespace cattle-system).
const WebhookDeployment = "rancher-webhook"

// webhookChartVersions are the versions Rancher's system chart repository
// gives each rancher-webhook tag's chart (rancher/rancher build.yaml
// webhookVersion: v2.13.8 108.0.7+up0.9.7, v2.14.4 109.0.5+up0.10.9,
// v2.15.0 110.0.0+up0.11.0); the tag's own Chart.yaml says 999 until its
// release build fills it.
var webhookChartVersions = map[string]string{
	"v0.9.7":  "108.0.7+up0.9.7",
	"v0.10.9": "109.0.5+up0.10.9",
	"v0.11.0": "110.0.0+up0.11.0",
}

// WebhookChart copies rancher-webhook's chart (charts/rancher-webhook of
// its tree) into dir with the version Rancher's system charts give it,
// and returns its path.
func WebhookChart(b Binaries, dir, tag string) (string, error) {
	dst := filepath.Join(dir, "rancher-webhook-chart")
	if err := copyTree(filepath.Join(b.WebhookTree, "charts", "rancher-webhook"), dst); err != nil {
		return "", err
	}
	v, ok := webhookChartVersions[tag]
	if !ok {
		return "", fmt.Errorf("no system chart version known for rancher-webhook %s", tag)
	}
	p := filepath.Join(dst, "Chart.yaml")
	c, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	s := strings.Replace(string(c), `version: "999"`, "version: "+v, 1)
	s = strings.Replace(s, `appVersion: "999"`, "appVersion: "+tag, 1)
	return dst, os.WriteFile(p, []byte(s), 0o644)
}

// WebhookValues are the values Rancher's system-charts controller installs
// rancher-webhook with on the local cluster (rancher/rancher v2.15.0
// pkg/controllers/dashboard/systemcharts/controller.go getChartsToInstall:
// capi nil, mcm.enabled as the MCM feature, on by default; no priority
// class, customization or rancher-config values here), plus the image tag
// of the release, written to dir/rancher-webhook-values.yaml.
func WebhookValues(dir, tag string) (string, error) {
	b, err := yaml.Marshal(map[string]interface{}{
		"capi":  nil,
		"mcm":   map[string]interface{}{"enabled": true},
		"image": map[string]interface{}{"tag": tag},
	})
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "rancher-webhook-values.yaml")
	return p, os.WriteFile(p, b, 0o600)
}

// WebhookRunner runs the rancher-webhook container as the server built
// from the release, listening on addr's port (CATTLE_PORT, which the
// chart sets to 9443: pkg/server/server.go webhookPortEnvKey; the server
// binds every address at that port), the chart's container port 9443
// mapped to addr for the ServiceProxy. The server makes its own serving
// certificate for rancher-webhook.cattle-system.svc and, once it leads
// its Lease cattle-system/rancher-webhook-leader, registers the
// ValidatingWebhookConfiguration and MutatingWebhookConfiguration
// rancher.cattle.io that call the Service (pkg/server/server.go). Ready
// when /healthz answers 200 over HTTPS, as the chart's probes ask.
func WebhookRunner(b Binaries, addr string) Runner {
	_, port, _ := net.SplitHostPort(addr)
	client := insecureClient(2 * time.Second)
	return Runner{
		Exec: func(p *Pod, c *corev1.Container, argv []string) (string, []string, bool, error) {
			if c.Name != "rancher-webhook" {
				return "", nil, false, fmt.Errorf("unknown container %s in rancher-webhook's Deployment", c.Name)
			}
			return filepath.Join(b.WebhookTree, "bin", "webhook"), nil, true, nil
		},
		Env: func(p *Pod, c *corev1.Container) []string {
			return []string{"CATTLE_PORT=" + port}
		},
		Ready: func(ctx context.Context, p *Pod) bool {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/healthz", nil)
			resp, err := client.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		},
		Port: func(p *Pod, containerPort int32) (string, error) {
			if containerPort != 9443 {
				return "", fmt.Errorf("rancher-webhook has no port %d", containerPort)
			}
			return addr, nil
		},
		Grace:    30 * time.Second,
		Recreate: true, // one address, as its Service
	}
}
