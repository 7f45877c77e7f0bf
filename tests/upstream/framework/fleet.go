package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Where Fleet runs beside Rancher: rancher/rancher v2.12.12
// pkg/fleet/const.go (ReleaseNamespace cattle-fleet-system,
// ReleaseLocalNamespace cattle-fleet-local-system, ClustersLocalNamespace
// fleet-local, ClustersDefaultNamespace fleet-default).
const (
	FleetNamespace      = "cattle-fleet-system"
	FleetLocalNamespace = "cattle-fleet-local-system"
)

// The Deployments Fleet's chart renders (charts/fleet/templates at
// v0.13.14 and v0.14.10: deployment.yaml, deployment_gitjob.yaml,
// deployment_helmops.yaml) and the local cluster's agent, which
// fleet-agentmanagement deploys (agentmanagement/agent/manifest.go,
// name fleet-agent).
var FleetDeployments = []string{"fleet-controller", "gitjob", "helmops"}

// FleetCRDs returns the path of Fleet release tag's CRDs
// (charts/fleet-crd/templates/crds.yaml of its tree).
func FleetCRDs(b Binaries, tag string) string {
	return filepath.Join(b.FleetTree(tag), "charts", "fleet-crd", "templates", "crds.yaml")
}

// FleetChart returns the path of Fleet release tag's chart (charts/fleet).
func FleetChart(b Binaries, tag string) string {
	return filepath.Join(b.FleetTree(tag), "charts", "fleet")
}

// RancherFleetValues writes to dir the values Rancher installs Fleet's
// chart with and returns the file's path: rancher/rancher v2.12.12
// pkg/controllers/dashboard/fleetcharts/controller.go onSetting sets
// agentTLSMode (setting agent-tls-mode), apiServerURL (server-url),
// apiServerCA (cacerts), global.cattle.systemDefaultRegistry,
// bootstrap.enabled false with agentNamespace cattle-fleet-local-system,
// gitops.enabled (feature gitops), and merges the fleet key of
// rancher-config on top (none here). Rancher cannot install the chart here
// (no chart repository), so the test does, with those values. The image
// tags are the release's, as in the released chart (the tree's
// values.yaml says dev), since leasetune reads Fleet's version from them.
func RancherFleetValues(dir, tag string, settings map[string]string) (string, error) {
	v := map[string]interface{}{
		"agentTLSMode": settings["agent-tls-mode"],
		"apiServerURL": settings["server-url"],
		"apiServerCA":  settings["cacerts"],
		"global":       map[string]interface{}{"cattle": map[string]interface{}{"systemDefaultRegistry": settings["system-default-registry"]}},
		"bootstrap":    map[string]interface{}{"enabled": false, "agentNamespace": FleetLocalNamespace},
		"gitops":       map[string]interface{}{"enabled": true},
		"image":        map[string]interface{}{"tag": tag},
		"agentImage":   map[string]interface{}{"tag": tag},
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "fleet-values-"+tag+".yaml")
	return p, os.WriteFile(p, b, 0o600)
}

// FleetRunner runs the containers of Fleet release tag's Deployments
// (fleet-controller with its fleet-cleanup and fleet-agentmanagement
// containers, gitjob, helmops, and fleet-agent) as the fleetcontroller and
// fleetagent binaries of that release, with the container's own command
// and args. Each pod has its own network namespace in a cluster; here
// they share loopback, so the ports the programs bind by default
// (:8080, :8081, localhost:6060) move to free loopback addresses through
// the programs' own knobs (Fleet at both tags: internal/cmd/controller/
// root.go FLEET_METRICS_BIND_ADDRESS and FLEET_HEALTHPROBE_BIND_ADDRESS;
// gitops/operator.go --metrics-bind-address and --listen; helmops/
// operator.go --metrics-bind-address; agent/operator.go
// FLEET_AGENT_METRICS_BIND_ADDRESS and FLEET_AGENT_PROBE_BIND_ADDRESS,
// agent/root.go FLEET_AGENT_PPROF_DISABLED). Those are added after the
// template's env and args, so the template is what it is.
func FleetRunner(b Binaries, tag string) Runner {
	return Runner{
		Exec: func(p *Pod, c *corev1.Container, argv []string) (string, []string, bool, error) {
			if len(argv) == 0 {
				return "", nil, false, fmt.Errorf("container %s has no command or args", c.Name)
			}
			var path string
			switch argv[0] {
			case "fleetcontroller":
				path = b.FleetController(tag)
			case "fleetagent":
				path = b.FleetAgent(tag)
			default:
				return "", nil, false, fmt.Errorf("container %s runs %q, not a Fleet program", c.Name, argv[0])
			}
			args := append([]string(nil), argv[1:]...)
			if len(args) > 0 && (args[0] == "gitjob" || args[0] == "helmops") {
				m, err := p.Addr(c.Name + "-metrics")
				if err != nil {
					return "", nil, false, err
				}
				args = setFlag(args, "--metrics-bind-address", m)
				if args[0] == "gitjob" {
					l, err := p.Addr(c.Name + "-listen")
					if err != nil {
						return "", nil, false, err
					}
					args = setFlag(args, "--listen", l)
				}
			}
			return path, args, true, nil
		},
		Env: func(p *Pod, c *corev1.Container) []string {
			addr := func(n string) string { a, _ := p.Addr(c.Name + "-" + n); return a }
			argv := append(append([]string(nil), c.Command...), c.Args...)
			switch {
			case len(argv) > 0 && argv[0] == "fleetagent":
				return []string{"FLEET_AGENT_METRICS_BIND_ADDRESS=" + addr("metrics"), "FLEET_AGENT_PROBE_BIND_ADDRESS=" + addr("probe"), "FLEET_AGENT_PPROF_DISABLED=true"}
			case len(argv) == 1 || (len(argv) > 1 && argv[1][0] == '-'): // the fleet-controller container
				return []string{"FLEET_METRICS_BIND_ADDRESS=" + addr("metrics"), "FLEET_HEALTHPROBE_BIND_ADDRESS=" + addr("probe")}
			}
			return nil
		},
		Grace: 10 * time.Second,
	}
}
