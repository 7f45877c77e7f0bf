package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"leasetune.io/leasetune/pkg/election"
)

// newCheckCommand returns `leasetune check`: it validates a timing triple
// with election.Timings.Validate and prints its cost (election.CostOf).
// Exit 0: valid; 1: invalid, one line per broken rule on stderr; 2: a flag
// is missing or does not parse.
func newCheckCommand() *cobra.Command {
	var lease, renew, retry onceString
	followers := decimalInt{value: 1}
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			var t election.Timings
			var errs []error
			for i, v := range []struct{ flag, value string }{
				{"lease-duration", lease.value}, {"renew-deadline", renew.value}, {"retry-period", retry.value},
			} {
				if !cmd.Flags().Changed(v.flag) {
					errs = append(errs, fmt.Errorf("flag --%s is required", v.flag))
					continue
				}
				d, err := election.ParseDuration(election.Fields[i], v.value)
				if err != nil {
					errs = append(errs, fmt.Errorf("flag --%s: %w", v.flag, err))
					continue
				}
				t = t.With(election.Fields[i], d)
			}
			if followers.value < 0 {
				errs = append(errs, fmt.Errorf("flag --followers %d must not be negative", followers.value))
			}
			if len(errs) > 0 {
				return &usageError{errors.Join(errs...)}
			}
			return check(cmd.OutOrStdout(), cmd.ErrOrStderr(), t, followers.value)
		},
	}
	f := cmd.Flags()
	f.Var(&lease, "lease-duration", "leaseDuration, e.g. 30s")
	f.Var(&renew, "renew-deadline", "renewDeadline, e.g. 25s")
	f.Var(&retry, "retry-period", "retryPeriod, e.g. 10s")
	f.Var(&followers, "followers", "number of followers (candidates that are not the leader) per lock")
	return cmd
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
		return &exitError{code: exitInvalid}
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
