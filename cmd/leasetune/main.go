// Command leasetune makes leader-election timings (leaseDuration,
// renewDeadline, retryPeriod) a validated, fleet-wide Rancher setting and
// propagates them to the Fleet Deployments, the downstream agents and
// Rancher's own Deployment. Its subcommands:
//
//	leasetune controller [--kubeconfig FILE]     run the settings provider and the controllers
//	leasetune plan [--set NAME=VALUE ...]        print the writes the controllers would make
//	leasetune cleanup [--yes [--force]]          list, then remove, what leasetune wrote
//	leasetune check --lease-duration D --renew-deadline D --retry-period D
//	leasetune audit FILE...                      measure leader-election traffic in audit logs
//	leasetune recommend --max-failover D         the cheapest valid triple within a failover bound
//
// The commands are flag layers over pkg/: each is an options struct whose
// Complete turns the flags and arguments into what Run needs, Validate
// checks them, and Run does the work (options.go).
//
// Exit status, for every command: 0 done; 2 a flag or an argument is
// missing, does not parse or is refused (the error, then the usage or a
// hint to run --help); 1 any other error (the cluster or a file cannot be
// read, a write failed, the command was cancelled), or what a command
// documents as its refusal (an invalid triple for check, no triple within
// the bound for recommend). SIGINT (Ctrl-C) and SIGTERM cancel the running
// command: the controller stops gracefully and exits 0, the others stop
// their requests and exit 1; a second signal ends the process at once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by every subcommand.
const (
	exitOK = 0
	// exitFailed: a runtime error, or input that is well-formed but
	// refused (e.g. an invalid triple for check).
	exitFailed = 1
	// exitUsage: a flag or an argument is missing, does not parse or is
	// refused.
	exitUsage = 2
)

// exitError carries the exit code for an error a command returns; its
// message has been printed already.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError marks an error as bad command-line input (exit code 2, with
// the command's usage).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// runtimeError marks an error of a command's work (exit code 1, no usage).
type runtimeError struct{ err error }

func (e *runtimeError) Error() string { return e.err.Error() }
func (e *runtimeError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal cancels the command; a second one, while it stops,
	// gets the default action and ends the process at once.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args with ctx as the commands' context
// (its end cancels the running command) and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr) //nolint:contextcheck // each command runs with cmd.Context(), which is ctx (ExecuteContext)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	var ue *usageError
	var re *runtimeError
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
	case errors.As(err, &re):
		fmt.Fprintf(stderr, "error: %v\n", err)
		return exitFailed
	default:
		// cobra's own errors (an unknown command, an argument a command
		// takes none of) come before any command runs: usage errors.
		fmt.Fprintf(stderr, "error: %v\nRun 'leasetune --help' for usage.\n", err)
		return exitUsage
	}
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "leasetune",
		Short:         "Validated, fleet-wide leader-election timings for Rancher and Fleet",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(newCheckCommand(), newControllerCommand(), newPlanCommand(), newCleanupCommand(), newAuditCommand(), newRecommendCommand())
	return root
}
