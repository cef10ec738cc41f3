package mapping

import (
	"strings"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// node is one part of a compiled mapping: what resolve does with it.
type node interface {
	eval(c *ctx, p value) (value, error)
}

// compile turns a validated mapping value into nodes. What actions-core
// checks only while resolving (a directive in an array, options that
// validate but cannot run) becomes a node that fails at Apply.
func compile(m value) node {
	switch m.k {
	case kArr:
		n := &arrNode{}
		for _, e := range m.arr {
			n.kids = append(n.kids, compile(e))
		}
		return n
	case kObj:
		if isDirectiveObject(m) {
			for _, mb := range m.obj {
				if strings.HasPrefix(mb.key, "@") {
					return compileDirective(mb.key, mb.v)
				}
			}
		}
		n := &objNode{}
		for _, mb := range m.obj {
			n.keys = append(n.keys, mb.key)
			n.quoted = append(n.quoted, append(rawjson.AppendString(nil, mb.key), ':'))
			n.kids = append(n.kids, compile(mb.v))
		}
		return n
	}
	return &litNode{m}
}

type litNode struct{ v value }

func (n *litNode) eval(*ctx, value) (value, error) { return n.v, nil }

type errNode struct{ msg string }

func (n *errNode) eval(*ctx, value) (value, error) { return undef, jsError("%s", n.msg) }

type objNode struct {
	keys   []string
	quoted [][]byte // "key": as output
	kids   []node
}

func (n *objNode) eval(c *ctx, p value) (value, error) {
	out := value{k: kObj, obj: make([]member, 0, len(n.kids))}
	for j, kid := range n.kids {
		v, err := kid.eval(c, p)
		if err != nil {
			return undef, err
		}
		out.obj = setMember(out.obj, n.keys[j], v)
	}
	return out, nil
}

type arrNode struct{ kids []node }

func (n *arrNode) eval(c *ctx, p value) (value, error) {
	out := value{k: kArr, arr: make([]value, 0, len(n.kids))}
	for _, kid := range n.kids {
		v, err := kid.eval(c, p)
		if err != nil {
			return undef, err
		}
		out.arr = append(out.arr, v)
	}
	return out, nil
}

func compileDirective(name string, opts value) node {
	switch name {
	case "@path":
		if opts.k == kStr {
			n := &pathNode{}
			n.segs, n.whole = splitPath(dollarPath(string(opts.str(nil))))
			return n
		}
		return &stringDirective{name: name, arg: compile(opts)}
	case "@template":
		if opts.k == kStr {
			return &templateNode{t: compileTemplate(string(opts.str(nil)))}
		}
		return &stringDirective{name: name, arg: compile(opts)}
	case "@literal":
		return compile(opts)
	case "@if":
		return compileIf(opts)
	case "@case":
		return compileCase(opts)
	case "@replace":
		return compileReplace(opts)
	case "@arrayPath":
		return compileArrayPath(opts)
	case "@flatten":
		return compileFlatten(opts)
	case "@json":
		return compileJSON(opts)
	case "@merge":
		return compileMerge(opts)
	case "@transform":
		return compileTransform(opts)
	case "@excludeWhenNull":
		return &excludeNullNode{arg: compile(opts)}
	}
	return &errNode{name + " is not a valid directive"}
}

// pathNode is @path with a literal path.
type pathNode struct {
	segs  []string
	whole bool
}

func (n *pathNode) eval(_ *ctx, p value) (value, error) { return getPath(p, n.segs, n.whole), nil }

type templateNode struct{ t *compiledTemplate }

func (n *templateNode) eval(c *ctx, p value) (value, error) {
	if p.k == kUndef {
		p = emptyObject
	}
	start := len(c.buf)
	c.buf = n.t.render(c.buf, p)
	return bytesValue(c.buf[start:len(c.buf):len(c.buf)]), nil
}

var emptyObject = value{k: kObj, obj: []member{}}

// stringDirective is @path or @template whose argument is itself resolved,
// and must resolve to a string.
type stringDirective struct {
	name string
	arg  node
}

func (n *stringDirective) eval(c *ctx, p value) (value, error) {
	a, err := n.arg.eval(c, p)
	if err != nil {
		return undef, err
	}
	if a.k != kStr {
		return undef, jsError("%s: expected string, got %s", n.name, typeName(a))
	}
	s := string(a.str(nil))
	if n.name == "@path" {
		segs, whole := splitPath(dollarPath(s))
		return getPath(p, segs, whole), nil
	}
	if p.k == kUndef {
		p = emptyObject
	}
	start := len(c.buf)
	c.buf = renderString(c.buf, s, p)
	return bytesValue(c.buf[start:len(c.buf):len(c.buf)]), nil
}

// ifNode is @if: exists (not undefined or null) or blank (not == null or
// == ”), then resolved when the test holds and then is given, else
// resolved when it fails and else is truthy.
type ifNode struct {
	test      node
	blank     bool
	then, els node
}

func compileIf(opts value) node {
	if !opts.isObject() {
		return &errNode{`@if requires an object with an "exists" key`}
	}
	exists, bl := opts.get("exists"), opts.get("blank")
	if !exists.truthy() && !bl.truthy() {
		return &errNode{`@if requires an "exists" key or a "blank" key`}
	}
	n := &ifNode{}
	if exists.k != kUndef {
		n.test = compile(exists)
	} else {
		n.test, n.blank = compile(bl), true
	}
	if t := opts.get("then"); t.k != kUndef {
		n.then = compile(t)
	}
	if e := opts.get("else"); e.truthy() {
		n.els = compile(e)
	}
	return n
}

func (n *ifNode) eval(c *ctx, p value) (value, error) {
	v, err := n.test.eval(c, p)
	if err != nil {
		return undef, err
	}
	cond := v.k != kUndef && v.k != kNull
	if n.blank {
		cond = !blank(v)
	}
	switch {
	case cond && n.then != nil:
		return n.then.eval(c, p)
	case !cond && n.els != nil:
		return n.els.eval(c, p)
	}
	return undef, nil
}

// caseNode is @case: a string value lowered or raised; anything else as
// it is.
type caseNode struct {
	op  value
	arg node
}

func compileCase(opts value) node {
	if !opts.isObject() {
		return &errNode{`@case requires an object with a "operator" key`}
	}
	op := opts.get("operator")
	if !op.truthy() {
		return &errNode{`@case requires a "operator" key`}
	}
	v := opts.get("value")
	if !v.truthy() {
		return &litNode{undef}
	}
	return &caseNode{op: op, arg: compile(v)}
}

func (n *caseNode) eval(c *ctx, p value) (value, error) {
	v, err := n.arg.eval(c, p)
	if err != nil || v.k != kStr {
		return v, err
	}
	op := ""
	if n.op.k == kStr {
		op = string(n.op.str(nil))
	}
	switch op {
	case "lower":
		return strValue(jsLower(string(v.str(nil)))), nil
	case "upper":
		return strValue(jsUpper(string(v.str(nil)))), nil
	}
	return undef, jsError(`operator key should have a value of "lower" or "upper"`)
}

type excludeNullNode struct{ arg node }

func (n *excludeNullNode) eval(c *ctx, p value) (value, error) {
	v, err := n.arg.eval(c, p)
	if err != nil {
		return undef, err
	}
	if v.k == kNull {
		return undef, nil
	}
	return cleanNulls(v), nil
}

// cleanNulls makes an object's null members (and its objects', all the way
// down, but not inside arrays) undefined.
func cleanNulls(v value) value {
	if v.k != kObj {
		return v
	}
	ms := v.members()
	out := value{k: kObj, obj: make([]member, len(ms))}
	for j, m := range ms {
		switch m.v.k {
		case kNull:
			m.v = undef
		case kObj:
			m.v = cleanNulls(m.v)
		}
		out.obj[j] = m
	}
	return out
}

// removeUndefined drops undefined members from computed objects, all the
// way down (an array keeps its undefined elements).
func removeUndefined(v value) value {
	if v.d != nil {
		return v
	}
	switch v.k {
	case kArr:
		out := value{k: kArr, arr: make([]value, len(v.arr))}
		for j, e := range v.arr {
			out.arr[j] = removeUndefined(e)
		}
		return out
	case kObj:
		out := value{k: kObj, obj: make([]member, 0, len(v.obj))}
		for _, m := range v.obj {
			if m.v.k != kUndef {
				out.obj = append(out.obj, member{m.key, removeUndefined(m.v)})
			}
		}
		return out
	}
	return v
}
