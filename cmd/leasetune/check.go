package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// checkOptions are the options of `leasetune check`.
type checkOptions struct {
	lease, renew, retry onceString
	followers           decimalInt
	timings             election.Timings // from the three duration flags (Complete)
	errs                []error          // what Complete could not read
	streams
}

// newCheckCommand returns `leasetune check`: it validates a timing triple
// with election.Timings.Validate and prints its cost (election.CostOf).
// Exit 0: valid; 1: invalid, one line per broken rule on stderr; 2: a flag
// is missing or does not parse.
func newCheckCommand() *cobra.Command {
	o := &checkOptions{followers: decimalInt{value: 1}}
	cmd := &cobra.Command{
		Use:   "check --lease-duration D --renew-deadline D --retry-period D",
		Short: "Validate a leader-election timing triple and print its cost",
		Long: `Validate a leader-election timing triple as client-go's NewLeaderElector and this
project do, and print its cost: lock requests per hour for one lock with one
leader and --followers followers (for client-go before v0.30, whose leader reads
and updates the lock at every renewal, and v0.30+, which only updates), and the
worst-case failover time after the leader dies (leaseDuration + 4.4 × retryPeriod),
the renewal attempts the leader gets (renewDeadline / retryPeriod) and the
longest kube-apiserver stall it survives without giving up the lock
(renewDeadline).

Durations use Go's syntax (time.ParseDuration), as wrangler and Fleet read them:
"30s", "1m30s", "1.5s".

Exit status: 0 valid, 1 invalid (one line per broken rule), 2 bad usage.`,
		Example: "  leasetune check --lease-duration 30s --renew-deadline 25s --retry-period 10s",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &usageError{fmt.Errorf("unexpected argument %q (a flag before it may have taken the next flag as its value)", args[0])}
			}
			return nil
		},
		RunE: runOptions(o),
	}
	f := cmd.Flags()
	f.Var(&o.lease, "lease-duration", "leaseDuration, e.g. 30s")
	f.Var(&o.renew, "renew-deadline", "renewDeadline, e.g. 25s")
	f.Var(&o.retry, "retry-period", "retryPeriod, e.g. 10s")
	f.Var(&o.followers, "followers", "number of followers (candidates that are not the leader) per lock")
	return cmd
}

// Complete parses the three durations into the triple; what is missing or
// does not parse is kept for Validate, so that every flag at fault is named
// at once.
func (o *checkOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.streams = streamsOf(cmd)
	for i, v := range []struct {
		flag string
		f    onceString
	}{{"lease-duration", o.lease}, {"renew-deadline", o.renew}, {"retry-period", o.retry}} {
		if !v.f.set {
			o.errs = append(o.errs, fmt.Errorf("flag --%s is required", v.flag))
			continue
		}
		d, err := election.ParseDuration(election.Fields[i], v.f.value)
		if err != nil {
			o.errs = append(o.errs, fmt.Errorf("flag --%s: %w", v.flag, err))
			continue
		}
		o.timings = o.timings.With(election.Fields[i], d)
	}
	return nil
}

// Validate reports the flags Complete could not read and a negative
// --followers, all together. (An invalid triple is no usage error: Run
// says why, exit 1.)
func (o *checkOptions) Validate() error {
	errs := o.errs
	if o.followers.value < 0 {
		errs = append(errs, fmt.Errorf("flag --followers %d must not be negative", o.followers.value))
	}
	return errors.Join(errs...)
}

// Run validates the triple and prints its cost (check), then a note for
// each value written in a way Fleet v0.16's chart refuses.
func (o *checkOptions) Run(context.Context) error {
	if err := check(o.out, o.errOut, o.timings, o.followers.value); err != nil {
		return err
	}
	for i, v := range []onceString{o.lease, o.renew, o.retry} {
		key := "leaderElection." + []string{"leaseDuration", "renewDeadline", "retryPeriod"}[i]
		if fleet.ChartDurationError(key, v.value) != nil {
			fmt.Fprintf(o.out, "note: %q is valid for wrangler and client-go, but as %s in Fleet's chart values (rancher-config's fleet key) Fleet v0.16's values schema refuses it (%s): write it as %s\n",
				v.value, key, fleet.ChartDurationPattern, election.FormatDuration(o.timings.Get(election.Fields[i])))
		}
	}
	return nil
}

// check validates t and prints either its cost to stdout or one line per
// broken rule to stderr (returning exit code 1).
func check(stdout, stderr io.Writer, t election.Timings, followers int) error {
	if err := t.Validate(); err != nil {
		var verr *election.ValidationError
		if !errors.As(err, &verr) {
			return err
		}
		fmt.Fprintf(stderr, "invalid: %s\n", t)
		for _, v := range verr.Violations {
			fmt.Fprintf(stderr, "  %s\n", v.Message)
		}
		return &exitError{code: exitFailed}
	}
	fmt.Fprintf(stdout, "valid: %s\n", t)
	fmt.Fprintf(stdout, "lock requests per hour, 1 leader + %d follower(s):\n", followers)
	w := tabwriter.NewWriter(stdout, 0, 0, 1, ' ', 0)
	for _, b := range []election.ClientGoBehaviour{election.LeaderGetsAndUpdates, election.LeaderOnlyUpdates} {
		c := election.CostOf(t, followers, b)
		fmt.Fprintf(w, "  %s:\t%.0f\t(leader %.0f, followers %.0f)\n",
			b, c.TotalRequestsPerHour(), c.LeaderRequestsPerHour, c.FollowerRequestsPerHour)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	c := election.CostOf(t, followers, election.LeaderGetsAndUpdates)
	fmt.Fprintf(stdout, "worst-case failover after the leader dies: %s (leaseDuration + 4.4 × retryPeriod)\n",
		election.FormatDuration(c.WorstCaseFailover))
	fmt.Fprintf(stdout, "renewal attempts before the leader gives up: %s (renewDeadline / retryPeriod)\n",
		formatAttempts(election.RenewAttempts(t)))
	fmt.Fprintf(stdout, "the leader survives a kube-apiserver stall of up to %s (renewDeadline)\n",
		election.FormatDuration(election.SurvivableStall(t)))
	return nil
}

// formatAttempts formats a number of renewal attempts with at most two
// decimals ("2.5", "15", "2.14").
func formatAttempts(n float64) string {
	return strconv.FormatFloat(math.Round(n*100)/100, 'f', -1, 64)
}
