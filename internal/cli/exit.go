package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
)

// Exit codes, the same for every command (DESIGN §6).
const (
	ExitOK          = 0   // success
	ExitFailure     = 1   // the job failed: invalid signature, delivery failed, events rejected
	ExitUsage       = 2   // usage or input error
	ExitInterrupted = 130 // interrupted (Ctrl-C)
)

// ExitError carries the exit code a command ends with. An ExitError with a
// nil Err prints nothing: the command already said what happened.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError marks err as a usage or input error (exit 2).
func UsageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// UsageErrorf formats a usage or input error (exit 2).
func UsageErrorf(format string, a ...any) error { return UsageError(fmt.Errorf(format, a...)) }

// Silent ends the command with code and prints nothing more.
func Silent(code int) error { return &ExitError{Code: code} }

// inputError is an error of a library package that is the user's input
// at fault (a store path that is a directory, say): exit 2 from whichever
// command meets it, without cmd wrapping each one.
type inputError interface {
	error
	InputError() bool
}

// ExitCode maps the error a command returned to the process exit code.
func ExitCode(err error) int {
	var ee *ExitError
	var ie inputError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ie) && ie.InputError():
		return ExitUsage
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	default:
		return ExitFailure
	}
}

// Message returns what to print for err, or "" when nothing should be.
// Errors often quote input (a path, a field, a server's answer), so the
// text is made printable.
func Message(err error) string {
	var ee *ExitError
	if errors.As(err, &ee) && ee.Err == nil {
		return ""
	}
	if errors.Is(err, context.Canceled) {
		return "interrupted"
	}
	return PrintableText(err.Error())
}

// Args wraps a cobra argument check so that a wrong argument count exits 2.
func Args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return UsageError(err)
		}
		return nil
	}
}
