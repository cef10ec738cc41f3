package fql

import (
	"math"
	"strconv"
	"strings"
)

// segmentParse is @segment/destination-subscriptions 3.37.0's parseFql,
// step for step: normalize joins "a", ".", "b" into one identifier, and
// parse reads the tokens as a flat list of comparisons with one
// conjunction per group (the last one it met). It answers the tree
// Segment's validate would walk, or the error parseFql would return. A nil
// child is JavaScript's undefined (an empty group), on which validate
// throws.
func segmentParse(toks []token) (n *node, err error) {
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(segmentError)
			if !ok {
				panic(r)
			}
			n, err = nil, pe
		}
	}()
	q := &queue{toks: normalize(toks)}
	n = q.parse()
	if n == nil {
		return nil, segmentError("nothing to decide")
	}
	if !n.group {
		n = &node{group: true, op: "and", kids: []*node{n}}
	}
	return n, nil
}

// segmentError is an exception parseFql turns into its error result
// (a thrown Error or a TypeError of JavaScript's).
type segmentError string

func (e segmentError) Error() string { return string(e) }

// node is one node of Segment's condition tree.
type node struct {
	group bool
	op    string  // "and"/"or" for a group; the operator for a comparison
	kids  []*node // a group's children; nil entries are undefined

	field string // "event-type", "event", "name", "userId", "event-property", "event-trait", "event-context"
	name  string // the path for the last three
	val   jsValue
	noVal bool // exists, not_exists, is_true, is_false carry no value
}

// jsValue is a condition's value as JavaScript holds it: a string, a
// number or a boolean.
type jsValue struct {
	kind byte // 's', 'n', 'b'
	s    string
	n    float64
	b    bool
}

func (v jsValue) String() string {
	switch v.kind {
	case 'n':
		return jsNumberString(v.n)
	case 'b':
		return strconv.FormatBool(v.b)
	}
	return v.s
}

var conditionTypes = map[string]string{
	"type":       "event-type",
	"event":      "event",
	"name":       "name",
	"userId":     "userId",
	"context":    "event-context",
	"properties": "event-property",
	"traits":     "event-trait",
}

// objectPrototype holds the names JavaScript finds on every object through
// Object.prototype: parseFql's lookup of a field's first segment finds them
// too, takes them for a known field and then pushes nothing.
var objectPrototype = map[string]bool{
	"constructor": true, "__defineGetter__": true, "__defineSetter__": true, "hasOwnProperty": true,
	"__lookupGetter__": true, "__lookupSetter__": true, "isPrototypeOf": true, "propertyIsEnumerable": true,
	"toString": true, "valueOf": true, "__proto__": true, "toLocaleString": true,
}

func normalize(toks []token) []token {
	out := make([]token, 0, len(toks))
	for i := 0; i < len(toks); {
		if n := len(out); n > 0 && out[n-1].kind == tkIdent && toks[i].kind == tkDot && i+1 < len(toks) && toks[i+1].kind == tkIdent {
			last := out[n-1]
			out[n-1] = token{kind: tkIdent, val: last.val + "." + toks[i+1].val, pos: last.pos, end: toks[i+1].end, escSep: last.escSep || toks[i+1].escSep}
			i += 2
			continue
		}
		out = append(out, toks[i])
		i++
	}
	return out
}

type queue struct {
	toks []token
}

// shift is Array.prototype.shift: nil when the list is empty.
func (q *queue) shift() *token {
	if len(q.toks) == 0 {
		return nil
	}
	t := &q.toks[0]
	q.toks = q.toks[1:]
	return t
}

func tokenValue(t *token) jsValue {
	switch {
	case t.kind == tkString:
		s := strings.TrimPrefix(t.val, `"`)
		s = strings.TrimSuffix(s, `"`)
		return jsValue{kind: 's', s: s}
	case t.kind == tkNumber:
		return jsValue{kind: 'n', n: jsNumber(t.val)}
	case t.kind == tkIdent && (t.val == "true" || t.val == "false"):
		return jsValue{kind: 'b', b: t.val == "true"}
	}
	return jsValue{kind: 's', s: t.val}
}

func stringValue(t *token) jsValue { return jsValue{kind: 's', s: tokenValue(t).String()} }

// jsNumber is JavaScript's Number(s) for the texts fql-ts lexes as
// numbers: a sign, digits and at most one decimal point.
func jsNumber(s string) float64 {
	if strings.Trim(s, "+-.") == "" {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errorsIsRange(err) {
		return math.NaN()
	}
	return f
}

func errorsIsRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// jsNumberString is close to JavaScript's String(number); parseFql uses it
// only where the checker refuses the condition, so it names the value in
// messages and nowhere else.
func jsNumberString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	if a := math.Abs(f); a >= 1e21 || a < 1e-6 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		s = strings.Replace(s, "e+0", "e+", 1)
		return strings.Replace(s, "e-0", "e-", 1)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func (q *queue) parse() *node {
	var nodes []*node
	op := "and"
	for t := q.shift(); t != nil && t.kind != tkEOS; t = q.shift() {
		switch t.kind {
		case tkIdent:
			start, _, _ := strings.Cut(t.val, ".")
			if ct, ok := conditionTypes[start]; ok || objectPrototype[start] {
				opTok := q.shift()
				if opTok == nil {
					panic(segmentError("Operator token is missing"))
				}
				valTok := q.shift()
				if valTok == nil {
					panic(segmentError("Value token is missing"))
				}
				if ok {
					nodes = append(nodes, comparison(ct, t.val, opTok, valTok))
				}
			}
			if t.val == "contains" || t.val == "match" {
				nodes = q.function(t.val, nodes, false)
			}
		case tkOperator:
			if t.val == "!" {
				if len(q.toks) == 0 {
					panic(segmentError("Cannot read properties of undefined (reading 'type')"))
				}
				if n := q.toks[0]; n.kind == tkIdent && (n.val == "contains" || n.val == "match") {
					q.shift()
					nodes = q.function(n.val, nodes, true)
				}
			}
		case tkParenLeft:
			var group []token
			for {
				g := q.shift()
				if g == nil {
					panic(segmentError("Cannot read properties of undefined (reading 'type')"))
				}
				if g.kind == tkParenRight {
					break
				}
				group = append(group, *g)
			}
			group = append(group, token{kind: tkEOS, val: "eos"})
			nodes = append(nodes, (&queue{toks: group}).parse())
		case tkConditional:
			op = t.val
		}
	}
	if len(nodes) > 1 {
		return &node{group: true, op: op, kids: nodes}
	}
	if len(nodes) == 0 {
		return nil
	}
	return nodes[0]
}

var pathPrefix = map[string]string{"event-property": "properties.", "event-trait": "traits.", "event-context": "context."}

func comparison(ct, ident string, opTok, valTok *token) *node {
	op, val := opTok.val, valTok.val
	isTrue := op == "=" && val == "true"
	isFalse := op == "=" && val == "false"
	isExists := op == "!=" && val == "null"
	isNotExists := op == "=" && val == "null"
	isNumberEquals := op == "=" && valTok.kind == tkNumber
	isNumberNotEquals := op == "!=" && valTok.kind == tkNumber
	n := &node{field: ct}
	switch ct {
	case "event", "event-type":
		n.op, n.val = op, stringValue(valTok)
		return n
	}
	if prefix, ok := pathPrefix[ct]; ok {
		n.name = strings.TrimPrefix(ident, prefix)
	}
	switch {
	case isExists:
		n.op, n.noVal = "exists", true
	case isNotExists:
		n.op, n.noVal = "not_exists", true
	case ct == "name":
		n.op, n.val = op, stringValue(valTok)
	case isTrue:
		n.op, n.noVal = "is_true", true
	case isFalse:
		n.op, n.noVal = "is_false", true
	case ct == "userId":
		n.op, n.val = op, stringValue(valTok)
	case isNumberEquals:
		n.op, n.val = "number_equals", tokenValue(valTok)
	case isNumberNotEquals:
		n.op, n.val = "number_not_equals", tokenValue(valTok)
	default:
		n.op, n.val = op, tokenValue(valTok)
	}
	return n
}

func (q *queue) function(name string, nodes []*node, negate bool) []*node {
	q.shift()
	field := q.shift()
	if field == nil {
		panic(segmentError(name + "() is missing a 1st argument"))
	}
	q.shift()
	arg := q.shift()
	if arg == nil {
		panic(segmentError(name + "() is missing a 2nd argument"))
	}
	q.shift()
	var op string
	var val string
	if name == "contains" {
		op, val = "contains", tokenValue(arg).String()
	} else if strings.HasSuffix(arg.val, `*"`) {
		op, val = "starts_with", sliceUnits(tokenValue(arg).String(), 0, -1)
	} else {
		op, val = "ends_with", sliceUnits(tokenValue(arg).String(), 1, 0)
	}
	if negate {
		op = "not_" + op
	}
	v := jsValue{kind: 's', s: val}
	switch field.val {
	case "event", "name", "userId":
		nodes = append(nodes, &node{field: field.val, op: op, val: v})
	}
	for _, p := range [...]struct{ prefix, ct string }{{"properties", "event-property"}, {"traits", "event-trait"}, {"context", "event-context"}} {
		if strings.HasPrefix(field.val, p.prefix) {
			nodes = append(nodes, &node{field: p.ct, name: strings.TrimPrefix(field.val, p.prefix+"."), op: op, val: v})
		}
	}
	return nodes
}

// sliceUnits is String.prototype.slice(from) (to == 0) or slice(from, to)
// with a negative to, over UTF-16 code units.
func sliceUnits(s string, from, to int) string {
	u := toUnits(s)
	end := len(u)
	if to < 0 {
		end += to
	}
	if from > len(u) {
		from = len(u)
	}
	if end < from {
		return ""
	}
	return decode(u[from:end])
}
