package mapping

import (
	"strings"
	"unicode/utf8"
)

// splitPath splits a path as mapping-kit's get does: at every ".", at a
// "[" before a quote or digit, and at a run of "]" after a quote or digit;
// empty parts are dropped, then quotes removed from the rest (so a["x"]
// reads x, and a[""] reads the key ""). Only "" and "." are the whole
// payload: those give nil, whole true.
func splitPath(p string) (segs []string, whole bool) {
	if p == "" || p == "." {
		return nil, true
	}
	start := 0
	add := func(end int) {
		if end > start {
			s := p[start:end]
			if strings.ContainsAny(s, `'"`) {
				s = strings.NewReplacer(`'`, "", `"`, "").Replace(s)
			}
			segs = append(segs, s)
		}
	}
	quoteOrDigit := func(c byte) bool { return c == '"' || c == '\'' || c >= '0' && c <= '9' }
	for i := 0; i < len(p); {
		switch c := p[i]; {
		case c == '[' && i+1 < len(p) && quoteOrDigit(p[i+1]):
			add(i)
			i++
			start = i
		case c == '.':
			add(i)
			i++
			start = i
		case c == ']' && i > 0 && quoteOrDigit(p[i-1]):
			add(i)
			for i < len(p) && p[i] == ']' {
				i++
			}
			start = i
		default:
			i++
		}
	}
	add(len(p))
	return segs, false
}

// dollarPath is path.replace('$.', ”): the first "$." anywhere goes.
func dollarPath(p string) string {
	if i := strings.Index(p, "$."); i >= 0 {
		return p[:i] + p[i+2:]
	}
	return p
}

// getPath is mapping-kit's get over split segments: each step reads
// prev && prev[key], so a falsy value (null, false, 0, "") part way is the
// answer itself.
func getPath(v value, segs []string, whole bool) value {
	if whole {
		return v
	}
	for _, s := range segs {
		if !v.truthy() {
			return v
		}
		v = v.get(s)
	}
	return v
}

// jsTrim is String.prototype.trim: JavaScript's white space and line
// terminators, which are not Go's unicode.IsSpace (no U+0085, but U+FEFF).
func jsTrim(s string) string {
	isSpace := func(r rune) bool {
		switch r {
		case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
			return true
		}
		return r >= 0x2000 && r <= 0x200a
	}
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if !isSpace(r) {
			break
		}
		s = s[size:]
	}
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if !isSpace(r) {
			break
		}
		s = s[:len(s)-size]
	}
	return s
}
