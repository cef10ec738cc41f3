package cli

import (
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/fatih/color"
	"github.com/muesli/termenv"
)

// Styles are the few looks evfwd uses, bound to one stream so that text for
// a pipe or under NO_COLOR carries no escape codes.
type Styles struct {
	OK, Fail, Warn, Muted, Bold, Accent *color.Color
	// Box frames summaries; it renders plain on a non-colour stream.
	Box lipgloss.Style
}

// Symbols used in verdicts.
const (
	SymOK   = "✓"
	SymFail = "✗"
	SymNone = "–"
)

// NewStyles returns styles for w; colour decides whether they paint.
func NewStyles(w io.Writer, colour bool) *Styles {
	mk := func(attrs ...color.Attribute) *color.Color {
		c := color.New(attrs...)
		// fatih/color decides from stdout alone; the stream's own
		// decision wins.
		if colour {
			c.EnableColor()
		} else {
			c.DisableColor()
		}
		return c
	}
	r := lipgloss.NewRenderer(w)
	if !colour {
		r.SetColorProfile(termenv.Ascii)
	}
	return &Styles{
		OK:     mk(color.FgGreen),
		Fail:   mk(color.FgRed),
		Warn:   mk(color.FgYellow),
		Muted:  mk(color.Faint),
		Bold:   mk(color.Bold),
		Accent: mk(color.FgCyan),
		Box:    r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("8")).Padding(0, 1),
	}
}

// OutStyles and ErrStyles bind styles to stdout and stderr.
func (s *IOStreams) OutStyles() *Styles { return NewStyles(s.Out, s.OutColor) }
func (s *IOStreams) ErrStyles() *Styles { return NewStyles(s.ErrOut, s.ErrColor) }
