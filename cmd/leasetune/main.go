// Command leasetune makes leader-election timings a validated, fleet-wide
// Rancher setting. Its subcommands:
//
//	leasetune check --lease-duration 30s --renew-deadline 25s --retry-period 10s
//	leasetune controller [--kubeconfig FILE]
//	leasetune audit FILE...
//	leasetune recommend --max-failover 60s
//
// check validates a timing triple and prints what it costs; controller runs
// the settings provider and the controllers that propagate the timings.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes shared by every subcommand.
const (
	exitOK      = 0
	exitInvalid = 1 // the input is well-formed but refused (e.g. an invalid triple)
	exitUsage   = 2 // missing or unparsable input
)

// exitError carries the exit code for an error a command returns; its
// message has been printed already.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError marks an error as bad command-line input (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "error: %v\n", err)
		if cmd, _, ferr := root.Find(args); ferr == nil {
			fmt.Fprint(stderr, cmd.UsageString())
		}
		return exitUsage
	default:
		// cobra's own errors (unknown command or flag) are usage errors too.
		fmt.Fprintf(stderr, "error: %v\nRun 'leasetune --help' for usage.\n", err)
		return exitUsage
	}
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "leasetune",
		Short:         "Validated, fleet-wide leader-election timings for Rancher and Fleet",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(newCheckCommand(), newControllerCommand(), newPlanCommand(), newCleanupCommand(), newAuditCommand(), newRecommendCommand())
	return root
}
