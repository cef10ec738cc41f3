package mapping

import (
	"math/rand"
	"strconv"
	"strings"
)

// gen writes random mappings (the directive grammar: nested, combined, with
// bad arguments now and then) and hostile messages, as JSON text, so that
// repeated keys, escapes and number spellings reach both engines as sent.
// Keys never name a member JavaScript objects inherit (constructor,
// __proto__, toString...): evfwd reads own members only (see doc.go).
type gen struct {
	r     *rand.Rand
	dirty bool // this mapping may have bad arguments
}

var genKeys = []string{
	"a", "b", "c", "x", "y", "0", "1", "2", "01", "a.b", "length", "name", "email",
	"k k", "é", "😀", "$", "_metadata", "", "value", "items", "user", "id",
}

func (g *gen) pick(s []string) string { return s[g.r.Intn(len(s))] }
func (g *gen) chance(n int) bool      { return g.r.Intn(n) == 0 }

func (g *gen) key() string { return g.pick(genKeys) }

func quote(s string) string {
	var b []byte
	return string(appendQuoted(b, []byte(s)))
}

var genStrings = []string{
	"", " ", "hello", "Hello World", "ÉCOLE", "straße", "ǅ", "İstanbul", "ΣΑΣ", "😀 emoji", "a.b",
	"{{a}}", "{{{a}}}", "{{ a }}", "$&", "$$", "42", "-1.50", "true", "null", "{\"a\":1}", "[1,2]",
	"x@y.com", "  padded  ", "tab\there", "line\nbreak", "\u2028", "<&>", "aaa", "AbAb", "\u00a0nbsp",
	"1e3", "0", "{", "}", "\"quoted\"", "back\\slash", "ﬀ", "ᾀ", "K", "k", "ſ",
}

var genNumbers = []string{
	"0", "1", "-1", "1.0", "1.5", "-0", "0.0", "1e5", "1E-7", "123456789", "12345678901234567890",
	"9007199254740993", "0.1", "1e21", "1e-7", "2.5e-3", "3.14159", "100", "1e400", "-1e400", "1e-400",
}

// str is a string as JSON text: sometimes with escapes a sender might use.
func (g *gen) str() string {
	s := g.pick(genStrings)
	if g.chance(6) {
		s = g.pick(genKeys)
	}
	q := quote(s)
	if g.chance(5) && s != "" { // \u-escape an ASCII letter
		for i := 1; i < len(q)-1; i++ {
			if c := q[i]; c >= 'a' && c <= 'z' {
				return q[:i] + `\u00` + strconv.FormatInt(int64(c), 16) + q[i+1:]
			}
		}
	}
	if g.chance(20) {
		return quote(strings.Repeat("long ", 200+g.r.Intn(300)))
	}
	return q
}

// msgValue is a hostile message value.
func (g *gen) msgValue(depth int) string {
	n := 9
	if depth > 4 {
		n = 5
	}
	switch g.r.Intn(n) {
	case 0:
		return "null"
	case 1:
		if g.chance(2) {
			return "true"
		}
		return "false"
	case 2, 3:
		return g.pick(genNumbers)
	case 4:
		return g.str()
	case 5, 6:
		return g.msgObject(depth + 1)
	case 7:
		var parts []string
		for i := g.r.Intn(4); i > 0; i-- {
			parts = append(parts, g.msgValue(depth+1))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if depth < 30 && g.chance(3) { // deep nesting
		return g.msgObject(depth + 5)
	}
	return g.str()
}

func (g *gen) msgObject(depth int) string {
	var parts []string
	for i := g.r.Intn(5); i > 0; i-- {
		sp := ""
		if g.chance(10) {
			sp = " \n"
		}
		parts = append(parts, quote(g.key())+":"+sp+g.msgValue(depth))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// message is a track call with hostile properties.
func (g *gen) message() string {
	parts := []string{
		`"type":"track"`, `"event":` + g.str(), `"userId":` + g.msgValue(3),
		`"properties":` + g.msgObject(1), `"context":` + g.msgObject(2),
	}
	for i := g.r.Intn(6); i > 0; i-- {
		parts = append(parts, quote(g.key())+":"+g.msgValue(1))
	}
	g.r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{" + strings.Join(parts, ",") + "}"
}

// path is a path as a mapping names it.
func (g *gen) path() string {
	var b strings.Builder
	if g.chance(3) {
		b.WriteString("$.")
	}
	heads := []string{"properties", "context", "userId", "event", "traits", "a", "x", "0"}
	b.WriteString(g.pick(heads))
	for i := g.r.Intn(4); i > 0; i-- {
		switch g.r.Intn(8) {
		case 0:
			b.WriteString("[" + strconv.Itoa(g.r.Intn(3)) + "]")
		case 1:
			b.WriteString(`["` + g.key() + `"]`)
		case 2:
			b.WriteString("..")
			b.WriteString(g.key())
		default:
			b.WriteString(".")
			b.WriteString(g.key())
		}
	}
	if g.chance(30) {
		return g.pick([]string{"", ".", "$.", "a[b]", "properties]", "[0]", " properties "})
	}
	return b.String()
}

func (g *gen) template() string {
	var b strings.Builder
	for i := g.r.Intn(4); i >= 0; i-- {
		switch g.r.Intn(7) {
		case 0:
			b.WriteString("{{{" + g.path() + "}}}")
		case 1, 2, 3:
			sp := g.pick([]string{"", " ", "\u00a0", "\t"})
			b.WriteString("{{" + sp + g.path() + sp + "}}")
		case 4:
			b.WriteString(g.pick([]string{"{{", "}}", "{", "}", "{{}}", "{{ }}", "{{{{a}}}}"}))
		default:
			b.WriteString(g.pick(genStrings))
		}
	}
	return b.String()
}

// lit is a JSON literal for a mapping.
func (g *gen) lit(depth int) string {
	switch g.r.Intn(6) {
	case 0:
		return "null"
	case 1:
		return g.pick([]string{"true", "false"})
	case 2:
		return g.pick(genNumbers)
	case 3:
		return g.str()
	}
	if depth > 3 {
		return g.str()
	}
	return g.msgValue(depth + 2)
}

// value is a mapping value: a literal, a directive, an object or array of
// them.
func (g *gen) value(depth int) string {
	if depth > 4 {
		if g.chance(2) {
			return g.lit(depth)
		}
		return `{"@path":` + quote(g.path()) + `}`
	}
	switch g.r.Intn(10) {
	case 0:
		return g.lit(depth)
	case 1:
		return g.object(depth + 1)
	case 2:
		var parts []string
		for i := g.r.Intn(3); i > 0; i-- {
			parts = append(parts, g.value(depth+1))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return g.directive(depth + 1)
}

func (g *gen) object(depth int) string {
	var parts []string
	for i := g.r.Intn(4) + 1; i > 0; i-- {
		parts = append(parts, quote(g.key())+":"+g.value(depth))
	}
	if g.dirty && g.chance(10) { // an @-key beside others: not a directive
		parts = append(parts, `"@path":"a"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// bad is, now and then, a wrong argument in place of a good one.
func (g *gen) bad(good string, depth int) string {
	if g.dirty && g.chance(8) {
		return g.pick([]string{"null", "5", `""`, "true", "[]", "{}", `{"@nope":1}`, `{"@path":5}`, `"x"`, `[{"@path":7}]`})
	}
	return good
}

func (g *gen) fields(depth int, fs ...string) string {
	var parts []string
	for i := 0; i+1 < len(fs); i += 2 {
		if fs[i+1] == "" || g.dirty && g.chance(15) {
			continue
		}
		parts = append(parts, quote(fs[i])+":"+g.bad(fs[i+1], depth))
	}
	if g.chance(15) {
		parts = append(parts, quote(g.key())+":"+g.lit(depth))
	}
	g.r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{" + strings.Join(parts, ",") + "}"
}

func (g *gen) opt(s string) string {
	if g.chance(2) {
		return ""
	}
	return s
}

func (g *gen) strOrDirective(depth int) string {
	if g.chance(3) {
		return g.directive(depth + 1)
	}
	return g.str()
}

func (g *gen) directive(depth int) string {
	if g.dirty && g.chance(25) {
		return `{"@nope":1}`
	}
	if g.chance(300) { // evfwd refuses it on purpose
		return `{"@liquid":"{{ userId }}"}`
	}
	name := g.pick([]string{"@path", "@path", "@template", "@template", "@literal", "@if", "@if", "@arrayPath",
		"@case", "@replace", "@json", "@flatten", "@merge", "@transform", "@excludeWhenNull"})
	var arg string
	switch name {
	case "@path":
		arg = quote(g.path())
		if g.chance(10) {
			arg = g.directive(depth + 1)
		}
	case "@template":
		arg = quote(g.template())
		if g.chance(15) {
			arg = g.directive(depth + 1)
		}
	case "@literal", "@excludeWhenNull":
		arg = g.value(depth)
	case "@if":
		test := `"exists"`
		if g.chance(2) {
			test = `"blank"`
		}
		arg = g.fields(depth, test[1:len(test)-1], g.value(depth), "then", g.opt(g.value(depth)), "else", g.opt(g.value(depth)))
	case "@arrayPath":
		p := quote(g.path())
		if g.chance(4) {
			p = g.directive(depth + 1)
		}
		parts := []string{p}
		if !g.chance(5) {
			parts = append(parts, g.object(depth+1))
		}
		arg = g.bad("["+strings.Join(parts, ",")+"]", depth)
	case "@case":
		arg = g.fields(depth, "operator", quote(g.pick([]string{"lower", "upper", "lower", "upper", "UPPER", "title"})),
			"value", g.strOrDirective(depth))
	case "@replace":
		arg = g.fields(depth, "pattern", quote(g.pick([]string{"a", "A", ".", " ", "$", "l", "ß", "é", "😀", "{{", "aa", "toolongpattern", "k", "σ"})),
			"replacement", g.opt(quote(g.pick([]string{"", "-", "$&", "$$", "$`", "$'", "$1", "X", "elevenchars"}))),
			"value", g.strOrDirective(depth),
			"ignorecase", g.opt(g.pick([]string{"true", "false"})),
			"global", g.opt(g.pick([]string{"true", "false"})),
			"pattern2", g.opt(quote(g.pick([]string{"b", "-", "toolongpattern2"}))),
			"replacement2", g.opt(quote(g.pick([]string{"", "B"}))))
	case "@json":
		arg = g.fields(depth, "mode", quote(g.pick([]string{"encode", "decode", "decode", "ENCODE", "other"})), "value", g.value(depth))
	case "@flatten":
		arg = g.fields(depth, "separator", quote(g.pick([]string{".", "_", "", "->"})), "value", g.value(depth),
			"omitArrays", g.opt(g.pick([]string{"true", "false", "1", `"no"`})))
	case "@merge":
		var objs []string
		for i := g.r.Intn(3) + 1; i > 0; i-- {
			if g.chance(2) {
				objs = append(objs, g.directive(depth+1))
			} else {
				objs = append(objs, g.object(depth+1))
			}
		}
		arg = g.fields(depth, "direction", quote(g.pick([]string{"left", "right", "LEFT", "up"})), "objects", "["+strings.Join(objs, ",")+"]")
	case "@transform":
		arg = g.fields(depth, "apply", g.object(depth+1), "mapping", g.object(depth+1))
	case "@nope":
		arg = "1"
	}
	out := `{"` + name + `":` + arg
	if g.chance(30) {
		out += `,"_metadata":{"x":1}`
	}
	if g.dirty && g.chance(20) {
		out += `,"@path":"a"`
	}
	return out + "}"
}

// mapping is a whole mapping: an object of fields.
func (g *gen) mapping() string {
	g.dirty = g.chance(3)
	if g.chance(40) {
		return `{"__segment_internal_directive":{"@arrayPath":["properties.items",{}]},"n":{"@path":"name"}}`
	}
	return g.object(0)
}
