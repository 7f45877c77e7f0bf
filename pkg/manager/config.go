package manager

import (
	"fmt"
	"net"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
)

// Config is everything Run needs besides the REST config.
type Config struct {
	// Namespace is the project's own namespace: its Lease and state
	// ConfigMaps live there.
	Namespace string
	// FleetNamespace is the Fleet system namespace (cattle-fleet-system).
	FleetNamespace string
	// RancherNamespace holds rancher-config (cattle-system).
	RancherNamespace string
	// RancherDeployment names the Rancher Deployment in RancherNamespace,
	// whose image tells the Rancher version; RancherVersion, when known,
	// replaces that detection.
	RancherDeployment string
	RancherVersion    rancher.Version
	// RancherEnv keeps the CATTLE_ELECTION_* entries of the Rancher
	// Deployment's rancher container on the rancher-leader-election-*
	// settings (pkg/controllers/rancherenv); false leaves it alone.
	RancherEnv bool
	// ChannelOverride replaces the Fleet agent channel detection when set.
	ChannelOverride fleet.AgentChannel
	// Settle is how long a component's settings must be unchanged before a
	// new triple takes effect (settings.DefaultSettle); 0: at once.
	Settle time.Duration
	// InstallCRDs creates the Setting CRD when it is missing.
	InstallCRDs bool

	// QPS and Burst configure the API client; thousands of clusters need
	// far more than client-go's default 5/10.
	QPS   float32
	Burst int
	// Workers is the number of concurrent agentenv syncs.
	Workers int
	// AgentRolloutPerMinute paces the cluster writes; 0 is unpaced.
	AgentRolloutPerMinute float64

	// LeaderElection enables the Lease lock LeaseName; Identity names this
	// replica (the pod name). Timings is the lock's own triple.
	LeaderElection bool
	LeaseName      string
	Identity       string
	Timings        election.Timings

	// HealthAddr serves /healthz and /readyz; MetricsAddr serves /metrics.
	// Empty disables a server.
	HealthAddr  string
	MetricsAddr string

	// WebhookAddr serves the admission webhook and the /v3/settings API
	// over TLS on every replica; empty disables them.
	WebhookAddr string
	// WebhookService is the Service in front of WebhookAddr; the serving
	// certificate names <service>.<namespace>.svc.
	WebhookService string
	// WebhookHosts are more names or IPs for the serving certificate.
	WebhookHosts []string
	// WebhookConfigName is the ValidatingWebhookConfiguration whose
	// caBundle is kept current.
	WebhookConfigName string
	// CertCheckInterval caps the backoff between failed looks at the
	// webhook Secret and configuration (default 30s); at rest they are
	// watched, not reread.
	CertCheckInterval time.Duration
	// ServiceAccount is the project's own user name, whose writes the
	// webhook never refuses.
	ServiceAccount string

	// LookupEnv reads the settings' env overrides; os.LookupEnv when nil.
	LookupEnv func(string) (string, bool)

	// UI configures the Rancher UI extension's bundle server (ui.go).
	UI UIConfig

	// Listen opens the socket of each server (HealthAddr, MetricsAddr,
	// WebhookAddr, UI.Addr; network "tcp"); net.Listen when nil. Tests pass one that
	// keeps the listeners, to close one and see /healthz report that server
	// stopped.
	Listen func(network, addr string) (net.Listener, error)
}

// listen opens addr with cfg.Listen, else net.Listen.
func (cfg Config) listen(addr string) (net.Listener, error) {
	if cfg.Listen != nil {
		return cfg.Listen("tcp", addr)
	}
	return net.Listen("tcp", addr)
}

// DefaultTimings is the project's own lock triple when no
// CATTLE_ELECTION_* env var is set: Fleet's 30s/25s/10s, a fifth of the
// lock traffic of wrangler's 45s/30s/2s.
var DefaultTimings = election.FleetDefaults

// TimingsFromEnv reads the project's own lock triple from CATTLE_ELECTION_*
// in env (os.Environ() form), as every wrangler process does, with the same
// validation as the settings. None set: DefaultTimings. Some set, an
// unparsable value or an invalid triple: an error naming the variable, the
// value and the rule.
func TimingsFromEnv(environ []string) (election.Timings, error) {
	var vars []corev1.EnvVar
	for _, kv := range environ {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				vars = append(vars, corev1.EnvVar{Name: kv[:i], Value: kv[i+1:]})
				break
			}
		}
	}
	t, found, err := election.CattlePrefix.FromEnv(vars)
	if err != nil {
		return t, fmt.Errorf("leader election: %w", err)
	}
	if !found {
		return DefaultTimings, nil
	}
	if err := t.Validate(); err != nil {
		return t, fmt.Errorf("leader election from CATTLE_ELECTION_*: %w", err)
	}
	return t, nil
}

// DefaultIdentity is the pod name (HOSTNAME), else the host name, with the
// process id, so two processes on one host never share an identity.
func DefaultIdentity() string {
	h, _ := os.Hostname()
	if p := os.Getenv("POD_NAME"); p != "" {
		h = p
	}
	return fmt.Sprintf("%s_%d_%d", h, os.Getpid(), time.Now().UnixNano()%100000)
}

// lookupEnv is cfg.LookupEnv, or os.LookupEnv when nil: how the settings
// Provider reads the settings' env overrides.
func (cfg Config) lookupEnv() func(string) (string, bool) {
	if cfg.LookupEnv == nil {
		return os.LookupEnv
	}
	return cfg.LookupEnv
}
