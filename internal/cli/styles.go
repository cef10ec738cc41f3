package cli

import (
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/fatih/color"
)

// Styles are the few looks evfwd uses, bound to one stream so that text for
// a pipe or under NO_COLOR carries no escape codes.
type Styles struct {
	OK, Fail, Warn, Muted, Bold, Accent Style
	// Box frames summaries; it renders plain on a non-colour stream.
	Box lipgloss.Style
}

// Style paints a piece of inline text in one look with a fatih/color
// Color, switched on or off for its own stream (EnableColor/DisableColor),
// never by color.NoColor, the package's guess from stdout alone. Inline
// text is not a lipgloss.Style's job: that would also lay the text out
// (pad the lines of multi-line text to one width, turn tabs into spaces),
// and a command's text must stay its own, colour or not.
type Style struct{ c *color.Color }

// Sprint paints fmt.Sprint(a...).
func (s Style) Sprint(a ...any) string { return s.c.Sprint(a...) }

// Sprintf paints fmt.Sprintf(format, a...).
func (s Style) Sprintf(format string, a ...any) string { return s.c.Sprintf(format, a...) }

// Symbols used in verdicts.
const (
	SymOK   = "✓"
	SymFail = "✗"
	SymNone = "–"
)

// NewStyles returns styles for w; colour decides whether they paint. The
// decision is the stream's (IOStreams), never a library's own guess from
// w or the environment: the 16 basic colours on a colour stream, none
// otherwise.
func NewStyles(w io.Writer, colour bool) *Styles {
	look := func(a ...color.Attribute) Style {
		c := color.New(a...)
		if colour {
			c.EnableColor()
		} else {
			c.DisableColor()
		}
		return Style{c}
	}
	r := lipgloss.NewRenderer(w)
	r.SetColorProfile(profileASCII)
	if colour {
		r.SetColorProfile(profileANSI)
	}
	return &Styles{
		OK:     look(color.FgGreen),
		Fail:   look(color.FgRed),
		Warn:   look(color.FgYellow),
		Muted:  look(color.Faint),
		Bold:   look(color.Bold),
		Accent: look(color.FgCyan),
		Box:    r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("8")).Padding(0, 1),
	}
}

// lipgloss v1 takes its renderer's colour profile as a termenv.Profile;
// these are that type's ANSI and Ascii values, given as untyped constants
// so that fatih/color stays the one colour library evfwd imports itself
// (TestLipglossProfiles pins them to termenv's).
const (
	profileANSI  = 2
	profileASCII = 3
)

// OutStyles and ErrStyles bind styles to stdout and stderr.
func (s *IOStreams) OutStyles() *Styles { return NewStyles(s.Out, s.OutColor) }
func (s *IOStreams) ErrStyles() *Styles { return NewStyles(s.ErrOut, s.ErrColor) }
