package mapping

// A template is rendered as mapping-kit renders it: first every
// {{{path}}}, then every {{path}} in what that gave (so text a
// triple-brace placeholder put in is scanned for double ones too). A
// placeholder's path is trimmed and read with get; undefined and null
// become "", anything else String(value) ("[object Object]" for an
// object, an array's elements joined with commas).

// placeholder is one part of a template: text, or a path to read.
type tpart struct {
	text  string
	segs  []string
	whole bool
	isVar bool
}

// findPlaceholder finds the next placeholder with n braces in s from i:
// n opening braces, one or more characters other than '}', n closing.
func findPlaceholder(s string, i, n int) (start, end int, inner string, ok bool) {
	for ; i+2*n < len(s); i++ {
		if !braces(s, i, '{', n) {
			continue
		}
		j := i + n
		for j < len(s) && s[j] != '}' {
			j++
		}
		if j == i+n || !braces(s, j, '}', n) {
			continue
		}
		return i, j + n, s[i+n : j], true
	}
	return 0, 0, "", false
}

func braces(s string, i int, c byte, n int) bool {
	if i+n > len(s) {
		return false
	}
	for k := 0; k < n; k++ {
		if s[i+k] != c {
			return false
		}
	}
	return true
}

// parseTemplate splits s into its {{path}} parts.
func parseTemplate(s string, n int) []tpart {
	var parts []tpart
	i := 0
	for {
		start, end, inner, ok := findPlaceholder(s, i, n)
		if !ok {
			break
		}
		if start > i {
			parts = append(parts, tpart{text: s[i:start]})
		}
		segs, whole := splitPath(jsTrim(inner))
		parts = append(parts, tpart{segs: segs, whole: whole, isVar: true})
		i = end
	}
	if i < len(s) {
		parts = append(parts, tpart{text: s[i:]})
	}
	return parts
}

// compiledTemplate is a template known at Parse: when it has no
// triple-brace placeholder its double ones are split once.
type compiledTemplate struct {
	src    string
	parts  []tpart // nil when triple is set
	triple bool
}

func compileTemplate(s string) *compiledTemplate {
	t := &compiledTemplate{src: s}
	if _, _, _, ok := findPlaceholder(s, 0, 3); ok {
		t.triple = true
		return t
	}
	t.parts = parseTemplate(s, 2)
	return t
}

// render appends the template rendered over data to dst.
func (t *compiledTemplate) render(dst []byte, data value) []byte {
	if !t.triple {
		return renderParts(dst, t.parts, data)
	}
	first := string(renderParts(nil, parseTemplate(t.src, 3), data))
	return renderParts(dst, parseTemplate(first, 2), data)
}

func renderParts(dst []byte, parts []tpart, data value) []byte {
	for _, p := range parts {
		if !p.isVar {
			dst = append(dst, p.text...)
			continue
		}
		dst = appendJSString(dst, getPath(data, p.segs, p.whole))
	}
	return dst
}

// renderString renders a template known only at Apply.
func renderString(dst []byte, s string, data value) []byte {
	return compileTemplate(s).render(dst, data)
}
