package fql

import (
	"strings"
)

// check reads the tokens as the plain grammar of a condition and builds the
// tree that grammar means. Parse accepts a condition only when Segment's
// parser builds this same tree from it; where Segment's parser accepts the
// text but builds another tree (or this grammar has no reading of it), the
// checker's message says what Segment would do and how to write the
// condition instead.
//
//	condition  = term { conj term }             (one conj throughout a level)
//	term       = "(" inner ")" | ["!"] function | comparison
//	inner      = item { conj item }             (no parentheses inside)
//	item       = ["!"] function | comparison
//	function   = ("contains" | "match") "(" field "," string ")"
//	comparison = field op value
func check(toks []token) (*node, *checkError) {
	return (&checker{toks: toks}).condition()
}

// checkError is a refusal at an offset (in code units) of the condition.
type checkError struct {
	pos int
	msg string
}

type checker struct {
	toks []token
	i    int
}

func (c *checker) cur() *token {
	if c.i >= len(c.toks) {
		return &c.toks[len(c.toks)-1] // the EOS token
	}
	return &c.toks[c.i]
}

func (c *checker) errAt(t *token, msg string) *checkError { return &checkError{pos: t.pos, msg: msg} }

func (c *checker) condition() (*node, *checkError) {
	n, err := c.seq(false)
	if err != nil {
		return nil, err
	}
	if t := c.cur(); t.kind != tkEOS {
		if t.kind == tkParenRight {
			return nil, c.errAt(t, "a ) without its (: Segment's engine skips it; remove it")
		}
		if msg := c.strayMessage(); msg != "" {
			return nil, c.errAt(t, msg)
		}
		return nil, c.errAt(t, "expected and, or or the end, got "+describe(t)+": Segment's engine skips what it cannot read; join comparisons with and / or")
	}
	if !n.group {
		n = &node{group: true, op: "and", kids: []*node{n}}
	}
	return n, nil
}

func (c *checker) seq(inner bool) (*node, *checkError) {
	first, err := c.term(inner)
	if err != nil {
		return nil, err
	}
	kids := []*node{first}
	conj := ""
	for c.cur().kind == tkConditional {
		t := c.cur()
		if conj != "" && t.val != conj {
			return nil, c.errAt(t, "and and or at one level: Segment's engine applies the last of them to the whole level (a and b or c means a or b or c); put parentheses around the and part, e.g. (a and b) or c")
		}
		conj = t.val
		c.i++
		n, err := c.term(inner)
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return first, nil
	}
	return &node{group: true, op: conj, kids: kids}, nil
}

func (c *checker) term(inner bool) (*node, *checkError) {
	t := c.cur()
	switch t.kind {
	case tkParenLeft:
		if inner {
			return nil, c.errAt(t, "parentheses inside parentheses: Segment's engine reads only one level of them")
		}
		c.i++
		if c.cur().kind == tkParenRight {
			return nil, c.errAt(t, "empty parentheses: Segment's engine fails on messages it reaches them with; remove them")
		}
		n, err := c.seq(true)
		if err != nil {
			return nil, err
		}
		if c.cur().kind != tkParenRight {
			if msg := c.strayMessage(); msg != "" {
				return nil, c.errAt(c.cur(), msg)
			}
			return nil, c.errAt(c.cur(), "expected ) or and / or, got "+describe(c.cur()))
		}
		c.i++
		return n, nil
	case tkOperator:
		if t.val == "!" {
			c.i++
			n := c.cur()
			if n.kind == tkIdent && (n.val == "contains" || n.val == "match") {
				return c.function(true)
			}
			if n.kind == tkParenLeft {
				return nil, c.errAt(t, "! before parentheses: Segment's engine ignores it, so !(type = \"page\") matches page events; negate inside instead: type != \"page\", !contains(...), !match(...), and swap and with or")
			}
			return nil, c.errAt(t, "! before a comparison: Segment's engine ignores it; write the opposite comparison instead (!= for =, = false for = true, = null for != null)")
		}
		return nil, c.errAt(t, "expected a field, contains(, match(, ! or (, got "+describe(t))
	case tkIdent:
		if t.val == "contains" || t.val == "match" {
			return c.function(false)
		}
		return c.comparison()
	case tkConditional:
		return nil, c.errAt(t, t.val+" with nothing before it: Segment's engine skips it; remove it")
	case tkEOS:
		return nil, c.errAt(t, "expected a condition")
	}
	return nil, c.errAt(t, "expected a field, contains(, match(, ! or (, got "+describe(t))
}

// strayMessage explains a token where and / or was expected, when it is
// one of the lexer's surprises.
func (c *checker) strayMessage() string {
	t := c.cur()
	if msg := conjMessage(t); msg != "" {
		return msg
	}
	if t.kind == tkIdent && (t.val[0] == 'e' || t.val[0] == 'E') && c.i > 0 && c.toks[c.i-1].kind == tkNumber && c.toks[c.i-1].end == t.pos {
		return "Segment's engine reads a number's exponent as a field name and skips it; write the number out in digits"
	}
	if t.kind == tkString && c.i > 0 && c.toks[c.i-1].kind == tkString && c.toks[c.i-1].end == t.pos {
		return "Segment's engine reads a closing quote that a letter or symbol follows as the opening quote of another string; put a space after the closing quote"
	}
	return ""
}

// conjMessage explains an identifier that was meant as and / or.
func conjMessage(t *token) string {
	if t.kind != tkIdent {
		return ""
	}
	switch strings.ToLower(t.val) {
	case "and", "or":
		if t.val == "and" || t.val == "or" {
			return "\"" + t.val + "(\" is a field name to Segment's engine, which skips it; put a space after " + t.val
		}
		return "\"" + t.val + "\" is a field name to Segment's engine, which skips it; write " + strings.ToLower(t.val) + " in lower case"
	}
	return ""
}

func describe(t *token) string {
	switch t.kind {
	case tkEOS:
		return "the end"
	case tkString:
		return "the string " + t.val
	case tkNumber:
		return "the number " + t.val
	}
	return "\"" + t.val + "\""
}

// field checks a field's name: the kind of field (Segment's condition type)
// and, for properties, traits and context, the path below it.
func (c *checker) field(t *token, fn string) (ct, name string, err *checkError) {
	if t.kind != tkIdent {
		return "", "", c.errAt(t, "expected a field, got "+describe(t))
	}
	start, rest, dotted := strings.Cut(t.val, ".")
	ct, ok := conditionTypes[start]
	if !ok {
		if msg := conjMessage(t); msg != "" {
			return "", "", c.errAt(t, msg)
		}
		return "", "", c.errAt(t, "unknown field \""+t.val+"\": Segment's engine skips it; a condition reads type, event, name, userId, properties.*, traits.* and context.*")
	}
	if fn != "" && ct == "event-type" {
		return "", "", c.errAt(t, fn+"() on type: Segment's engine skips it; compare type with = or !=")
	}
	if _, isPath := pathPrefix[ct]; !isPath {
		if dotted {
			return "", "", c.errAt(t, "Segment's engine reads "+t.val+" as "+start+"; "+start+" has no fields")
		}
		return ct, "", nil
	}
	if !dotted {
		return "", "", c.errAt(t, "Segment's engine reads "+start+" alone as "+start+"."+start+"; name a field below it, e.g. "+start+".total")
	}
	if t.escSep {
		return "", "", c.errAt(t, "field "+t.val+": Segment's engine splits keys at every ., [ and ], escaped or not, so a key with one of them in it cannot be named")
	}
	if msg := checkPath(rest); msg != "" {
		return "", "", c.errAt(t, "field "+t.val+": "+msg)
	}
	return ct, rest, nil
}

// checkPath refuses the paths Segment's get would not read as dotted keys.
func checkPath(p string) string {
	for _, k := range strings.Split(p, ".") {
		switch {
		case k == "":
			return "an empty key (Segment's engine skips it); write each key between single dots"
		case strings.ContainsAny(k, "[]"):
			return "Segment's engine reads [ and ] in a key as separators; write an array index as a key: items.\\0"
		case builtinNames[k]:
			return "Segment's engine finds JavaScript's built-in \"" + k + "\" when a message has no such key; evfwd cannot match that"
		}
	}
	return ""
}

// builtinNames are the names JavaScript finds on values of every JSON type
// (objects, arrays, strings, numbers, booleans) through their prototypes,
// except length, which evfwd reads as Segment does (the length of an array
// or string).
var builtinNames = func() map[string]bool {
	m := map[string]bool{}
	for _, list := range []string{
		// Object.prototype
		"constructor __defineGetter__ __defineSetter__ hasOwnProperty __lookupGetter__ __lookupSetter__ isPrototypeOf propertyIsEnumerable toString valueOf __proto__ toLocaleString",
		// Array.prototype
		"at concat copyWithin fill find findIndex findLast findLastIndex lastIndexOf pop push reverse shift unshift slice sort splice includes indexOf join keys entries values forEach filter flat flatMap map every some reduce reduceRight toReversed toSorted toSpliced with",
		// String.prototype
		"anchor big blink bold charAt charCodeAt codePointAt endsWith fontcolor fontsize fixed isWellFormed italics link localeCompare match matchAll normalize padEnd padStart repeat replace replaceAll search small split strike sub substr substring sup startsWith toWellFormed trim trimStart trimLeft trimEnd trimRight toLocaleLowerCase toLocaleUpperCase toLowerCase toUpperCase",
		// Number.prototype
		"toExponential toFixed toPrecision",
	} {
		for _, k := range strings.Fields(list) {
			m[k] = true
		}
	}
	return m
}()

func (c *checker) comparison() (*node, *checkError) {
	ft := c.cur()
	ct, name, err := c.field(ft, "")
	if err != nil {
		return nil, err
	}
	c.i++
	opTok := c.cur()
	op := opTok.val
	switch {
	case opTok.kind == tkOperator && op != "!":
	case opTok.kind == tkDot && c.i+1 < len(c.toks) && c.toks[c.i+1].kind == tkNumber:
		return nil, c.errAt(opTok, "Segment's engine reads a key that starts with a digit or - as a number; escape its first character: "+ft.val+".\\"+c.toks[c.i+1].val)
	default:
		return nil, c.errAt(opTok, "expected =, !=, <, <=, > or >= after "+ft.val+", got "+describe(opTok))
	}
	c.i++
	vt := c.cur()
	if (op == "<" || op == ">") && vt.kind == tkOperator && vt.val == "=" && vt.pos == opTok.end {
		return nil, c.errAt(opTok, "Segment's engine reads "+op+"= followed by a value without a space as "+op+" \"=\"; put a space after "+op+"=")
	}
	c.i++
	n := &node{field: ct, name: name}
	fail := func(msg string) (*node, *checkError) { return nil, c.errAt(vt, msg) }
	top := ct == "event" || ct == "event-type" || ct == "name" || ct == "userId"
	relational := op != "=" && op != "!="
	switch vt.kind {
	case tkString:
		if vt.val[0] == '\'' {
			return fail("Segment's engine keeps single quotes as part of the text; use double quotes")
		}
		if relational {
			return fail(op + " compares numbers: Segment's engine turns the text into a number; compare with a number, e.g. " + ft.val + " " + op + " 100")
		}
		n.op, n.val = op, tokenValue(vt)
	case tkNumber:
		v := tokenValue(vt)
		if v.n != v.n {
			return fail(vt.val + " is not a number")
		}
		switch {
		case relational:
			n.op, n.val = op, v
			if top {
				n.val = jsValue{kind: 's', s: v.String()}
			}
		case top:
			return fail("Segment's engine compares " + ft.val + " with the text \"" + v.String() + "\"; write it in double quotes: " + ft.val + " " + op + " \"" + vt.val + "\"")
		case op == "=":
			n.op, n.val = "number_equals", v
		default:
			n.op, n.val = "number_not_equals", v
		}
	case tkNull:
		switch {
		case relational:
			return fail(op + " compares numbers; to test whether a field is there, write " + ft.val + " != null or = null")
		case ct == "event" || ct == "event-type":
			if ct == "event" && op == "!=" {
				return fail("Segment's engine compares event with the text \"null\", so event != null holds for messages without an event too; to require an event name write match(event, \"*\")")
			}
			return fail("Segment's engine compares " + ft.val + " with the text \"null\"")
		case op == "=":
			n.op, n.noVal = "not_exists", true
		default:
			n.op, n.noVal = "exists", true
		}
	case tkIdent:
		if vt.val != "true" && vt.val != "false" {
			return fail("Segment's engine reads the bare word " + vt.val + " as the text \"" + vt.val + "\"; put text in double quotes")
		}
		switch {
		case relational:
			return fail(op + " compares numbers; Segment's engine reads " + vt.val + " as the number " + map[bool]string{true: "1", false: "0"}[vt.val == "true"])
		case ct == "event" || ct == "event-type" || ct == "name":
			return fail("Segment's engine compares " + ft.val + " with the text \"" + vt.val + "\"; write " + ft.val + " " + op + " \"" + vt.val + "\" if that is meant")
		case op == "!=":
			return fail("Segment's engine compares with the text \"" + vt.val + "\", so " + ft.val + " != " + vt.val + " holds when the field is " + vt.val + " itself; write " + ft.val + " = " + map[string]string{"true": "false", "false": "true"}[vt.val] + " (it holds for booleans only)")
		case vt.val == "true":
			n.op, n.noVal = "is_true", true
		default:
			n.op, n.noVal = "is_false", true
		}
	default:
		return fail("expected a value (a string in double quotes, a number, true, false or null) after " + op + ", got " + describe(vt))
	}
	return n, nil
}

func (c *checker) function(negate bool) (*node, *checkError) {
	ft := c.cur()
	fn := ft.val
	c.i++
	if c.cur().kind != tkParenLeft {
		return nil, c.errAt(c.cur(), "expected ( after "+fn)
	}
	c.i++
	argTok := c.cur()
	ct, name, err := c.field(argTok, fn)
	if err != nil {
		return nil, err
	}
	c.i++
	if c.cur().kind != tkComma {
		return nil, c.errAt(c.cur(), "expected , after the field in "+fn+"(), got "+describe(c.cur()))
	}
	c.i++
	vt := c.cur()
	if vt.kind != tkString || vt.val[0] != '"' {
		return nil, c.errAt(vt, fn+"() takes a text in double quotes as its second argument, got "+describe(vt))
	}
	c.i++
	if c.cur().kind != tkParenRight {
		return nil, c.errAt(c.cur(), "expected ) after "+fn+"()'s arguments, got "+describe(c.cur()))
	}
	c.i++
	s := tokenValue(vt).s
	n := &node{field: ct, name: name, val: jsValue{kind: 's', s: s}, op: "contains"}
	if fn == "match" {
		body, star := "", ""
		switch {
		case strings.HasSuffix(s, "*"):
			body, star, n.op = s[:len(s)-1], "prefix", "starts_with"
		case strings.HasPrefix(s, "*"):
			body, star, n.op = s[1:], "suffix", "ends_with"
		}
		switch {
		case star == "":
			return nil, c.errAt(vt, "Segment's match() knows only a leading or a trailing *; without one it drops the first character (match(event, \"abc\") tests that event ends with \"bc\"); write event = \"abc\", or add a *")
		case strings.ContainsAny(body, "*?[]\\"):
			return nil, c.errAt(vt, "Segment's match() knows only one * at the start or the end, and takes ?, [, ] and \\ literally; to find text inside a value use contains()")
		}
		n.val.s = body
	}
	if negate {
		n.op = "not_" + n.op
	}
	return n, nil
}
