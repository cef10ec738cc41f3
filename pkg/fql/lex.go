package fql

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The lexer below follows @segment/fql-ts 1.10.1's, step for step, over
// UTF-16 code units as JavaScript strings are: which text it accepts, and
// how it splits what it accepts, is what Segment's parser then reads. Its
// oddities are kept on purpose (a closing quote followed by a letter is
// read again as an opening one, "<=5" is "<" then "=", "and(" is an
// identifier, a string has no escapes); the checker (check.go) refuses the
// conditions they would change the meaning of.

type tokKind uint8

const (
	tkIdent tokKind = iota
	tkDot
	tkOperator
	tkConditional
	tkString
	tkNumber
	tkNull
	tkBrackLeft
	tkBrackRight
	tkParenLeft
	tkParenRight
	tkComma
	tkEOS
)

// token is one of fql-ts's tokens; pos and end are offsets in code units.
type token struct {
	kind     tokKind
	val      string
	pos, end int
	escSep   bool // an identifier with an escaped ".", "[" or "]" in it
}

// eosChar is what the lexer reads past the end (fql-ts's EOS_FLAG, "-1",
// which no single character equals).
const eosChar = -1

// maxLen is fql-ts's bound on the length of one identifier, number or
// string, in code units.
const maxLen = 100000

type lexer struct {
	u   []uint16
	pos int
}

// lexError is fql-ts's LexerError: the message and the offset it stopped at.
type lexError struct {
	msg string
	pos int
}

func (e *lexError) Error() string { return e.msg }

func lexSegment(u []uint16) ([]token, error) {
	l := &lexer{u: u}
	return l.lex()
}

func (l *lexer) next() int {
	if l.pos == len(l.u) {
		return eosChar
	}
	c := l.u[l.pos]
	l.pos++
	return int(c)
}

func (l *lexer) peek() int {
	c := l.next()
	if c != eosChar {
		l.pos--
	}
	return c
}

func (l *lexer) backup(n int) {
	for ; n > 0 && l.pos > 0; n-- {
		l.pos--
	}
}

// accept consumes s when it is next and followed by a terminator. Like
// fql-ts's, it gives back nothing it read when it meets the end.
func (l *lexer) accept(s string) bool {
	n := 0
	same := true
	for i := 0; i < len(s); i++ {
		c := l.next()
		if c == eosChar {
			return false
		}
		n++
		if c != int(s[i]) {
			same = false
		}
		if isTerminator(c) {
			if i != len(s)-1 {
				same = false
			}
			break
		}
	}
	if same && isTerminator(l.peek()) {
		return true
	}
	l.backup(n)
	return false
}

func isWhitespace(c int) bool { return c == ' ' || c == '\t' || c == '\n' }
func isAlpha(c int) bool      { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c int) bool      { return c >= '0' && c <= '9' }
func isIdentChar(c int) bool {
	return isAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '\\'
}
func isTerminator(c int) bool {
	return c == eosChar || isWhitespace(c) || c == ',' || c == ']' || c == ')'
}

func (l *lexer) fail(msg string) error { return &lexError{msg: msg, pos: l.pos} }

func (l *lexer) lex() ([]token, error) {
	var toks []token
	for {
		start := l.pos
		c := l.next()
		if c == eosChar {
			return append(toks, token{kind: tkEOS, val: "eos", pos: start, end: start}), nil
		}
		if isWhitespace(c) {
			continue
		}
		if c == '!' {
			if n := l.peek(); isAlpha(n) || n == '(' {
				toks = append(toks, token{kind: tkOperator, val: "!", pos: start, end: l.pos})
				continue
			}
		}
		var t token
		var err error
		switch {
		case isAlpha(c) || c == '!' || c == '=' || c == '>' || c == '<' || c == '\\' || c == '_':
			t, err = l.lexOperatorOrConditional(c)
		case isDigit(c) || c == '-' || c == '+':
			t, err = l.lexNumber(c)
		case c == '"' || c == '\'':
			t, err = l.lexString(c)
		case c == '.':
			t = token{kind: tkDot, val: "."}
		case c == '[':
			t = token{kind: tkBrackLeft, val: "["}
		case c == ']':
			t = token{kind: tkBrackRight, val: "]"}
		case c == ',':
			t = token{kind: tkComma, val: ","}
		case c == '(':
			t = token{kind: tkParenLeft, val: "("}
		case c == ')':
			t = token{kind: tkParenRight, val: ")"}
		default:
			return nil, &lexError{msg: "invalid character " + quoteUnit(c), pos: start}
		}
		if err != nil {
			return nil, err
		}
		t.pos, t.end = start, l.pos
		toks = append(toks, t)
	}
}

func quoteUnit(c int) string {
	switch {
	case c == eosChar:
		return "the end"
	case c >= 0xD800 && c <= 0xDFFF:
		return "a character outside the Basic Multilingual Plane (only its first half can be escaped)"
	}
	return strconv.QuoteRune(rune(c))
}

func (l *lexer) lexString(quote int) (token, error) {
	var s []uint16
	for l.peek() != quote {
		c := l.next()
		if c == eosChar {
			return token{}, l.fail("unterminated string")
		}
		s = append(s, uint16(c))
		if len(s) >= maxLen {
			return token{}, l.fail("string too long")
		}
	}
	// fql-ts eats the closing quote only when a terminator follows it;
	// otherwise the quote is read again, as the start of another string.
	l.accept(string(rune(quote)))
	q := string(rune(quote))
	return token{kind: tkString, val: q + decode(s) + q}, nil
}

func (l *lexer) lexNumber(first int) (token, error) {
	var s []uint16
	decimal := false
	for c := l.peek(); isDigit(c) || c == '.'; c = l.peek() {
		l.next()
		s = append(s, uint16(c))
		if c == '.' {
			if isTerminator(l.peek()) {
				return token{}, l.fail("a decimal point must be followed by a digit")
			}
			if decimal {
				return token{}, l.fail("a number has one decimal point at most")
			}
			decimal = true
		}
		if len(s) >= maxLen {
			return token{}, l.fail("number too long")
		}
	}
	return token{kind: tkNumber, val: string(rune(first)) + decode(s)}, nil
}

func (l *lexer) lexOperatorOrConditional(first int) (token, error) {
	switch first {
	case '=':
		return token{kind: tkOperator, val: "="}, nil
	case '!':
		if l.accept("=") {
			return token{kind: tkOperator, val: "!="}, nil
		}
		return token{}, l.fail("expected = after !, and a space after !=")
	case 'a':
		if l.accept("nd") {
			return token{kind: tkConditional, val: "and"}, nil
		}
	case 'o':
		if l.accept("r") {
			return token{kind: tkConditional, val: "or"}, nil
		}
	case 'n':
		if l.accept("ull") {
			return token{kind: tkNull, val: "null"}, nil
		}
	case '<', '>':
		if l.accept("=") {
			return token{kind: tkOperator, val: string(rune(first)) + "="}, nil
		}
		return token{kind: tkOperator, val: string(rune(first))}, nil
	}
	return l.lexIdent(first)
}

func (l *lexer) lexIdent(first int) (token, error) {
	var s []uint16
	c := first
	escSep := false
	for {
		if c == '\\' {
			if l.peek() == eosChar {
				return token{}, l.fail("expected a character after \\")
			}
			c = l.next()
			escSep = escSep || c == '.' || c == '[' || c == ']'
		}
		s = append(s, uint16(c))
		if len(s) >= maxLen {
			return token{}, l.fail("identifier too long")
		}
		if !isIdentChar(l.peek()) {
			break
		}
		c = l.next()
	}
	switch n := l.peek(); {
	case isTerminator(n), n == '.', n == '(', n == '=', n == '!':
	default:
		return token{}, l.fail("expected a space, operator or end after an identifier, got " + quoteUnit(n))
	}
	return token{kind: tkIdent, val: decode(s), escSep: escSep}, nil
}

// decode turns code units back into a Go string. A surrogate half alone
// becomes its WTF-8 bytes (as message strings do, see scan.go), so that
// no two different JavaScript strings become one Go string.
func decode(s []uint16) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		c := rune(s[i])
		if utf16.IsSurrogate(c) && c < 0xDC00 && i+1 < len(s) && s[i+1] >= 0xDC00 && s[i+1] <= 0xDFFF {
			b = appendRune(b, utf16.DecodeRune(c, rune(s[i+1])))
			i++
			continue
		}
		b = appendRune(b, c)
	}
	return string(b)
}

// appendRune appends r as UTF-8, or a surrogate half as WTF-8 does.
func appendRune(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, 0xED, byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(b, r)
}
