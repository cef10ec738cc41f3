package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// steering is every rune Printable must not let through, by name.
func steering() map[string]string {
	m := map[string]string{}
	for c := 0; c < 0x20; c++ {
		m[fmt.Sprintf("C0 %#02x", c)] = string(rune(c))
	}
	m["DEL"] = "\x7f"
	for r := rune(0x80); r <= 0x9f; r++ {
		m[fmt.Sprintf("C1 %U", r)] = string(r)
	}
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x200e, 0x200f, 0x061c} {
		m[fmt.Sprintf("bidi %U", r)] = string(r)
	}
	m["invalid UTF-8"] = "\xff"
	m["truncated UTF-8"] = "\xe2\x80"
	return m
}

// unsafeRune reports the first rune of s a terminal could act on, or -1;
// lines lets newline and tab pass.
func unsafeRune(s string, lines bool) int {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return i
		case lines && (r == '\n' || r == '\t'):
		case r < 0x20, r == 0x7f, steers(r):
			return i
		}
	}
	return -1
}

func TestPrintableEscapesEveryControl(t *testing.T) {
	for name, c := range steering() {
		t.Run(name, func(t *testing.T) {
			for _, f := range []struct {
				name  string
				fn    func(string) string
				lines bool
			}{{"Printable", Printable, false}, {"PrintableText", PrintableText, true}} {
				in := "a" + c + "b"
				got := f.fn(in)
				if i := unsafeRune(got, f.lines); i >= 0 {
					t.Errorf("%s(%q) = %q: unsafe at %d", f.name, in, got, i)
				}
				if f.lines && (c == "\n" || c == "\t") {
					continue // they pass in text
				}
				if !strings.HasPrefix(got, "a") || !strings.HasSuffix(got, "b") || !strings.Contains(got, `\`) {
					t.Errorf("%s(%q) = %q, want it escaped between a and b", f.name, in, got)
				}
			}
		})
	}
}

func TestPrintable(t *testing.T) {
	for _, tt := range []struct {
		in, want, text string // text: PrintableText's answer when it differs
	}{
		{in: "", want: ""},
		{in: "u_42", want: "u_42"},
		{in: "Zoë 東京 🚀 مرحبا \uFFFD C:\\path", want: "Zoë 東京 🚀 مرحبا \uFFFD C:\\path"},
		{in: "\x1b]0;OWNED\a\x1b[2Jx", want: `\x1b]0;OWNED\x07\x1b[2Jx`},
		{in: "a\tb\nc\rd", want: `a\tb\nc\rd`, text: "a\tb\nc\\rd"},
		{in: "\x00\x7f", want: `\x00\x7f`},
		{in: "\u0085\u009b31m", want: `\u0085\u009b31m`},
		{in: "user\u202egpj.exe", want: `user\u202egpj.exe`},
		{in: "\u2066\u2069\u200e\u200f\u061c", want: `\u2066\u2069\u200e\u200f\u061c`},
		{in: "ok\xffé\xc3", want: `ok\xffé\xc3`},
	} {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) mismatch (-want +got):\n%s", tt.in, cmp.Diff(tt.want, got))
		}
		want := tt.want
		if tt.text != "" {
			want = tt.text
		}
		if got := PrintableText(tt.in); got != want {
			t.Errorf("PrintableText(%q) mismatch (-want +got):\n%s", tt.in, cmp.Diff(want, got))
		}
	}
}

func TestPrintableCleanDoesNotAllocate(t *testing.T) {
	s := "12:00:05.123  POST /hooks  track \"Order Completed\"  user=Zoë_東京_🚀"
	if n := testing.AllocsPerRun(100, func() { Printable(s) }); n != 0 {
		t.Errorf("Printable of clean text: %v allocations, want 0", n)
	}
}

func FuzzPrintable(f *testing.F) {
	for _, s := range steering() {
		f.Add("x" + s + "y")
	}
	f.Add("Zoë 東京 🚀")
	f.Add("\x1b]0;OWNED\a\x1b[2Jx")
	f.Fuzz(func(t *testing.T, s string) {
		for _, lines := range []bool{false, true} {
			got := printable(s, lines)
			if i := unsafeRune(got, lines); i >= 0 {
				t.Fatalf("printable(%q, %v) = %q: unsafe at %d", s, lines, got, i)
			}
			if unsafeRune(s, lines) < 0 && got != s {
				t.Fatalf("printable(%q, %v) = %q, want clean input unchanged", s, lines, got)
			}
			if again := printable(got, lines); again != got {
				t.Fatalf("printable is not idempotent on %q: %q then %q", s, got, again)
			}
		}
	})
}

func BenchmarkPrintable(b *testing.B) {
	for _, bb := range []struct{ name, s string }{
		{"ascii", "u_42 Order Completed /hooks/segment 5f1c9a2e-7d4b-4c1e-9a0f-3b2d1c0e9f8a"},
		{"unicode", "Zoë 東京 🚀 commande passée, 注文完了 ✓"},
		{"escape", "\x1b]0;OWNED\a\x1b[2Jx user\u202egpj.exe"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(bb.s)))
			b.ReportAllocs()
			for b.Loop() {
				Printable(bb.s)
			}
		})
	}
}

func TestPrintableAttr(t *testing.T) {
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(g []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return PrintableAttr(g, a)
	}}))
	log.Info("plain", "user", "Zoë", "n", 3, "err", errors.New("HTTP 500"), "b", []byte("\x1b"))
	log.Info("m\x7f", "user", "x\x7fy", "err", errors.New("a\u202eb"), "any", map[string]string{"k": "\x1b"})
	want := `level=INFO msg=plain user=Zoë n=3 err="HTTP 500" b="\x1b"
level=INFO msg=m\x7f user=x\x7fy err=a\u202eb any=map[k:\x1b]
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
