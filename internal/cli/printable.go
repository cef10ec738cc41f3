package cli

import (
	"encoding"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"
)

// Printable returns s as text that cannot steer a terminal, for data in
// human-readable output (a userId, a path, a message id, a URL). Runes a
// terminal acts on are shown as Go-style escapes instead:
//
//   - C0 controls (U+0000–U+001F) and DEL: \t, \n, \r, else \x1b style;
//   - C1 controls (U+0080–U+009F): \u0085 style;
//   - the Unicode bidi controls that reorder what follows them on screen:
//     the embeddings and overrides U+202A–U+202E, the isolates
//     U+2066–U+2069 and the marks U+200E, U+200F, U+061C: \u202e style;
//   - a byte that is not UTF-8: \xff style.
//
// Tab and newline are escaped too: a field is one line and one column of a
// table (deliveries list is aligned on tabs). Everything else, letters of
// any script, emoji, U+FFFD itself and the backslash, passes unchanged; when
// nothing needs escaping s itself is returned, without allocating.
func Printable(s string) string { return printable(s, false) }

// PrintableText is Printable for text of several lines, a body or an error
// message: newline and tab pass (they only move the cursor forward), a
// carriage return does not (it lets a line overwrite what came before).
func PrintableText(s string) string { return printable(s, true) }

func printable(s string, lines bool) string {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			if lines && (c == '\n' || c == '\t') {
				i++
				continue
			}
			return escape(s, i, lines)
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || steers(r) {
			return escape(s, i, lines)
		}
		i += n
	}
	return s
}

// steers reports whether a terminal acts on r (beyond ASCII): a C1
// control or a bidi control.
func steers(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f,
		r >= 0x202a && r <= 0x202e,
		r >= 0x2066 && r <= 0x2069,
		r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

const hexDigits = "0123456789abcdef"

// escape writes s with its unsafe runes escaped, s[:i] known clean.
func escape(s string, i int, lines bool) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= 0x20 && c < 0x7f, lines && (c == '\n' || c == '\t'):
				b.WriteByte(c)
			case c == '\t':
				b.WriteString(`\t`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			default:
				b.WriteString(`\x`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		case steers(r): // all of them below U+10000
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[(r>>shift)&0xf])
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// PrintableAttr is a slog ReplaceAttr for text logs: string values, and
// errors and other values as the handler would print them, made
// Printable. slog's TextHandler quotes most of what Printable escapes,
// but not DEL, and values quoted or not stay one line each.
func PrintableAttr(_ []string, a slog.Attr) slog.Attr {
	var s string
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		s = v.String()
	case slog.KindAny:
		switch x := v.Any().(type) {
		case []byte:
			return a // the handler quotes a byte slice whole
		case error:
			s = x.Error()
		case encoding.TextMarshaler:
			b, err := x.MarshalText()
			if err != nil {
				return a
			}
			s = string(b)
		default:
			s = fmt.Sprintf("%+v", x)
		}
	default:
		return a
	}
	if p := Printable(s); p != s {
		a.Value = slog.StringValue(p)
	}
	return a
}
