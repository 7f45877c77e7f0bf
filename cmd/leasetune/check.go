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
	output              string
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

With -o json, the same as one JSON object on stdout, invalid or not: "valid",
"violations" (rule, fields, message), the cost (the model's numbers, not
rounded) and the notes.

Exit status: 0 valid, 1 invalid (one line per broken rule on stderr, or the
JSON object), 2 bad usage.`,
		Example: "  leasetune check --lease-duration 30s --renew-deadline 25s --retry-period 10s\n" +
			"  leasetune check --lease-duration 45s --renew-deadline 30s --retry-period 2s -o json",
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
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
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

// Validate reports the flags Complete could not read, a negative
// --followers and a bad --output, all together. (An invalid triple is no
// usage error: Run says why, exit 1.)
func (o *checkOptions) Validate() error {
	errs := o.errs
	if o.followers.value < 0 {
		errs = append(errs, fmt.Errorf("flag --followers %d must not be negative", o.followers.value))
	}
	if err := validOutput(o.output); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run validates the triple and prints the result (checkResult) as text or
// JSON; an invalid triple exits 1.
func (o *checkOptions) Run(context.Context) error {
	r := evaluateCheck(o.timings, o.followers.value, [3]string{o.lease.value, o.renew.value, o.retry.value})
	var err error
	if o.output == "json" {
		err = r.json(o.out)
	} else {
		err = r.text(o.out, o.errOut)
	}
	if err != nil {
		return err
	}
	if len(r.violations) > 0 {
		return &exitError{code: exitFailed}
	}
	return nil
}

// checkResult is what check finds about a triple: the rules it breaks,
// or else its cost, and a note for each value as written (spelled) that
// Fleet v0.16's chart refuses.
type checkResult struct {
	t          election.Timings
	followers  int
	violations []election.Violation
	notes      []string
}

// evaluateCheck validates t (spelled as the flags gave it) for
// followers followers.
func evaluateCheck(t election.Timings, followers int, spelled [3]string) checkResult {
	r := checkResult{t: t, followers: followers}
	if err := t.Validate(); err != nil {
		var verr *election.ValidationError
		if errors.As(err, &verr) {
			r.violations = verr.Violations
		} else {
			r.violations = []election.Violation{{Message: err.Error()}}
		}
		return r
	}
	for i, v := range spelled {
		key := "leaderElection." + string(election.Fields[i])
		if fleet.ChartDurationError(key, v) != nil {
			r.notes = append(r.notes, fmt.Sprintf("%q is valid for wrangler and client-go, but as %s in Fleet's chart values (rancher-config's fleet key) Fleet v0.16's values schema refuses it (%s): write it as %s",
				v, key, fleet.ChartDurationPattern, election.FormatDuration(t.Get(election.Fields[i]))))
		}
	}
	return r
}

// behaviours are the client-go behaviours check prints the cost for.
var behaviours = []election.ClientGoBehaviour{election.LeaderGetsAndUpdates, election.LeaderOnlyUpdates}

// text prints r: an invalid triple one line per broken rule to stderr,
// a valid one its cost and notes to stdout.
func (r checkResult) text(stdout, stderr io.Writer) error {
	if len(r.violations) > 0 {
		fmt.Fprintf(stderr, "invalid: %s\n", r.t)
		for _, v := range r.violations {
			fmt.Fprintf(stderr, "  %s\n", v.Message)
		}
		return nil
	}
	fmt.Fprintf(stdout, "valid: %s\n", r.t)
	fmt.Fprintf(stdout, "lock requests per hour, 1 leader + %d follower(s):\n", r.followers)
	w := tabwriter.NewWriter(stdout, 0, 0, 1, ' ', 0)
	for _, b := range behaviours {
		c := election.CostOf(r.t, r.followers, b)
		fmt.Fprintf(w, "  %s:\t%.0f\t(leader %.0f, followers %.0f)\n",
			b, c.TotalRequestsPerHour(), c.LeaderRequestsPerHour, c.FollowerRequestsPerHour)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	c := election.CostOf(r.t, r.followers, election.LeaderGetsAndUpdates)
	fmt.Fprintf(stdout, "worst-case failover after the leader dies: %s (leaseDuration + 4.4 × retryPeriod)\n",
		election.FormatDuration(c.WorstCaseFailover))
	fmt.Fprintf(stdout, "renewal attempts before the leader gives up: %s (renewDeadline / retryPeriod)\n",
		formatAttempts(election.RenewAttempts(r.t)))
	fmt.Fprintf(stdout, "the leader survives a kube-apiserver stall of up to %s (renewDeadline)\n",
		election.FormatDuration(election.SurvivableStall(r.t)))
	for _, n := range r.notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	return nil
}

// checkJSON is check -o json. Violations and notes are [] when there are
// none; the cost fields are left out for an invalid triple; numbers are
// the model's, not rounded (as recommend -o json).
type checkJSON struct {
	LeaseDuration     string          `json:"leaseDuration"`
	RenewDeadline     string          `json:"renewDeadline"`
	RetryPeriod       string          `json:"retryPeriod"`
	Valid             bool            `json:"valid"`
	Violations        []violationJSON `json:"violations"`
	Followers         int             `json:"followers"`
	Cost              []costJSON      `json:"cost,omitempty"`
	WorstCaseFailover string          `json:"worstCaseFailover,omitempty"`
	RenewAttempts     float64         `json:"renewAttempts,omitempty"`
	SurvivableStall   string          `json:"survivableStall,omitempty"`
	Notes             []string        `json:"notes"`
}

type violationJSON struct {
	Rule    string   `json:"rule,omitempty"`
	Fields  []string `json:"fields,omitempty"`
	Message string   `json:"message"`
}

// costJSON is the lock requests per hour of one lock, for one client-go
// behaviour (its String, as recommend's clientGo).
type costJSON struct {
	ClientGo                string  `json:"clientGo"`
	RequestsPerHour         float64 `json:"requestsPerHour"`
	LeaderRequestsPerHour   float64 `json:"leaderRequestsPerHour"`
	FollowerRequestsPerHour float64 `json:"followerRequestsPerHour"`
}

func (r checkResult) json(w io.Writer) error {
	f := election.FormatDuration
	out := checkJSON{LeaseDuration: f(r.t.LeaseDuration), RenewDeadline: f(r.t.RenewDeadline), RetryPeriod: f(r.t.RetryPeriod),
		Valid: len(r.violations) == 0, Violations: []violationJSON{}, Followers: r.followers, Notes: []string{}}
	out.Notes = append(out.Notes, r.notes...)
	for _, v := range r.violations {
		vj := violationJSON{Rule: string(v.Rule), Message: v.Message}
		for _, fl := range v.Fields {
			vj.Fields = append(vj.Fields, string(fl))
		}
		out.Violations = append(out.Violations, vj)
	}
	if out.Valid {
		for _, b := range behaviours {
			c := election.CostOf(r.t, r.followers, b)
			out.Cost = append(out.Cost, costJSON{ClientGo: b.String(), RequestsPerHour: c.TotalRequestsPerHour(),
				LeaderRequestsPerHour: c.LeaderRequestsPerHour, FollowerRequestsPerHour: c.FollowerRequestsPerHour})
		}
		out.WorstCaseFailover = f(election.CostOf(r.t, r.followers, election.LeaderGetsAndUpdates).WorstCaseFailover)
		out.RenewAttempts = election.RenewAttempts(r.t)
		out.SurvivableStall = f(election.SurvivableStall(r.t))
	}
	return writeJSON(w, out)
}

// formatAttempts formats a number of renewal attempts with at most two
// decimals ("2.5", "15", "2.14").
func formatAttempts(n float64) string {
	return strconv.FormatFloat(math.Round(n*100)/100, 'f', -1, 64)
}
