package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/locks"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/recommend"
	"leasetune.io/leasetune/pkg/settings"
)

// recommendOptions are the options of `leasetune recommend`.
type recommendOptions struct {
	maxFailover     onceString
	attempts        decimalInt
	followers       decimalInt
	clusters        decimalInt
	controllerLocks decimalInt
	alternatives    decimalInt
	beforeV030      bool
	v030            bool
	output          string
	kf              kubeFlags
	ns              string
	rancherReplicas decimalInt
	rancherNS       string
	rancherDep      string

	target recommend.Target // from the flags (Complete)
	streams
}

// newRecommendCommand returns `leasetune recommend`.
func newRecommendCommand() *cobra.Command {
	o := &recommendOptions{
		attempts:        decimalInt{value: election.MinRenewAttempts},
		controllerLocks: decimalInt{value: recommend.DefaultControllerLocks},
		alternatives:    decimalInt{value: 5},
	}
	cmd := &cobra.Command{
		Use:   "recommend --max-failover D [--min-renew-attempts N] [--followers N] [--clusters N]",
		Short: "Recommend the cheapest valid triple whose worst-case failover stays within a bound",
		Long: `Print the valid triple, in whole seconds, with the fewest lock requests per hour
whose worst-case failover after the leader dies (leaseDuration + 4.4 ×
retryPeriod) is at most --max-failover and whose renewDeadline leaves the
leader at least --min-renew-attempts renewal attempts (renewDeadline /
retryPeriod, at least 2). The fewest requests is the longest retry period;
of the triples with that retry period, the one with the longest renewDeadline
(a leader survives a kube-apiserver stall of up to renewDeadline), and the
shortest leaseDuration above it. Then a table of alternatives on the
trade-off curve: shorter retry periods, faster failover, more requests.

With --clusters N, also the installation's lock requests per hour (N
fleet-agents, --controller-locks Fleet controller locks and, with Rancher,
its cattle-controllers lock among --rancher-replicas candidates) with the
triples in effect (the settings' defaults, or the Settings read with
--kubeconfig) and with the recommended triple on every lock. With
--kubeconfig the Rancher replicas are read from the Rancher Deployment
unless --rancher-replicas says; without, Rancher's lock is counted only
when --rancher-replicas is given.

Every triple printed passes 'leasetune check'. Exit status: 0, 1 no valid
triple meets the target or the cluster cannot be read, 2 bad usage.`,
		Example: "  leasetune recommend --max-failover 60s --clusters 500",
		Args:    cobra.NoArgs,
		RunE:    runOptions(o),
	}
	f := cmd.Flags()
	f.Var(&o.maxFailover, "max-failover", "the longest worst-case failover allowed, e.g. 60s")
	f.Var(&o.attempts, "min-renew-attempts", "the least renewDeadline / retryPeriod (at least 2)")
	f.Var(&o.followers, "followers", "followers (candidates that are not the leader) per lock, for the request counts")
	f.Var(&o.clusters, "clusters", "downstream clusters (one fleet-agent lock each): print the installation's lock requests per hour")
	f.Var(&o.controllerLocks, "controller-locks", "Fleet controller locks (Fleet v0.14: fleet-controller, agentmanagement, cleanup, gitops, helmops)")
	f.Var(&o.alternatives, "alternatives", "rows in the table of alternatives")
	f.Var(&o.rancherReplicas, "rancher-replicas", "with --clusters: Rancher's replicas, the candidates of its cattle-controllers lock (0: leave it out; default with --kubeconfig: the Rancher Deployment's)")
	f.StringVar(&o.rancherNS, "rancher-namespace", rancher.DefaultNamespace, "with --kubeconfig: the Rancher Deployment's namespace")
	f.StringVar(&o.rancherDep, "rancher-deployment", rancher.DefaultDeployment, "with --kubeconfig: the Rancher Deployment's name")
	f.BoolVar(&o.beforeV030, "client-go-before-v030", false, "count requests as client-go before v0.30 makes them (the leader gets and updates), as Rancher v2.8 and Fleet v0.9 did (default: v0.30+, the leader only updates, as every supported release)")
	f.BoolVar(&o.v030, "client-go-v030", true, "count requests as client-go v0.30+ makes them")
	_ = f.MarkDeprecated("client-go-v030", "v0.30+ is the default; --client-go-before-v030 counts the older behaviour")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.StringVar(&o.kf.kubeconfig, "kubeconfig", "", "with --clusters: read the triples in effect from this cluster's Settings (default: the settings' defaults)")
	f.StringVar(&o.ns, "namespace", defaultNamespace(), "leasetune's namespace (its state ConfigMap), with --kubeconfig")
	return cmd
}

// Complete reads the target from --max-failover, --min-renew-attempts,
// --followers and --client-go-before-v030.
func (o *recommendOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.streams = streamsOf(cmd)
	if !o.maxFailover.set {
		return errors.New("flag --max-failover is required")
	}
	d, err := time.ParseDuration(o.maxFailover.value)
	if err != nil {
		return fmt.Errorf("flag --max-failover: %w", err)
	}
	o.target = recommend.Target{MaxFailover: d, MinRenewAttempts: o.attempts.value, Followers: o.followers.value}
	o.target.Behaviour = election.Supported
	// --client-go-v030=false meant the old behaviour before it was the
	// default; it still does, and contradicting --client-go-before-v030
	// is a usage error.
	v030Set := cmd.Flags().Changed("client-go-v030")
	if o.beforeV030 && v030Set && o.v030 {
		return &usageError{errors.New("--client-go-v030 and --client-go-before-v030 contradict each other: give one")}
	}
	if o.beforeV030 || (v030Set && !o.v030) {
		o.target.Behaviour = election.LeaderGetsAndUpdates
	}
	return nil
}

// Validate checks --output, the counts and the target (recommend.Target.Check).
func (o *recommendOptions) Validate() error {
	if err := validOutput(o.output); err != nil {
		return err
	}
	if o.clusters.value < 0 || o.controllerLocks.value < 0 || o.alternatives.value < 0 || o.rancherReplicas.value < 0 {
		return errors.New("--clusters, --controller-locks, --rancher-replicas and --alternatives must not be negative")
	}
	if o.kf.kubeconfig != "" && !o.clusters.set {
		return errors.New("--kubeconfig: only with --clusters N (it reads the triples in effect for the installation's lock requests; the triple recommended depends on --max-failover alone)")
	}
	return o.target.Check()
}

// Run finds the best triple and the curve; with --clusters it reads the
// installation's triples in effect (and Rancher's replicas) too; it
// prints them.
func (o *recommendOptions) Run(ctx context.Context) error {
	best, err := recommend.Best(o.target)
	if errors.Is(err, recommend.ErrUnreachable) {
		fmt.Fprintf(o.errOut, "%v\n", err)
		return &exitError{code: exitFailed}
	}
	if err != nil {
		return err
	}
	res := recommendation{target: o.target, best: best, curve: recommend.Curve(best, o.target, o.alternatives.value)}
	if o.clusters.set {
		in := recommend.Installation{Clusters: o.clusters.value, ControllerLocks: o.controllerLocks.value, Followers: o.followers.value,
			RancherReplicas: o.rancherReplicas.value, Behaviour: o.target.Behaviour}
		opts := inventory.Options{Namespace: o.ns, RancherNamespace: o.rancherNS, RancherDeployment: o.rancherDep,
			Parts: inventory.Settings | inventory.State | inventory.RancherDeployment}
		var snap *inventory.Snapshot
		var err error
		if res.current, res.source, snap, err = readInEffect(ctx, &o.kf, opts); err != nil {
			return err
		}
		if snap != nil && !o.rancherReplicas.set {
			in.RancherReplicas = snap.RancherReplicas // 0 without a Rancher Deployment: its lock is left out
		}
		res.installation = &in
		res.leftAlone, res.leftAloneScope = leftAloneOf(snap)
	}
	if o.output == "json" {
		return res.json(o.out)
	}
	return res.text(o.out)
}

type recommendation struct {
	target       recommend.Target
	best         recommend.Option
	curve        []recommend.Option
	installation *recommend.Installation
	current      map[settings.Component]election.Timings
	source       string
	// leftAlone are the locks of the Rancher read (or of any current
	// Rancher, without --kubeconfig) the settings do not reach; the scope
	// says which Rancher.
	leftAlone      []locks.Lock
	leftAloneScope string
}

// leftAloneOf is pkg/locks.LeftAlone of the Rancher in snap: every
// current Rancher's without a cluster read, none without a Rancher
// Deployment.
func leftAloneOf(snap *inventory.Snapshot) ([]locks.Lock, string) {
	switch {
	case snap == nil:
		return locks.LeftAlone(0), "on Rancher v2.13+ (rancher-webhook's from v2.14)"
	case snap.Rancher == nil:
		return nil, ""
	case !snap.RancherVersion.Known:
		return locks.LeftAlone(0), "beside this Rancher (its version unknown)"
	}
	return locks.LeftAlone(snap.RancherVersion.Minor), "beside Rancher " + snap.RancherVersion.String()
}

func (r recommendation) text(w io.Writer) error {
	b := r.best
	fmt.Fprintf(w, "recommended: %s\n", b.Timings)
	fmt.Fprintf(w, "  worst-case failover %s (at most %s)\n", election.FormatDuration(b.WorstCaseFailover), election.FormatDuration(r.target.MaxFailover))
	fmt.Fprintf(w, "  renewal attempts %s (at least %d); survives a kube-apiserver stall of up to %s\n",
		formatAttempts(b.RenewAttempts), max(r.target.MinRenewAttempts, election.MinRenewAttempts), election.FormatDuration(b.SurvivableStall))
	fmt.Fprintf(w, "  %.0f lock requests per hour (1 leader + %d follower(s), %s)\n", b.RequestsPerHour, r.target.Followers, r.target.Behaviour)
	fmt.Fprintf(w, "  leasetune check --lease-duration %s --renew-deadline %s --retry-period %s\n",
		election.FormatDuration(b.Timings.LeaseDuration), election.FormatDuration(b.Timings.RenewDeadline), election.FormatDuration(b.Timings.RetryPeriod))
	if len(r.curve) > 0 {
		fmt.Fprintln(w, "\nthe trade-off curve (* recommended; below it faster failover, more requests):")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    LEASE\tRENEW\tRETRY\tREQUESTS/H\tFAILOVER\tATTEMPTS\tSTALL SURVIVED")
		for i, o := range append([]recommend.Option{b}, r.curve...) {
			mark := "   "
			if i == 0 {
				mark = "  *"
			}
			fmt.Fprintf(tw, "%s %s\t%s\t%s\t%.0f\t%s\t%s\t%s\n", mark, election.FormatDuration(o.Timings.LeaseDuration), election.FormatDuration(o.Timings.RenewDeadline),
				election.FormatDuration(o.Timings.RetryPeriod), o.RequestsPerHour, election.FormatDuration(o.WorstCaseFailover), formatAttempts(o.RenewAttempts),
				election.FormatDuration(o.SurvivableStall))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if in := r.installation; in != nil {
		ctrl, agent, ran := r.current[settings.FleetController], r.current[settings.FleetAgent], r.current[settings.Rancher]
		now := in.RequestsPerHour(ctrl, agent, ran)
		after := in.RequestsPerHour(b.Timings, b.Timings, b.Timings)
		fmt.Fprintf(w, "\ninstallation: %d fleet-agent locks + %d Fleet controller locks, %d follower(s) each", in.Clusters, in.ControllerLocks, in.Followers)
		if in.RancherReplicas > 0 {
			fmt.Fprintf(w, "; Rancher's cattle-controllers lock, %d replica(s)", in.RancherReplicas)
		}
		fmt.Fprintln(w, ":")
		fmt.Fprintf(w, "  in effect (%s): controllers %s, agents %s", r.source, ctrl, agent)
		if in.RancherReplicas > 0 {
			fmt.Fprintf(w, ", Rancher %s", ran)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "    %s lock requests per hour\n", thousands(now))
		on := "both"
		if in.RancherReplicas > 0 {
			on = "all three"
		}
		fmt.Fprintf(w, "  recommended on %s: %s lock requests per hour", on, thousands(after))
		if now > 0 {
			fmt.Fprintf(w, " (%+.0f%%)", 100*(after-now)/now)
		}
		fmt.Fprintln(w)
		if in.RancherReplicas == 0 {
			fmt.Fprintln(w, "  (Rancher's own lock left out: --rancher-replicas N, or --kubeconfig to read it)")
		}
		if len(r.leftAlone) > 0 {
			var perHour float64
			var names []string
			for _, l := range r.leftAlone {
				perHour += l.RequestsPerHour()
				names = append(names, l.Component+" "+l.Namespace+"/"+l.Name+" ("+l.Defaults.String()+")")
			}
			fmt.Fprintf(w, "  not counted, %s: %s, about %s requests per hour (one replica each, client-go v0.30+ leaders), which these settings do not reach (leasetune plan and docs/design.md say how to change them)\n",
				r.leftAloneScope, strings.Join(names, ", "), thousands(perHour))
		}
	}
	return nil
}

type optionJSON struct {
	LeaseDuration     string  `json:"leaseDuration"`
	RenewDeadline     string  `json:"renewDeadline"`
	RetryPeriod       string  `json:"retryPeriod"`
	RequestsPerHour   float64 `json:"requestsPerHour"`
	WorstCaseFailover string  `json:"worstCaseFailover"`
	RenewAttempts     float64 `json:"renewAttempts"`
	SurvivableStall   string  `json:"survivableStall"`
}

func toJSON(o recommend.Option) optionJSON {
	f := election.FormatDuration
	return optionJSON{LeaseDuration: f(o.Timings.LeaseDuration), RenewDeadline: f(o.Timings.RenewDeadline), RetryPeriod: f(o.Timings.RetryPeriod),
		RequestsPerHour: o.RequestsPerHour, WorstCaseFailover: f(o.WorstCaseFailover), RenewAttempts: o.RenewAttempts, SurvivableStall: f(o.SurvivableStall)}
}

// installationJSON is the installation's part of recommend -o json;
// rancher is omitted when Rancher's lock is left out (rancherReplicas 0).
type installationJSON struct {
	Clusters        int     `json:"clusters"`
	ControllerLocks int     `json:"controllerLocks"`
	RancherReplicas int     `json:"rancherReplicas"`
	Source          string  `json:"source"`
	Controllers     string  `json:"controllers"`
	Agents          string  `json:"agents"`
	Rancher         string  `json:"rancher,omitempty"`
	PerHour         float64 `json:"perHour"`
	Recommended     float64 `json:"recommendedPerHour"`
	// LeftAlonePerHour is what the locks Rancher installs and these
	// settings do not reach cost at their defaults (pkg/locks; every
	// current Rancher's without --kubeconfig), LeftAlone names them.
	LeftAlonePerHour float64  `json:"leftAlonePerHour"`
	LeftAlone        []string `json:"leftAlone,omitempty"`
}

func (r recommendation) json(w io.Writer) error {
	out := struct {
		Recommended  optionJSON        `json:"recommended"`
		Alternatives []optionJSON      `json:"alternatives"`
		Installation *installationJSON `json:"installation,omitempty"`
		// ClientGo is the behaviour the requests are counted with.
		ClientGo string `json:"clientGo"`
	}{Recommended: toJSON(r.best), Alternatives: []optionJSON{}, ClientGo: r.target.Behaviour.String()}
	for _, o := range r.curve {
		out.Alternatives = append(out.Alternatives, toJSON(o))
	}
	if in := r.installation; in != nil {
		ctrl, agent, ran := r.current[settings.FleetController], r.current[settings.FleetAgent], r.current[settings.Rancher]
		inst := &installationJSON{Clusters: in.Clusters, ControllerLocks: in.ControllerLocks, RancherReplicas: in.RancherReplicas, Source: r.source,
			Controllers: ctrl.String(), Agents: agent.String(), PerHour: in.RequestsPerHour(ctrl, agent, ran),
			Recommended: in.RequestsPerHour(r.best.Timings, r.best.Timings, r.best.Timings)}
		if in.RancherReplicas > 0 {
			inst.Rancher = ran.String()
		}
		for _, l := range r.leftAlone {
			inst.LeftAlonePerHour += l.RequestsPerHour()
			inst.LeftAlone = append(inst.LeftAlone, l.Namespace+"/"+l.Name)
		}
		out.Installation = inst
	}
	return writeJSON(w, out)
}

// inEffectTriples returns the triple in effect per component and where it
// comes from: with --kubeconfig, the cluster's Settings and leasetune's
// state (recommend.InEffect), else the settings' defaults.
func inEffectTriples(ctx context.Context, kf *kubeFlags, ns string) (map[settings.Component]election.Timings, string, error) {
	t, source, _, err := readInEffect(ctx, kf, inventory.Options{Namespace: ns, Parts: inventory.Settings | inventory.State})
	return t, source, err
}

// readInEffect is inEffectTriples for the parts opts names (at least
// inventory.Settings and inventory.State), read within 30 seconds, with the
// snapshot read (nil without --kubeconfig).
func readInEffect(ctx context.Context, kf *kubeFlags, opts inventory.Options) (map[settings.Component]election.Timings, string, *inventory.Snapshot, error) {
	if kf.kubeconfig == "" {
		return recommend.Defaults(), "defaults", nil, nil
	}
	rc, err := kf.restConfig()
	if err != nil {
		return nil, "", nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, "", nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	snap, err := inventory.Read(ctx, cs, dyn, opts)
	if err != nil {
		return nil, "", nil, err
	}
	return recommend.InEffect(snap), "settings", snap, nil
}
