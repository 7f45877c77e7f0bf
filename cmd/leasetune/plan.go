package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/plan"
	"leasetune.io/leasetune/pkg/rancher"
)

// planFlags are the flags plan and cleanup share with controller.
type planFlags struct {
	kf             kubeFlags
	opts           plan.Options
	channel        string
	rancherVersion string
}

func (p *planFlags) add(cmd *cobra.Command) {
	p.kf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&p.opts.Namespace, "namespace", defaultNamespace(), "leasetune's namespace (its state ConfigMaps)")
	f.StringVar(&p.opts.FleetNamespace, "fleet-namespace", fleet.DefaultNamespace, "the Fleet system namespace")
	f.StringVar(&p.opts.RancherNamespace, "rancher-namespace", "cattle-system", "the namespace of rancher-config")
	f.StringVar(&p.channel, "fleet-agent-channel", "auto", "as for controller")
	f.StringVar(&p.opts.RancherDeployment, "rancher-deployment", rancher.DefaultDeployment, "as for controller")
	f.StringVar(&p.rancherVersion, "rancher-version", "auto", "as for controller")
}

// complete parses --rancher-version and --fleet-agent-channel into opts.
func (p *planFlags) complete() error {
	var err error
	if p.opts.RancherVersion, err = parseRancherVersion(p.rancherVersion); err != nil {
		return err
	}
	if p.channel != "auto" {
		ch, err := fleet.ParseChannel(p.channel)
		if err != nil {
			return &usageError{fmt.Errorf("--fleet-agent-channel: %w", err)}
		}
		p.opts.ChannelOverride = ch
	}
	return nil
}

// clients returns the clients of the kubeconfig (a usageError when there
// is no usable one).
func (p *planFlags) clients() (kubernetes.Interface, dynamic.Interface, error) {
	rc, err := p.kf.restConfig()
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	return cs, dyn, err
}

// planOptions are the options of `leasetune plan`.
type planOptions struct {
	pf     planFlags
	set    []string
	output string
	streams
}

// newPlanCommand returns `leasetune plan`.
func newPlanCommand() *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print every write the controller would make now, or after --set, and which agents would restart, without writing",
		Long: `Print every write the controllers would make now, and what each restarts,
with the totals and the lock requests per hour, without writing anything.
With --set NAME=VALUE (repeatable; a name's last value counts), print what
the proposed values would write and restart once stored: each component's
values are written in an order the webhook accepts step by step, as the
Leader election page writes them. Values no order takes are refused whole,
said first, left out of the plan, and plan exits 1.`,
		Args: cobra.NoArgs,
		RunE: runOptions(o),
	}
	o.pf.add(cmd)
	cmd.Flags().StringArrayVar(&o.set, "set", nil, "a proposed setting value NAME=VALUE (repeatable; stored in an order the webhook accepts)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json")
	return cmd
}

// Complete parses --set, --rancher-version and --fleet-agent-channel.
func (o *planOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.streams = streamsOf(cmd)
	for _, a := range o.set {
		as, err := plan.ParseAssignment(a)
		if err != nil {
			return fmt.Errorf("--set %w", err)
		}
		o.pf.opts.Set = append(o.pf.opts.Set, as)
	}
	return o.pf.complete()
}

// Validate checks --output.
func (o *planOptions) Validate() error { return validOutput(o.output) }

// Run reads the installation, computes the plan (plan.Compute) and prints
// it.
func (o *planOptions) Run(ctx context.Context) error {
	cs, dyn, err := o.pf.clients()
	if err != nil {
		return err
	}
	r, err := plan.Compute(ctx, cs, dyn, o.pf.opts)
	if err != nil {
		return err
	}
	if o.output == "json" {
		b, err := r.JSON()
		if err != nil {
			return err
		}
		if _, err = fmt.Fprintln(o.out, string(b)); err != nil {
			return err
		}
	} else {
		r.Print(o.out)
	}
	if len(r.Refused) > 0 {
		// A proposal the webhook would refuse: the plan is of the rest.
		return &exitError{code: exitFailed}
	}
	return nil
}

// validOutput checks an --output value: text or json.
func validOutput(output string) error {
	if output != "text" && output != "json" {
		return fmt.Errorf("--output %q: want text or json", output)
	}
	return nil
}

// cleanupOptions are the options of `leasetune cleanup`.
type cleanupOptions struct {
	pf         planFlags
	yes, force bool
	streams
}

// newCleanupCommand returns `leasetune cleanup`.
func newCleanupCommand() *cobra.Command {
	o := &cleanupOptions{}
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove the cluster agent env entries and the state leasetune wrote (lists first; --yes to do it)",
		Long: `Remove what leasetune wrote to the downstream clusters (the CATTLE_ELECTION_*
entries its record shows, and its annotations), its state ConfigMaps, its
webhook Secret, its Lease and its ElectionStatus. Without --yes it only lists
them.
Stop the controller first (uninstall the chart), or it writes them again; the
chart's own objects (the UIPlugin of the Rancher UI extension among them) go
with helm uninstall. The
Fleet Deployments, rancher-config and the Rancher Deployment keep their values:
see the listing.`,
		Args: cobra.NoArgs,
		RunE: runOptions(o),
	}
	o.pf.add(cmd)
	cmd.Flags().BoolVar(&o.yes, "yes", false, "remove, after listing")
	cmd.Flags().BoolVar(&o.force, "force", false, "with --yes: remove even while a controller holds leasetune's Lease")
	cmd.Flags().StringVar(&o.pf.opts.LeaseName, "lease-name", own.Lease, "the controller's Lease (as its --lease-name): checked before removing, and removed")
	return cmd
}

// Complete parses --rancher-version and --fleet-agent-channel.
func (o *cleanupOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.streams = streamsOf(cmd)
	return o.pf.complete()
}

// Validate accepts every combination: --force without --yes lists, as
// without it.
func (o *cleanupOptions) Validate() error { return nil }

// Run lists what leasetune wrote and, with --yes, removes it, unless a
// controller holds the Lease (exit 1) and --force is not given.
func (o *cleanupOptions) Run(ctx context.Context) error {
	cs, dyn, err := o.pf.clients()
	if err != nil {
		return err
	}
	r, err := plan.Compute(ctx, cs, dyn, o.pf.opts)
	if err != nil {
		return err
	}
	c, err := r.Cleanup(ctx, cs, dyn, o.pf.opts)
	if err != nil {
		return err
	}
	if o.yes && !o.force {
		if holder, held := leaseHeld(ctx, cs, o.pf.opts.Namespace, o.pf.opts.Lease()); held {
			fmt.Fprintf(o.errOut, "cleanup refused: %s holds leasetune's Lease %s/%s, so a controller is running and would write everything again at once; uninstall the chart (or stop the controller) first, or pass --force\n", holder, o.pf.opts.Namespace, o.pf.opts.Lease())
			return &exitError{code: exitFailed}
		}
	}
	if !o.yes {
		c.Print(o.out, false)
		fmt.Fprintln(o.out, "\nNothing was removed: run again with --yes to remove the above.")
		return nil
	}
	if err := c.Apply(ctx, cs, dyn, o.pf.opts); err != nil {
		return err
	}
	c.Print(o.out, true)
	return nil
}

// leaseHeld reports whether leasetune's Lease in ns is held by someone now:
// a holder whose renewal is younger than the lease duration.
func leaseHeld(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, bool) {
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", false
	}
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return *l.Spec.HolderIdentity, true
	}
	expires := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return *l.Spec.HolderIdentity, time.Now().Before(expires)
}
