package manager

import (
	"context"
	"log/slog"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/crds"
	"leasetune.io/leasetune/pkg/metrics"
)

// UserAgent identifies the project's requests; the API server also uses it
// as the field manager of writes that name none.
const UserAgent = "leasetune"

// Run runs the project until ctx ends (then it stops gracefully, releases
// its Lease and returns nil) or leadership is lost (an error). Only the
// leader runs the provider and the controllers (components.go), behind
// leader election (leader.go); every replica serves the health and metrics
// endpoints, the UI bundle, the webhook and the APIs (serving.go, ui.go),
// and keeps the index of the fleet Clusters (index.go).
func Run(ctx context.Context, rc *rest.Config, cfg Config, log *slog.Logger) error {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst, rc.UserAgent = cfg.QPS, cfg.Burst, UserAgent
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	hs := newHealth()
	stopServers, err := serve(ctx, cfg, hs, log)
	if err != nil {
		return err
	}
	defer stopServers()
	stopUI, err := serveUI(ctx, cfg, hs, log) // the Rancher UI bundle, on every replica
	if err != nil {
		return err
	}
	defer stopUI()

	if cfg.InstallCRDs {
		// A failure here (the apiserver down during a restart) is no reason
		// to exit: the leader makes the CRD before its components start,
		// retrying while /readyz says why (waitForSettingCRD).
		created, err := crds.EnsureSetting(ctx, apiextclient.NewForConfigOrDie(rc))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("install the Setting CRD; the leader tries again before it starts the controllers", "error", err)
		case created:
			log.Info("installed the Setting CRD (no Rancher here)")
		}
	}

	ix, err := startIndex(ctx, rc, cs)
	if err != nil {
		return err
	}
	if cfg.WebhookAddr != "" {
		wait, err := serveTLS(ctx, rc, cs, cfg, log, judgeWith(ix), hs)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		defer wait()
	}

	components := func(ctx context.Context) error { return runComponents(ctx, rc, cs, cfg, hs, log, ix) }
	if !cfg.LeaderElection {
		metrics.Leader.Set(1) // the only replica: it leads while it runs
		defer metrics.Leader.Set(0)
		return components(ctx)
	}
	lockClient, err := lockClientFor(rc)
	if err != nil {
		return err
	}
	return lead(ctx, lockClient, cfg, log, &hs.ready, components)
}
