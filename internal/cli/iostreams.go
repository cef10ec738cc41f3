// Package cli holds what evfwd's commands share: IO streams with a TTY and
// colour decision per stream, output formats, exit codes, configuration and
// styles. Commands stay thin; libraries under pkg/ never import this.
package cli

import (
	"bytes"
	"io"
	"os"
	"runtime"

	"github.com/fatih/color"
	"golang.org/x/term"
)

// IOStreams is every byte a command reads or writes. Tests build one with
// Test and flip the TTY flags to see both renderings.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	InTTY, OutTTY, ErrTTY bool
	// OutColor and ErrColor are decided per stream: a TTY, NO_COLOR unset,
	// TERM not "dumb".
	OutColor, ErrColor bool
	// Terminal opens the controlling terminal for writing (/dev/tty,
	// CONOUT$ on Windows), whatever the streams are redirected to: for
	// what must reach the person at it and never a log (serve's sign-in
	// link). Nil, or an error, when there is none: a service, a container
	// without -t, a test.
	Terminal func() (io.WriteCloser, error)
}

// System returns the process's standard streams.
func System() *IOStreams {
	s := &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Terminal: openTerminal}
	s.InTTY = isTerminal(os.Stdin)
	s.OutTTY = isTerminal(os.Stdout)
	s.ErrTTY = isTerminal(os.Stderr)
	s.OutColor = ColorFor(s.OutTTY, os.Getenv)
	s.ErrColor = ColorFor(s.ErrTTY, os.Getenv)
	// An old Windows console shows colour codes as text: fatih/color's
	// streams translate them there (elsewhere they are os.Stdout and
	// os.Stderr themselves).
	if s.OutColor {
		s.Out = color.Output
	}
	if s.ErrColor {
		s.ErrOut = color.Error
	}
	return s
}

// ColorFor is the colour decision of one stream: a TTY, NO_COLOR unset
// (https://no-color.org: any non-empty value), TERM not "dumb".
func ColorFor(tty bool, getenv func(string) string) bool {
	return tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// openTerminal opens the process's controlling terminal for writing; it
// fails when the process has none.
func openTerminal() (io.WriteCloser, error) {
	name := "/dev/tty"
	if runtime.GOOS == "windows" {
		name = "CONOUT$"
	}
	return os.OpenFile(name, os.O_WRONLY, 0)
}

// Test returns streams backed by buffers, none of them a TTY, and no
// Terminal.
func Test() (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// SetTTY makes every stream a TTY (or not), colour off, for tests.
func (s *IOStreams) SetTTY(tty bool) {
	s.InTTY, s.OutTTY, s.ErrTTY = tty, tty, tty
	s.OutColor, s.ErrColor = false, false
}
