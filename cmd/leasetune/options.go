package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/spf13/cobra"
)

// options is a command's state, in kubectl's pattern (k8s.io/kubectl's
// commands: NewXOptions, then Complete, Validate and Run): the command's
// flags are bound to the fields of its options, and runOptions calls, in
// order:
//   - Complete, which fills in what the flags, the arguments and the
//     environment imply (parsed values, defaults, the streams), reading
//     nothing else;
//   - Validate, which checks them and names the flag, the value and the
//     rule of what it refuses;
//   - Run, which does the work with ctx, the root command's context: it
//     ends on SIGINT or SIGTERM (main), which cancels the work.
type options interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// streams are the input and outputs of a command (cobra's, so that tests
// set them on the root command).
type streams struct {
	in          io.Reader
	out, errOut io.Writer
}

// streamsOf returns cmd's streams.
func streamsOf(cmd *cobra.Command) streams {
	return streams{in: cmd.InOrStdin(), out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
}

// runOptions is the RunE of a command with options o. An error of
// Complete or Validate is a usage error (exit 2, with the usage), an error
// of Run a runtime error (exit 1, without): unless the error says
// otherwise itself (a usageError from Run, about a flag only Run can
// judge; an exitError whose message has been printed).
func runOptions(o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return mark(err, func(err error) error { return &usageError{err} })
		}
		if err := o.Validate(); err != nil {
			return mark(err, func(err error) error { return &usageError{err} })
		}
		if err := o.Run(cmd.Context()); err != nil {
			return mark(err, func(err error) error { return &runtimeError{err} })
		}
		return nil
	}
}

// mark returns err as as makes it, unless err is marked already.
func mark(err error, as func(error) error) error {
	var ee *exitError
	var ue *usageError
	var re *runtimeError
	if errors.As(err, &ee) || errors.As(err, &ue) || errors.As(err, &re) {
		return err
	}
	return as(err)
}

// writeJSON writes v to w as indented JSON and a newline, with "<", ">"
// and "&" as they are (not escaped for HTML: "client-go < v0.30").
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
