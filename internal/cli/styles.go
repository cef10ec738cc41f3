package cli

import (
	"fmt"
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Styles are the few looks evfwd uses, bound to one stream so that text for
// a pipe or under NO_COLOR carries no escape codes.
type Styles struct {
	OK, Fail, Warn, Muted, Bold, Accent Style
	// Box frames summaries; it renders plain on a non-colour stream.
	Box lipgloss.Style
}

// Style paints a piece of inline text in one look. It is the termenv style
// lipgloss renders with, used directly: a lipgloss.Style would also lay
// the text out (pad the lines of multi-line text to one width, turn tabs
// into spaces), and a command's text must stay its own, colour or not.
type Style struct{ t termenv.Style }

// Sprint paints fmt.Sprint(a...).
func (s Style) Sprint(a ...any) string { return s.t.Styled(fmt.Sprint(a...)) }

// Sprintf paints fmt.Sprintf(format, a...).
func (s Style) Sprintf(format string, a ...any) string { return s.t.Styled(fmt.Sprintf(format, a...)) }

// Symbols used in verdicts.
const (
	SymOK   = "✓"
	SymFail = "✗"
	SymNone = "–"
)

// NewStyles returns styles for w; colour decides whether they paint. The
// decision is the stream's (IOStreams), never lipgloss's own guess from
// w: the 16 basic colours on a colour stream, none otherwise.
func NewStyles(w io.Writer, colour bool) *Styles {
	r := lipgloss.NewRenderer(w)
	r.SetColorProfile(termenv.Ascii)
	if colour {
		r.SetColorProfile(termenv.ANSI)
	}
	p := r.ColorProfile()
	fg := func(c string) Style { return Style{p.String().Foreground(p.Color(c))} }
	return &Styles{
		OK:     fg("2"),
		Fail:   fg("1"),
		Warn:   fg("3"),
		Muted:  Style{p.String().Faint()},
		Bold:   Style{p.String().Bold()},
		Accent: fg("6"),
		Box:    r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("8")).Padding(0, 1),
	}
}

// OutStyles and ErrStyles bind styles to stdout and stderr.
func (s *IOStreams) OutStyles() *Styles { return NewStyles(s.Out, s.OutColor) }
func (s *IOStreams) ErrStyles() *Styles { return NewStyles(s.ErrOut, s.ErrColor) }
