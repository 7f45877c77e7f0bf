package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// kubeFlags are the flags every command that talks to a cluster shares.
type kubeFlags struct {
	kubeconfig string
	qps        float32
	burst      int
}

func (k *kubeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else the in-cluster config, else ~/.kube/config)")
	cmd.Flags().Float32Var(&k.qps, "kube-api-qps", 100, "requests per second to the kube-apiserver (client-go's default 5 is far too low for thousands of clusters)")
	cmd.Flags().IntVar(&k.burst, "kube-api-burst", 200, "request burst to the kube-apiserver")
}

// restConfig loads the REST config: --kubeconfig, else $KUBECONFIG, else
// the in-cluster config, else the default kubeconfig file.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case k.kubeconfig != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	case os.Getenv("KUBECONFIG") != "":
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	default:
		cfg, err = rest.InClusterConfig()
		if err != nil {
			cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
		}
	}
	if clientcmd.IsEmptyConfig(err) {
		return nil, &usageError{errors.New("no kubeconfig: give --kubeconfig FILE, set KUBECONFIG, or have ~/.kube/config (in a pod, its ServiceAccount is used)")}
	}
	if err != nil {
		return nil, &usageError{fmt.Errorf("no usable kubeconfig: %w", err)}
	}
	cfg.QPS, cfg.Burst = k.qps, k.burst
	return cfg, nil
}

// defaultNamespace is the pod's namespace (POD_NAMESPACE), else leasetune-system.
func defaultNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "leasetune-system"
}

// controllerOptions are the options of `leasetune controller`.
type controllerOptions struct {
	kf                  kubeFlags
	cfg                 manager.Config
	channel             string
	rancherVersion      string
	logFormat, logLevel string
	noLeaderElection    bool
	serviceAccount      string

	log *slog.Logger // from logFormat and logLevel (Complete)
}

// newControllerCommand returns `leasetune controller`: the settings
// provider and both controllers, behind leader election.
func newControllerCommand() *cobra.Command {
	o := &controllerOptions{}
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the settings provider and the controllers that propagate the timings",
		Long: `Run the settings provider and the fleetsettings, agentenv and rancherenv controllers.

Only the replica holding the Lease <namespace>/<lease-name> writes. Its own
timings come from CATTLE_ELECTION_LEASE_DURATION, _RENEW_DEADLINE and
_RETRY_PERIOD, validated like the settings (default 30s/25s/10s). SIGTERM or
SIGINT stops it gracefully: the controllers stop, the Lease is released, and
it exits 0.`,
		Args: cobra.NoArgs,
		RunE: runOptions(o),
	}
	o.addFlags(cmd)
	return cmd
}

func (o *controllerOptions) addFlags(cmd *cobra.Command) {
	o.kf.add(cmd)
	cfg := &o.cfg
	f := cmd.Flags()
	f.StringVar(&cfg.Namespace, "namespace", defaultNamespace(), "the project's namespace: its Lease and state ConfigMaps ($POD_NAMESPACE when set)")
	f.StringVar(&cfg.FleetNamespace, "fleet-namespace", fleet.DefaultNamespace, "the Fleet system namespace")
	f.StringVar(&cfg.RancherNamespace, "rancher-namespace", "cattle-system", "the namespace of Rancher's rancher-config ConfigMap")
	f.StringVar(&o.channel, "fleet-agent-channel", "auto", "how fleet-agents get their timings: auto (detect), agentmanagement (Fleet v0.13+), fixed-v0.12, cluster-env-v0.9 (v0.9.1+), fixed-v0.9.0, none (v0.10-v0.11)")
	f.DurationVar(&cfg.Settle, "settle", settings.DefaultSettle, "how long a component's three settings must be unchanged before a new triple takes effect, so that editing them one after another rolls once (0: at once)")
	f.StringVar(&cfg.RancherDeployment, "rancher-deployment", rancher.DefaultDeployment, "the Rancher Deployment in --rancher-namespace: its image tag tells the Rancher version, and its rancher container gets the rancher-leader-election-* timings")
	f.StringVar(&o.rancherVersion, "rancher-version", "auto", "the Rancher version (vX.Y.Z), instead of reading it from the Rancher Deployment's image: it decides which cluster object is the source of an imported cluster's agent env")
	f.BoolVar(&cfg.RancherEnv, "rancher-env", true, "keep CATTLE_ELECTION_* of the Rancher Deployment's rancher container on the rancher-leader-election-* settings (its lock kube-system/cattle-controllers; Rancher 2.8.3+; a change rolls every Rancher replica); false: leave it alone")
	f.BoolVar(&cfg.InstallCRDs, "install-crds", true, "create the Setting CRD when it is missing (never replaces Rancher's)")
	f.IntVar(&cfg.Workers, "workers", 4, "concurrent cluster syncs")
	f.Float64Var(&cfg.AgentRolloutPerMinute, "agent-rollout-per-minute", 0, "at most this many cluster agent-env writes a minute, to spread agent restarts (0: unpaced)")
	f.BoolVar(&o.noLeaderElection, "no-leader-election", false, "run without a Lease (one replica only)")
	f.StringVar(&cfg.LeaseName, "lease-name", own.Lease, "name of the Lease")
	f.StringVar(&cfg.Identity, "identity", "", "this replica's identity in the Lease (default: $POD_NAME or the host name, with the pid)")
	f.StringVar(&cfg.HealthAddr, "health-addr", ":8081", "address of /healthz and /readyz (empty: off)")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", ":8080", "address of /metrics (empty: off)")
	f.StringVar(&cfg.WebhookAddr, "webhook-addr", ":9443", "HTTPS address of the admission webhook and the /v3/settings API, on every replica (empty: off)")
	f.StringVar(&cfg.WebhookService, "webhook-service", "leasetune-webhook", "the Service in front of --webhook-addr (named in the serving certificate)")
	f.StringSliceVar(&cfg.WebhookHosts, "webhook-host", nil, "more DNS names or IPs for the serving certificate (repeatable)")
	f.StringVar(&cfg.WebhookConfigName, "webhook-config", "leasetune", "the ValidatingWebhookConfiguration whose caBundle leasetune keeps current")
	f.StringVar(&o.serviceAccount, "service-account", "leasetune", "leasetune's own service account (in --namespace), whose writes the webhook never refuses")
	f.StringVar(&cfg.UI.Addr, "ui-addr", "", "plain-HTTP address serving the Rancher UI extension's bundle at /uiplugin/leasetune/<version>/ and nothing else, where Rancher fetches it (empty: off; the chart sets :8082, and its UIPlugin points there)")
	f.StringVar(&o.logFormat, "log-format", "json", "json or text")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
}

// Complete makes the logger (routing the libraries' logs into it), parses
// --rancher-version and --fleet-agent-channel, and reads the controller's
// own lock triple from CATTLE_ELECTION_* (an invalid one is logged and
// exits 1: it is the environment's, not a flag's).
func (o *controllerOptions) Complete(_ *cobra.Command, _ []string) error {
	var err error
	if o.log, err = newLogger(o.logFormat, o.logLevel); err != nil {
		return err
	}
	cfg := &o.cfg
	if cfg.RancherVersion, err = parseRancherVersion(o.rancherVersion); err != nil {
		return err
	}
	if o.channel != "auto" {
		ch, err := fleet.ParseChannel(o.channel)
		if err != nil {
			return &usageError{fmt.Errorf("--fleet-agent-channel: %w", err)}
		}
		cfg.ChannelOverride = ch
	}
	cfg.LeaderElection = !o.noLeaderElection
	cfg.ServiceAccount = "system:serviceaccount:" + cfg.Namespace + ":" + o.serviceAccount
	if cfg.Identity == "" {
		cfg.Identity = manager.DefaultIdentity()
	}
	if cfg.Timings, err = manager.TimingsFromEnv(os.Environ()); err != nil {
		o.log.Error("refusing to start", "error", err.Error())
		return &exitError{code: exitFailed}
	}
	cfg.QPS, cfg.Burst = o.kf.qps, o.kf.burst
	return nil
}

// Validate accepts what Complete parsed: its checks are there.
func (o *controllerOptions) Validate() error { return nil }

// Run runs manager.Run until ctx ends (exit 0) or it fails (logged, exit
// 1).
func (o *controllerOptions) Run(ctx context.Context) error {
	rc, err := o.kf.restConfig()
	if err != nil {
		return err
	}
	cfg := o.cfg
	o.log.Info("starting", "namespace", cfg.Namespace, "fleetNamespace", cfg.FleetNamespace,
		"identity", cfg.Identity, "leaderElection", cfg.LeaderElection)
	if err := manager.Run(ctx, rc, cfg, o.log); err != nil {
		o.log.Error("stopped", "error", err.Error())
		return &exitError{code: exitFailed}
	}
	return nil
}

// parseRancherVersion reads --rancher-version: "auto" (detect) or vX.Y.Z.
func parseRancherVersion(s string) (rancher.Version, error) {
	if s == "auto" || s == "" {
		return rancher.Version{}, nil
	}
	v, ok := rancher.Parse(s)
	if !ok {
		return v, &usageError{fmt.Errorf("--rancher-version %q: want auto or a release version such as v2.11.3", s)}
	}
	return v, nil
}
