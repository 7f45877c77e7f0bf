package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/fleet"
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

func (p *planFlags) clients() (kubernetes.Interface, dynamic.Interface, error) {
	var err error
	if p.opts.RancherVersion, err = parseRancherVersion(p.rancherVersion); err != nil {
		return nil, nil, err
	}
	if p.channel != "auto" {
		ch, err := fleet.ParseChannel(p.channel)
		if err != nil {
			return nil, nil, &usageError{fmt.Errorf("--fleet-agent-channel: %w", err)}
		}
		p.opts.ChannelOverride = ch
	}
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

// newPlanCommand returns `leasetune plan`.
func newPlanCommand() *cobra.Command {
	var pf planFlags
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print every write the controller would make now, and which agents would restart, without writing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, dyn, err := pf.clients()
			if err != nil {
				return err
			}
			r, err := plan.Compute(context.Background(), cs, dyn, pf.opts)
			if err != nil {
				return err
			}
			r.Print(cmd.OutOrStdout())
			return nil
		},
	}
	pf.add(cmd)
	return cmd
}

// newCleanupCommand returns `leasetune cleanup`.
func newCleanupCommand() *cobra.Command {
	var pf planFlags
	var yes bool
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove the cluster agent env entries and the state leasetune wrote (lists first; --yes to do it)",
		Long: `Remove what leasetune wrote to the downstream clusters (the CATTLE_ELECTION_*
entries its record shows, and its annotations) and its state ConfigMaps.
Without --yes it only lists them. Stop the controller first (uninstall the
chart), or it writes them again. The Fleet Deployments and rancher-config
keep their values: see the listing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, dyn, err := pf.clients()
			if err != nil {
				return err
			}
			ctx := context.Background()
			r, err := plan.Compute(ctx, cs, dyn, pf.opts)
			if err != nil {
				return err
			}
			c, err := r.Cleanup(ctx, cs, pf.opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !yes {
				c.Print(out, false)
				fmt.Fprintln(out, "\nNothing was removed: run again with --yes to remove the above.")
				return nil
			}
			if err := c.Apply(ctx, cs, dyn, pf.opts); err != nil {
				return err
			}
			c.Print(out, true)
			return nil
		},
	}
	pf.add(cmd)
	cmd.Flags().BoolVar(&yes, "yes", false, "remove, after listing")
	return cmd
}
