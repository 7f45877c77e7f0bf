package framework

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	itfw "leasetune.io/leasetune/tests/integration/framework"
)

// LeasetuneNamespace is where the suite installs leasetune's chart (the
// README's install command).
const LeasetuneNamespace = "leasetune-system"

// LeasetuneServer holds the addresses of leasetune's webhook and UI
// bundle server, the same for every pod (the role of their Services).
type LeasetuneServer struct{ Webhook, UI string }

// NewLeasetuneServer chooses the addresses.
func NewLeasetuneServer() (LeasetuneServer, error) {
	w, err := FreeAddr()
	if err != nil {
		return LeasetuneServer{}, err
	}
	u, err := FreeAddr()
	return LeasetuneServer{Webhook: w, UI: u}, err
}

// UIEndpoint is the base URL Rancher fetches the UI bundle from.
func (s LeasetuneServer) UIEndpoint() string { return "http://" + s.UI }

// LeasetuneChart is the repository's chart.
func LeasetuneChart() (string, error) {
	root, err := itfw.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "charts", "leasetune"), nil
}

// LeasetuneRunner runs the leasetune container of the chart's Deployment
// as the binary built from this repository, with the chart's args; the
// addresses it binds move to loopback (metrics and health per pod, the
// webhook and the UI server at s's: the ServiceProxy sends the webhook
// Service's traffic there, the kube-apiserver reaching it at its
// ClusterIP with the Service's DNS name as the TLS server name, as in a
// cluster), and Rancher reaches the UI bundle at s.UIEndpoint (the chart's
// uiPlugin.endpoint, which Install sets: in a cluster it is the UI
// Service's DNS name, which nothing resolves here). Ready when /readyz
// answers 200, as the chart's readiness probe asks.
func LeasetuneRunner(b Binaries, s LeasetuneServer) Runner {
	client := &http.Client{Timeout: 2 * time.Second}
	return Runner{
		Exec: func(p *Pod, c *corev1.Container, argv []string) (string, []string, bool, error) {
			if c.Name != "leasetune" || len(argv) == 0 || argv[0] != "controller" {
				return "", nil, false, fmt.Errorf("container %s runs %v, not leasetune controller", c.Name, argv)
			}
			m, err := p.Addr("metrics")
			if err != nil {
				return "", nil, false, err
			}
			h, err := p.Addr("health")
			if err != nil {
				return "", nil, false, err
			}
			args := setFlag(argv, "--metrics-addr", m)
			args = setFlag(args, "--health-addr", h)
			args = setFlag(args, "--webhook-addr", s.Webhook)
			args = setFlag(args, "--ui-addr", s.UI)
			return b.Leasetune, args, true, nil
		},
		Ready: func(ctx context.Context, p *Pod) bool {
			h, _ := p.Addr("health")
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h+"/readyz", nil)
			resp, err := client.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		},
		Port: func(p *Pod, port int32) (string, error) {
			for _, c := range p.Template.Spec.Containers {
				for _, cp := range c.Ports {
					if cp.ContainerPort != port {
						continue
					}
					switch cp.Name {
					case "webhook":
						return s.Webhook, nil
					case "ui":
						return s.UI, nil
					case "metrics", "health":
						return p.Addr(cp.Name)
					}
				}
			}
			return "", fmt.Errorf("leasetune has no port %d", port)
		},
		Grace:    30 * time.Second,
		Recreate: true, // the webhook's and the UI's addresses are one each, as their Services
	}
}
