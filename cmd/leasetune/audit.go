package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"leasetune.io/leasetune/pkg/audit"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
)

// tripleFlags are the optional triples a command projects: the Fleet
// controllers' (--lease-duration, --renew-deadline, --retry-period), the
// agents' (--agent-*, else the same as the controllers') and the Rancher
// server's (--rancher-*, its lock kube-system/cattle-controllers), each
// field completing the triple in effect.
type tripleFlags struct {
	ctrl, agent, rancher [3]onceString
}

var tripleFlagNames = [3]string{"lease-duration", "renew-deadline", "retry-period"}

func (tf *tripleFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	for i, name := range tripleFlagNames {
		f.Var(&tf.ctrl[i], name, string(election.Fields[i])+" to project for the Fleet controllers (and the agents, unless --agent-"+name+")")
		f.Var(&tf.agent[i], "agent-"+name, string(election.Fields[i])+" to project for the fleet-agents")
		f.Var(&tf.rancher[i], "rancher-"+name, string(election.Fields[i])+" to project for the Rancher server (lock kube-system/cattle-controllers)")
	}
}

func (tf *tripleFlags) given() bool {
	for i := range tf.ctrl {
		if tf.ctrl[i].set || tf.agent[i].set || tf.rancher[i].set {
			return true
		}
	}
	return false
}

// flagFor returns the flag that sets field i of component c, and its name.
func (tf *tripleFlags) flagFor(c settings.Component, i int) (onceString, string) {
	switch {
	case c == settings.Rancher:
		return tf.rancher[i], "--rancher-" + tripleFlagNames[i]
	case c == settings.FleetAgent && tf.agent[i].set:
		return tf.agent[i], "--agent-" + tripleFlagNames[i]
	}
	return tf.ctrl[i], "--" + tripleFlagNames[i]
}

// apply returns the triples in effect with the flags' fields put in, each
// validated.
func (tf *tripleFlags) apply(inEffect map[settings.Component]election.Timings) (map[settings.Component]election.Timings, error) {
	out := map[settings.Component]election.Timings{}
	var errs []error
	for _, c := range settings.Components {
		t := inEffect[c]
		for i, f := range election.Fields {
			v, name := tf.flagFor(c, i)
			if !v.set {
				continue
			}
			d, err := election.ParseDuration(f, v.value)
			if err != nil {
				errs = append(errs, fmt.Errorf("flag %s: %w", name, err))
				continue
			}
			t = t.With(f, d)
		}
		if err := t.Validate(); err != nil && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("%s: %w (give all three fields, or fields that fit the triple in effect)", c, err))
		}
		out[c] = t
	}
	return out, errors.Join(errs...)
}

// auditOptions are the options of `leasetune audit`.
type auditOptions struct {
	top    decimalInt
	output string
	tf     tripleFlags
	kf     kubeFlags
	ns     string
	files  []string
	streams
}

// newAuditCommand returns `leasetune audit FILE...`.
func newAuditCommand() *cobra.Command {
	o := &auditOptions{top: decimalInt{value: 10}}
	cmd := &cobra.Command{
		Use:   "audit FILE...",
		Short: "Measure the leader-election traffic in kube-apiserver audit logs",
		Long: `Read kube-apiserver audit logs (one audit.k8s.io/v1 Event per line, any level;
plain or gzip, by content; several files, e.g. rotated logs; - for stdin) and
print: the time span and the total requests (one per auditID: its
ResponseComplete event, else its last stage); the most requested URIs; every
leader-election lock with its holders, requests, requests per hour, share of
all requests and the retry period its holder's cadence implies; the share of
all locks; and, for the locks leasetune manages (the Fleet locks and
Rancher's kube-system/cattle-controllers), what they would cost with the
triples in effect (the settings' defaults, or the Settings read with
--kubeconfig, or the --lease-duration/--renew-deadline/--retry-period,
--agent-* and --rancher-* flags), from pkg/election's model.

Locks: coordination.k8s.io Leases (not the kubelets' heartbeats in
kube-node-lease); ConfigMaps and Endpoints whose logged object carries the
control-plane.alpha.kubernetes.io/leader annotation; at Metadata level, a
ConfigMap or Endpoints one client (user, user agent, source IP) writes at
least 10 times at a steady cadence (interquartile range of the intervals at
most a quarter of their median) and reads at least once every two writes,
shown as inferred. A ConfigMap that is only read is not a lock.

Lines that are not audit events are counted and the first few reported with
their line numbers. Exit status: 0 done (also for an empty log), 1 a file
cannot be read, a gzip stream is truncated, the Settings cannot be read, or
there are lines but none is an audit event (after the report), 2 bad usage.`,
		Example: `  leasetune audit /var/log/kube-audit/audit.log /var/log/kube-audit/audit-*.log.gz
  zcat audit.log.gz | leasetune audit --top 20 -
  leasetune audit --retry-period 10s --output json audit.log`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{errors.New("no audit log given (a file, or - for stdin)")}
			}
			return nil
		},
		RunE: runOptions(o),
	}
	f := cmd.Flags()
	f.Var(&o.top, "top", "number of request URIs to list")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	o.tf.add(cmd)
	f.StringVar(&o.kf.kubeconfig, "kubeconfig", "", "read the triples in effect from this cluster's Settings (default: the settings' defaults, 30s/25s/10s for Fleet, 45s/30s/2s for Rancher)")
	f.StringVar(&o.ns, "namespace", defaultNamespace(), "leasetune's namespace (its state ConfigMap), with --kubeconfig")
	return cmd
}

// Complete takes the files to read.
func (o *auditOptions) Complete(cmd *cobra.Command, args []string) error {
	o.streams = streamsOf(cmd)
	o.files = args
	return nil
}

// Validate checks --output and --top.
func (o *auditOptions) Validate() error {
	if err := validOutput(o.output); err != nil {
		return err
	}
	if o.top.value < 0 {
		return fmt.Errorf("--top %d must not be negative", o.top.value)
	}
	return nil
}

// Run reads the triples in effect (and puts the flags' fields in: a
// triple that is then invalid is a usage error), reads the logs and prints
// the report.
func (o *auditOptions) Run(ctx context.Context) error {
	inEffect, source, err := inEffectTriples(ctx, &o.kf, o.ns)
	if err != nil {
		return err
	}
	triples, err := o.tf.apply(inEffect)
	if err != nil {
		return &usageError{err}
	}
	if o.tf.given() {
		source = "flags"
	}
	a := audit.NewAnalyzer()
	for _, name := range o.files {
		if err := readLog(ctx, a, name, o.in); err != nil {
			return err
		}
	}
	r := a.Report(o.top.value)
	r.Project(triples, source)
	if o.output == "json" {
		err = writeJSON(o.out, r)
	} else {
		err = printAudit(o.out, r)
	}
	if err == nil && r.Events == 0 && r.BadLines > 0 {
		// Lines, but not one event: the wrong file, or another format.
		err = &runtimeError{fmt.Errorf("none of the %d lines in %s is an audit event (one audit.k8s.io/v1 Event per line, in JSON: the kube-apiserver's --audit-log-path with --audit-log-format=json, its default)",
			r.Lines, strings.Join(r.Files, ", "))}
	}
	return err
}

// readLog reads the log name (- for stdin) into a, until ctx ends.
func readLog(ctx context.Context, a *audit.Analyzer, name string, stdin io.Reader) error {
	if name == "-" {
		return a.Read("stdin", ctxReader{ctx, stdin})
	}
	f, err := os.Open(name) //nolint:gosec // G304: the audit log the user named on the command line
	if err != nil {
		return err
	}
	defer f.Close()
	return a.Read(name, ctxReader{ctx, f})
}

// ctxReader reads r until ctx ends, then fails with ctx's error, so that
// SIGINT ends the reading of a long log.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// printAudit prints the report as text.
func printAudit(w io.Writer, r *audit.Report) error {
	for _, b := range r.BadLineSamples {
		fmt.Fprintf(w, "not an audit event: %s line %d: %s\n", b.File, b.Line, b.Error)
	}
	if r.BadLines > len(r.BadLineSamples) {
		fmt.Fprintf(w, "… %d lines in all are not audit events\n", r.BadLines)
	}
	if r.Requests == 0 {
		fmt.Fprintf(w, "no requests in %s (%d lines)\n", strings.Join(r.Files, ", "), r.Lines)
		return nil
	}
	span := r.To.Sub(r.From)
	fmt.Fprintf(w, "%s requests from %s to %s (%s, %s requests per hour)\n", thousands(float64(r.Requests)),
		r.From.Format(time.RFC3339), r.To.Format(time.RFC3339), span.Round(time.Second), perHour(float64(r.Requests), span))
	if r.BadLines > 0 {
		fmt.Fprintf(w, "%d of %d lines are not audit events\n", r.BadLines, r.Lines)
	}

	fmt.Fprintf(w, "\ntop %d request URIs", len(r.Top))
	if r.TopApproximate {
		fmt.Fprint(w, " (approximate: too many distinct URIs to count exactly)")
	}
	fmt.Fprintln(w, ":")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, u := range r.Top {
		fmt.Fprintf(tw, "%d\t %s\n", u.Count, u.RequestURI)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nleader-election locks (%d):\n", len(r.Locks))
	if len(r.Locks) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  RESOURCE\tNAMESPACE\tNAME\tCOMPONENT\tHOLDER\tREQUESTS\tPER HOUR\tSHARE\tRETRY PERIOD")
		for _, l := range r.Locks {
			holder := "-"
			if len(l.Holders) > 0 {
				h := l.Holders[0]
				holder = h.User + " (" + firstWord(h.UserAgent) + ")"
				if len(l.Holders) > 1 {
					holder += fmt.Sprintf(" +%d", len(l.Holders)-1)
				}
			}
			retry := "-"
			if l.RetryPeriod > 0 {
				retry = election.FormatDuration(l.RetryPeriod)
			}
			name := l.Name
			if l.Inferred {
				name += " (inferred)"
			}
			ns := l.Namespace
			if ns == "" {
				ns = "-"
			}
			comp := l.Component
			if comp == "" {
				comp = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%.0f\t%s\t%s\n", l.Resource, ns, name, comp, holder, l.Requests, l.PerHour, pct(l.Share), retry)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "all locks: %s requests, %s of all requests\n", thousands(float64(r.LockRequests)), pct(r.LockShare))
	if len(r.LeftAlone) > 0 {
		fmt.Fprintln(w, "\nlocks of components leasetune's settings do not reach (their triple is theirs to change):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAMESPACE\tNAME\tCOMPONENT\tPER HOUR\tSHARE\tDEFAULTS")
		for _, l := range r.LeftAlone {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%.0f\t%s\t%s\n", l.Namespace, l.Name, l.Component, l.PerHour, pct(l.Share), l.Defaults)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, l := range r.LeftAlone {
			if !seen[l.Component] {
				seen[l.Component] = true
				fmt.Fprintf(w, "  %s: %s\n", l.Component, l.Change)
			}
		}
	}

	if p := r.Managed; p != nil {
		var ts []string
		for _, c := range settings.Components {
			if t, ok := p.Triples[c]; ok {
				ts = append(ts, fmt.Sprintf("%s %s", c, t))
			}
		}
		from := map[string]string{"defaults": "the settings' defaults", "flags": "the flags", "settings": "the cluster's Settings"}[p.Source]
		fmt.Fprintf(w, "\nlocks leasetune manages, now and with the triples from %s:\n  %s\n", from, strings.Join(ts, "\n  "))
		if len(p.Locks) == 0 {
			fmt.Fprintln(w, "  none in the log")
			return nil
		}
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAMESPACE\tNAME\tCOMPONENT\tFOLLOWERS\tPER HOUR\tSHARE\tPROJECTED PER HOUR\tPROJECTED SHARE")
		for _, l := range p.Locks {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%.0f\t%s\t%.0f\t%s\n", l.Namespace, l.Name, l.Component, l.Followers, l.PerHour, pct(l.Share), l.ProjectedPerHour, pct(l.ProjectedShare))
		}
		fmt.Fprintf(tw, "  total\t\t\t\t%.0f\t%s\t%.0f\t%s\n", p.PerHour, pct(p.Share), p.ProjectedPerHour, pct(p.ProjectedShare))
		return tw.Flush()
	}
	return nil
}

func firstWord(s string) string {
	if i := strings.IndexByte(s, ' '); i > 0 {
		return s[:i]
	}
	return s
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func perHour(n float64, span time.Duration) string {
	if span <= 0 {
		return "-"
	}
	return thousands(n / span.Hours())
}

// thousands formats n rounded, with commas: 69128 → "69,128".
func thousands(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
