package fql

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// SyntaxError is why Parse refused a condition, and where. Quirk tells the
// two kinds apart: false, Segment's parser refuses the condition too;
// true, Segment's parser accepts it but decides it against its plain
// meaning (or may fail on it), so evfwd refuses it and Msg says how to
// write it instead.
type SyntaxError struct {
	Line   int // 1-based
	Column int // 1-based, in characters
	Msg    string
	Quirk  bool
	src    string
}

func (e *SyntaxError) Error() string {
	var b strings.Builder
	b.WriteString("fql: ")
	if e.Quirk {
		b.WriteString("refused ")
	} else {
		b.WriteString("syntax error ")
	}
	if e.Line > 1 {
		b.WriteString("at line " + strconv.Itoa(e.Line) + ", column " + strconv.Itoa(e.Column))
	} else {
		b.WriteString("at column " + strconv.Itoa(e.Column))
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Caret returns the condition's line the error is on and, below it, a
// caret under the column.
func (e *SyntaxError) Caret() string {
	lines := strings.Split(e.src, "\n")
	if e.Line < 1 || e.Line > len(lines) {
		return ""
	}
	line := lines[e.Line-1]
	var pad strings.Builder
	col := 1
	for _, r := range line {
		if col >= e.Column {
			break
		}
		if r == '\t' {
			pad.WriteByte('\t')
		} else {
			pad.WriteByte(' ')
		}
		col++
	}
	return line + "\n" + pad.String() + "^"
}

// newError places an error at an offset in code units of src.
func newError(src string, unit int, msg string, quirk bool) *SyntaxError {
	e := &SyntaxError{Line: 1, Column: 1, Msg: msg, Quirk: quirk, src: src}
	u := 0
	for _, r := range src {
		if u >= unit {
			break
		}
		if r == '\n' {
			e.Line++
			e.Column = 1
		} else {
			e.Column++
		}
		u++
		if r >= 0x10000 {
			u++
		}
	}
	return e
}

// invalidUTF8 places the error at the first byte that is not UTF-8.
func invalidUTF8(src string) *SyntaxError {
	i := 0
	for i < len(src) {
		r, n := utf8.DecodeRuneInString(src[i:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		i += n
	}
	return newError(src, len(toUnits(src[:i])), "the condition is not valid UTF-8", false)
}
