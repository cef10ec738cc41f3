package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/muesli/termenv"
)

// sgr matches a colour escape (Select Graphic Rendition).
var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestStylesFollowTheStream: each look paints exactly when its stream's
// decision says so. The test's own stdout is no terminal, so fatih/color's
// global guess (color.NoColor) is "no colour": the colour cases show the
// per-Color switch overrides it, and the others that nothing leaks.
func TestStylesFollowTheStream(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tt := range []struct {
		name   string
		tty    bool
		getenv func(string) string
		colour bool
	}{
		{"terminal", true, env("TERM", "xterm-256color"), true},
		{"NO_COLOR", true, env("TERM", "xterm-256color", "NO_COLOR", "1"), false},
		{"TERM=dumb", true, env("TERM", "dumb"), false},
		{"pipe", false, env(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			colour := ColorFor(tt.tty, tt.getenv)
			if colour != tt.colour {
				t.Fatalf("ColorFor = %v, want %v", colour, tt.colour)
			}
			var b strings.Builder
			st := NewStyles(&b, colour)
			looks := map[string]Style{"OK": st.OK, "Fail": st.Fail, "Warn": st.Warn, "Muted": st.Muted, "Bold": st.Bold, "Accent": st.Accent}
			for name, s := range looks {
				got := s.Sprint(SymOK) + s.Sprintf(" %d", 1)
				if painted := strings.Contains(got, "\x1b["); painted != colour {
					t.Errorf("%s: %q: painted %v, want %v", name, got, painted, colour)
				}
				if plain := sgr.ReplaceAllString(got, ""); plain != SymOK+" 1" {
					t.Errorf("%s: text changed: %q", name, plain)
				}
			}
			if box := st.Box.Render("x"); strings.Contains(box, "\x1b[") != colour {
				t.Errorf("Box: %q: painted %v, want %v", box, !colour, colour)
			}
		})
	}
}

// TestLipglossProfiles: the profiles NewStyles gives lipgloss's renderer
// are termenv's ANSI and Ascii, which lipgloss v1's SetColorProfile takes.
func TestLipglossProfiles(t *testing.T) {
	if profileANSI != termenv.ANSI || profileASCII != termenv.Ascii {
		t.Errorf("profileANSI, profileASCII = %d, %d; termenv's ANSI, Ascii are %d, %d",
			profileANSI, profileASCII, termenv.ANSI, termenv.Ascii)
	}
}
