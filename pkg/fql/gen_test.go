package fql

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// The generators of the differential test share one vocabulary, so that
// the conditions they write read the keys and values the messages carry.

var (
	genKeys = []string{
		"total", "price", "sku", "items", "a", "b", "url", "page", "0", "1", "2", "length",
		"first name", "a.b", "é", "😀", "x-y", "under_score", "Ab", "", "__proto__", "01", "-1",
	}
	genStrings = []string{
		"track", "page", "identify", "screen", "Order Completed", "Order Started", "Order", "order completed",
		"", "a", "abc", "ab", "100", "100.5", "1e2", "0", "-0", "true", "false", "null", "eos", "=",
		"é", "e\u0301", "😀", "😀x", "/checkout", "https://x.io/checkout?a=1", " ", "Completed",
		"a*b", "*", "rder Completed", "Order *", "\"", "'", "\\", "a b", "日本語", "\t", "\n",
	}
	genNumbers = []float64{
		0, math.Copysign(0, -1), 1, -1, 2, 100, 100.5, -100.5, 0.1, 0.2, 0.30000000000000004, 0.3,
		1e21, 1e-7, 123456789012345680000, 9007199254740992, 9007199254740993, 1.7976931348623157e308,
		5e-324, 3, 1.5,
	}
	genTypes = []string{"track", "page", "identify", "screen", "group", "alias"}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// genMessage writes one hostile message: every top-level field may be
// missing, of another type, or deep; keys repeat; numbers are exact and
// inexact, large and small, in every JSON spelling.
func genMessage(r *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	member := func(key string, val func()) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.WriteString(jsonString(key))
		b.WriteByte(':')
		val()
	}
	if r.IntN(10) > 0 {
		member("type", func() {
			if r.IntN(8) == 0 {
				genValue(r, &b, 1)
			} else {
				b.WriteString(jsonString(pick(r, genTypes)))
			}
		})
	}
	for _, f := range []string{"event", "name", "userId"} {
		if r.IntN(3) > 0 {
			member(f, func() {
				if r.IntN(4) == 0 {
					genValue(r, &b, 1)
				} else {
					b.WriteString(jsonString(pick(r, genStrings)))
				}
			})
		}
	}
	for _, f := range []string{"properties", "traits", "context"} {
		if r.IntN(5) > 0 {
			member(f, func() {
				if r.IntN(8) == 0 {
					genValue(r, &b, 3)
				} else {
					genObject(r, &b, 4)
				}
			})
		}
	}
	for range r.IntN(3) {
		member(pick(r, []string{"type", "event", "properties", "messageId", "__proto__"}), func() { genValue(r, &b, 3) })
	}
	b.WriteByte('}')
	return b.String()
}

func genObject(r *rand.Rand, b *strings.Builder, depth int) {
	b.WriteByte('{')
	for i := range r.IntN(6) {
		if i > 0 {
			b.WriteString(pick(r, []string{",", ", ", "\n,"}))
		}
		b.WriteString(jsonKey(r, pick(r, genKeys)))
		b.WriteByte(':')
		genValue(r, b, depth-1)
	}
	b.WriteByte('}')
}

func genValue(r *rand.Rand, b *strings.Builder, depth int) {
	if r.IntN(200) == 0 {
		d := 1 + r.IntN(500) // deep nesting, read past or into
		b.WriteString(strings.Repeat(`{"a":[`, d) + "1" + strings.Repeat("]}", d))
		return
	}
	k := r.IntN(12)
	if depth <= 0 && k >= 9 {
		k = r.IntN(9)
	}
	switch k {
	case 0, 1:
		b.WriteString(jsonString(pick(r, genStrings)))
	case 2:
		s := pick(r, genStrings)
		if r.IntN(2) == 0 {
			s = strings.Repeat(s, 1+r.IntN(2000))
		}
		b.WriteString(escapeSome(r, s))
	case 3, 4:
		b.WriteString(genNumberText(r))
	case 5:
		b.WriteString(pick(r, []string{"true", "false"}))
	case 6:
		b.WriteString("null")
	case 7:
		b.WriteString(pick(r, []string{`"\ud83d"`, `"\ude00x"`, `"\ud83d\ude00"`, `"a\u0000b"`, `"\u00e9"`, `"\/"`}))
	case 8:
		b.WriteString(jsonString(strconv.Itoa(r.IntN(200))))
	case 9, 10:
		genObject(r, b, depth)
	case 11:
		b.WriteByte('[')
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			genValue(r, b, depth-1)
		}
		b.WriteByte(']')
	}
}

func genNumberText(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0:
		return pick(r, []string{"1e400", "-1e400", "1e-400", "-0", "0.0", "1E2", "1e+2", "100.50", "9007199254740993", "0.1e1", "123456789012345678901234567890", "2.2250738585072011e-308"})
	case 1:
		return strconv.Itoa(r.IntN(300) - 100)
	case 2:
		return strconv.FormatFloat(r.NormFloat64()*200, 'g', -1, 64)
	}
	return strconv.FormatFloat(pick(r, genNumbers), 'g', -1, 64)
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteString(strconv.FormatInt(int64(c)>>4, 16))
			b.WriteString(strconv.FormatInt(int64(c)&15, 16))
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// jsonKey spells a key plainly or with escapes.
func jsonKey(r *rand.Rand, k string) string {
	if r.IntN(5) == 0 {
		return escapeSome(r, k)
	}
	return jsonString(k)
}

// escapeSome writes s as a JSON string with some characters as \u escapes.
func escapeSome(r *rand.Rand, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		if r.IntN(3) == 0 || c == '"' || c == '\\' || c < 0x20 {
			if c >= 0x10000 {
				c -= 0x10000
				b.WriteString(`\u` + hexUnit(0xD800+c>>10) + `\u` + hexUnit(0xDC00+c&0x3FF))
			} else {
				b.WriteString(`\u` + hexUnit(c))
			}
			continue
		}
		b.WriteRune(c)
	}
	b.WriteByte('"')
	return b.String()
}

func hexUnit(c rune) string {
	h := strconv.FormatInt(int64(c), 16)
	return strings.Repeat("0", 4-len(h)) + h
}

// genAST writes a tree of Segment's (as its UI builds them), for
// generateFql to turn into text.
func genAST(r *rand.Rand, depth int) map[string]any {
	kids := []any{}
	for range 1 + r.IntN(3) {
		if depth > 0 && r.IntN(5) == 0 {
			kids = append(kids, genAST(r, depth-1))
		} else {
			kids = append(kids, genLeaf(r))
		}
	}
	return map[string]any{"type": "group", "operator": pick(r, []string{"and", "or"}), "children": kids}
}

var astOps = []string{"=", "!=", "<", "<=", ">", ">=", "number_equals", "number_not_equals", "contains", "not_contains",
	"starts_with", "not_starts_with", "ends_with", "not_ends_with", "exists", "not_exists", "is_true", "is_false"}

func genLeaf(r *rand.Rand) map[string]any {
	t := pick(r, []string{"event-type", "event", "name", "userId", "event-property", "event-trait", "event-context", "event-property", "event-property"})
	n := map[string]any{"type": t}
	switch t {
	case "event-property", "event-trait", "event-context":
		path := pick(r, genPathKeys)
		if r.IntN(8) == 0 {
			path = pick(r, genKeys)
		}
		for r.IntN(3) == 0 {
			path += "." + pick(r, genPathKeys)
		}
		n["name"] = path
	}
	op := pick(r, astOps)
	if r.IntN(5) > 0 {
		// mostly what the UI offers for the field
		switch t {
		case "event-type", "event":
			op = pick(r, []string{"=", "!=", "=", "contains", "starts_with", "ends_with", "not_contains", "<", ">="})
		case "name", "userId":
			op = pick(r, []string{"=", "!=", "exists", "not_exists", "contains", "not_starts_with", "ends_with"})
		}
	}
	n["operator"] = op
	switch {
	case r.IntN(6) == 0:
		switch r.IntN(3) {
		case 0:
			n["value"] = pick(r, genStrings)
		case 1:
			n["value"] = pick(r, genNumbers)
		default:
			n["value"] = r.IntN(2) == 0
		}
	case op == "<" || op == "<=" || op == ">" || op == ">=" || op == "number_equals" || op == "number_not_equals":
		n["value"] = pick(r, genNumbers)
	case op == "exists" || op == "not_exists" || op == "is_true" || op == "is_false":
	default:
		n["value"] = pick(r, genStrings)
	}
	return n
}

// genPathKeys are the keys a condition can name as they are.
var genPathKeys = []string{"total", "price", "sku", "items", "a", "b", "url", "page", "length", "first name", "é", "x-y", "under_score", "Ab"}

// genText writes condition text from a loose grammar: mostly well formed,
// often not, with the spellings Segment's lexer treats oddly.
func genText(r *rand.Rand) string {
	var b strings.Builder
	terms := 1 + r.IntN(3)
	conj := pick(r, []string{"and", "or"})
	for i := range terms {
		if i > 0 {
			if r.IntN(10) == 0 {
				conj = pick(r, []string{"and", "or", "AND", "Or", "and(", ""})
			}
			b.WriteString(pick(r, []string{" ", " ", "  ", "\n", "\t"}) + conj + pick(r, []string{" ", " ", "\n", ""}))
		}
		if r.IntN(5) == 0 {
			b.WriteString(pick(r, []string{"(", "(", "(", "!(", "((", "( "}))
			genTerm(r, &b)
			b.WriteString(" " + pick(r, []string{"and", "or"}) + " ")
			genTerm(r, &b)
			b.WriteString(pick(r, []string{")", ")", ")", " )", "", "))"}))
			continue
		}
		genTerm(r, &b)
	}
	s := b.String()
	if r.IntN(4) == 0 {
		for range 1 + r.IntN(2) {
			s = mutate(r, s)
		}
	}
	return s
}

var goodFields = []string{"type", "event", "name", "userId", "properties.total", "properties.price", "properties.items.length",
	"properties.items.\\0.sku", "context.page.url", "traits.a", "traits.first\\ name", "properties.\\é", "properties.x-y",
	"context.page", "traits.Ab", "properties.b.length", "properties.a.\\1", "properties.sku.\\0", "properties.a.b"}

var goodValues = []string{`"track"`, `"page"`, `"Order Completed"`, `"100"`, `100`, `100.5`, `-1`, `+5`, `007`,
	`true`, `false`, `null`, `""`, `"é"`, `"😀"`, `0`, `-0`, `1e21`, `9007199254740993`, `"a"`, `"abc"`, `3`, `2`, `1`}

var textFields = []string{"type", "event", "name", "userId", "properties.total", "properties.price", "properties.items.length",
	"properties.items.\\0.sku", "properties.items.0.sku", "context.page.url", "traits.a", "traits.first\\ name", "properties.a\\.b",
	"properties", "event.x", "foo", "properties.constructor", "properties.\\é", "properties.x-y", "propertiesX.a", "properties..a",
	"properties.a\\[0\\]", "Type", "userId.a", "context.page", "traits.Ab", "properties.b.length", "properties.\\1"}

var textValues = []string{`"track"`, `"page"`, `"Order Completed"`, `'track'`, `"100"`, `100`, `100.5`, `-1`, `+5`, `007`, `-`, `1.`,
	`true`, `false`, `null`, `nil`, `foo`, `""`, `"é"`, `"😀"`, `0`, `-0`, `1e21`, `"a"b"`, `"unterminated`, `9007199254740993`, `"a*"`, `"*a"`}

func genTerm(r *rand.Rand, b *strings.Builder) {
	switch r.IntN(8) {
	case 0, 1:
		neg := pick(r, []string{"", "", "", "!", "!", "! "})
		fn := pick(r, []string{"contains", "match", "contains", "match", "contains", "match", "Contains", "exists"})
		arg := pick(r, []string{`"Order *"`, `"*Completed"`, `"Order *"`, `"*Completed"`, `"*"`, `"a*"`, `"/checkout"`, `"a"`, `"é"`, `"Order"`, `"*"`, `""`, `"a*b"`, `"*a*"`, `"a?*"`, `'x*'`, `1.50`, `"/checkout"`, `"é"`, `"a b"`})
		field := pick(r, goodFields)
		if r.IntN(6) == 0 {
			field = pick(r, textFields)
		}
		b.WriteString(neg + fn + pick(r, []string{"(", "( "}) + field + pick(r, []string{", ", ",", " , ", " "}) + arg + pick(r, []string{")", ")", "", " )"}))
	default:
		if r.IntN(12) == 0 {
			b.WriteString("!")
		}
		if r.IntN(8) == 0 {
			b.WriteString(pick(r, textFields))
			b.WriteString(pick(r, []string{" = ", " = ", " != ", " < ", " <= ", " > ", " >= ", "=", "!=", " !=", " <=", " ==", " == ", " =! ", " contains ", " "}))
			b.WriteString(pick(r, textValues))
			return
		}
		b.WriteString(pick(r, goodFields))
		b.WriteString(pick(r, []string{" = ", " = ", " != ", " < ", " <= ", " > ", " >= ", "= ", " != "}))
		b.WriteString(pick(r, goodValues))
	}
}

// mutate deletes, doubles or inserts a character.
func mutate(r *rand.Rand, s string) string {
	rs := []rune(s)
	if len(rs) == 0 {
		return s
	}
	i := r.IntN(len(rs))
	switch r.IntN(3) {
	case 0:
		return string(rs[:i]) + string(rs[i+1:])
	case 1:
		return string(rs[:i+1]) + string(rs[i:])
	}
	ins := pick(r, []rune("()!=<>\"'.,\\ \r\t*&|[]a0-_é😀"))
	return string(rs[:i]) + string(ins) + string(rs[i:])
}
