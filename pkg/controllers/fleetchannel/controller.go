// Package fleetchannel detects how the running Fleet gives its agents their
// leader-election timings (the agent channel, fleet.DetectChannel, from the
// fleet-controller Deployment), records it in leasetune's ConfigMap
// (fleetenv.ChannelConfigMapName) so that a restart or a new leader starts
// from it, and offers it to the controllers that write by it
// (fleet.ChannelSource).
// The flag --fleet-agent-channel replaces detection.
//
// Its sync has the project's controller shape: gather (the Deployment from
// the cache, the channel recorded), decide (fleet.DetectChannel, pure), one
// write (the ConfigMap, only when the channel changes), then report (log,
// metrics, the listeners).
package fleetchannel

import (
	"context"
	"log/slog"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/own"
)

// Options configures Load.
type Options struct {
	// Namespace is the Fleet system namespace (cattle-fleet-system).
	Namespace string
	// StateNamespace is the project's own namespace, where the channel is
	// recorded.
	StateNamespace string
	// Override, when set, replaces detection (--fleet-agent-channel).
	Override fleet.AgentChannel
	// Client writes the record.
	Client kubernetes.Interface
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
}

// Controller detects and records the Fleet agent channel. It implements
// fleet.ChannelSource.
type Controller struct {
	*record
	namespace string
	log       *slog.Logger
}

// Load returns the controller with the recorded channel loaded. It
// registers no handler: its Sync runs first in each sync of the
// fleet-controller Deployment by the controller that writes it
// (fleetsettings.Options.Detect), so that it sees each version of the
// Deployment before leasetune's write changes its managed fields.
func Load(ctx context.Context, opts Options) (*Controller, error) {
	c := New(opts)
	if err := c.load(ctx); err != nil {
		return nil, err
	}
	if ch, ok := c.Channel(); ok {
		setChannelMetric(ch)
		c.log.Info("fleet agent channel", "channel", ch, "override", opts.Override != "")
	}
	return c, nil
}

// New returns the controller without loading the record (for tests).
func New(opts Options) *Controller {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Controller{
		record:    &record{client: opts.Client.CoreV1(), namespace: opts.StateNamespace, override: opts.Override},
		namespace: opts.Namespace,
		log:       opts.Log.With("controller", "fleetchannel"),
	}
}

// Sync detects the channel from the fleet-controller Deployment d and
// records it when it changed.
func (c *Controller) Sync(ctx context.Context, d *appsv1.Deployment) error {
	if d == nil || d.Namespace != c.namespace || d.Name != fleet.ControllerDeployment {
		return nil
	}
	det := fleet.DetectChannel(d, own.FieldManager, c.recorded())
	changed, err := c.set(ctx, det)
	if changed {
		ch, evidence, _ := c.Evidence()
		c.log.Info("fleet agent channel detected", "channel", ch, "evidence", evidence,
			"certain", det.Certain, "override", c.override)
	}
	return err
}
