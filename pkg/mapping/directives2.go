package mapping

import (
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// maxPattern and maxReplacement are @replace's limits, in UTF-16 code units
// as JavaScript counts a string's length.
const (
	maxPattern     = 10
	maxReplacement = 10
)

func jsLower(s string) string { return cases.Lower(language.Und).String(s) }
func jsUpper(s string) string { return cases.Upper(language.Und).String(s) }

// replaceNode is @replace: pattern (a literal, never a regular
// expression), replaced everywhere unless global is false, case-blind when
// ignorecase; then pattern2 the same way. replacement's $$, $&, $` and $'
// mean what they mean to String.prototype.replace.
type replaceNode struct {
	opts value
	arg  node
}

func compileReplace(opts value) node {
	if !opts.isObject() {
		return &errNode{`@replace requires an object with a "pattern" key`}
	}
	if !opts.get("pattern").truthy() {
		return &errNode{`@replace requires a "pattern" key`}
	}
	v := opts.get("value")
	if !v.truthy() {
		return &litNode{undef}
	}
	return &replaceNode{opts: opts, arg: compile(v)}
}

func (n *replaceNode) eval(c *ctx, p value) (value, error) {
	v, err := n.arg.eval(c, p)
	if err != nil {
		return undef, err
	}
	o := n.opts
	or := func(key string, def value) value {
		if x := o.get(key); x.k != kUndef && x.k != kNull {
			return x
		}
		return def
	}
	pattern := o.get("pattern")
	replacement := or("replacement", strValue(""))
	ignorecase := or("ignorecase", value{k: kBool})
	global := or("global", value{k: kBool, t: true})
	if v.k == kBool || v.k == kNum {
		v = strValue(string(appendJSString(nil, v)))
	}
	if v.k != kStr || pattern.k != kStr || replacement.k != kStr || ignorecase.k != kBool || global.k != kBool {
		return strValue(""), nil
	}
	g, ic := global.bool(), ignorecase.bool()
	out, err := performReplace(v.str(nil), pattern.str(nil), replacement.str(nil), g, ic)
	if err != nil {
		return undef, err
	}
	if p2 := o.get("pattern2"); p2.truthy() && p2.k == kStr {
		r2 := or("replacement2", strValue(""))
		if r2.k == kStr {
			if out, err = performReplace(out, p2.str(nil), r2.str(nil), g, ic); err != nil {
				return undef, err
			}
		}
	}
	return bytesValue(out), nil
}

func performReplace(s, pattern, replacement []byte, global, ignorecase bool) ([]byte, error) {
	if utf16Len(pattern) > maxPattern {
		return nil, jsError(`@replace requires a "pattern" less than %d characters`, maxPattern)
	}
	if utf16Len(replacement) > maxReplacement {
		return nil, jsError(`@replace requires a "replacement" less than %d characters`, maxReplacement)
	}
	v, pat, rep := toUTF16(s), toUTF16(pattern), toUTF16(replacement)
	var out []uint16
	last := 0
	for i := 0; i+len(pat) <= len(v); {
		if !matchAt(v[i:], pat, ignorecase) {
			i++
			continue
		}
		out = append(out, v[last:i]...)
		out = substitute(out, rep, v, i, i+len(pat))
		i += len(pat)
		last = i
		if !global {
			break
		}
	}
	out = append(out, v[last:]...)
	return []byte(string(utf16.Decode(out))), nil
}

func matchAt(v, pat []uint16, ignorecase bool) bool {
	for j, u := range pat {
		if v[j] == u {
			continue
		}
		if !ignorecase || canonicalize(v[j]) != canonicalize(u) {
			return false
		}
	}
	return true
}

// substitute appends replacement for the match v[start:end]: GetSubstitution
// of a pattern without capture groups.
func substitute(out, rep, v []uint16, start, end int) []uint16 {
	for j := 0; j < len(rep); j++ {
		if rep[j] != '$' || j+1 == len(rep) {
			out = append(out, rep[j])
			continue
		}
		switch rep[j+1] {
		case '$':
			out = append(out, '$')
		case '&':
			out = append(out, v[start:end]...)
		case '`':
			out = append(out, v[:start]...)
		case '\'':
			out = append(out, v[end:]...)
		default:
			out = append(out, '$')
			continue
		}
		j++
	}
	return out
}

var (
	canonOnce  sync.Once
	canonTable []uint16
)

// canonicalize is the case folding of a regular expression with the i
// flag and without u: a code unit's uppercase when that is one code unit
// and does not take a non-ASCII one to ASCII.
func canonicalize(u uint16) uint16 {
	canonOnce.Do(func() {
		canonTable = make([]uint16, 1<<16)
		up := cases.Upper(language.Und)
		for i := range canonTable {
			canonTable[i] = uint16(i)
			if i >= 0xd800 && i < 0xe000 {
				continue
			}
			s := up.String(string(rune(i)))
			r, size := utf8.DecodeRuneInString(s)
			if size != len(s) || r >= 0x10000 {
				continue
			}
			if i >= 128 && r < 128 {
				continue
			}
			canonTable[i] = uint16(r)
		}
	})
	return canonTable[u]
}

// arrayPathNode is @arrayPath: [path, shape]. The value at path; when it
// is an object or array and shape a non-empty object, shape resolved over
// each element (an object is one element).
type arrayPathNode struct {
	segs  []string
	whole bool
	path  node // when the path is not a literal string
	shape node
}

func compileArrayPath(opts value) node {
	if opts.k != kArr {
		return &errNode{"@arrayPath expected array, got " + typeName(opts)}
	}
	n := &arrayPathNode{}
	path, shape := opts.get("0"), opts.get("1")
	if path.k == kStr {
		n.segs, n.whole = splitPath(dollarPath(string(path.str(nil))))
	} else {
		n.path = compile(path)
	}
	if shape.k == kObj && len(shape.obj) > 0 {
		n.shape = compile(shape)
	}
	return n
}

func (n *arrayPathNode) eval(c *ctx, p value) (value, error) {
	root := getPath(p, n.segs, n.whole)
	if n.path != nil {
		var err error
		if root, err = n.path.eval(c, p); err != nil {
			return undef, err
		}
	}
	if n.shape == nil || root.k != kObj && root.k != kArr {
		return root, nil
	}
	items := []value{root}
	if root.k == kArr {
		items = root.elems()
	}
	out := value{k: kArr, arr: make([]value, 0, len(items))}
	for _, it := range items {
		v, err := n.shape.eval(c, it)
		if err != nil {
			return undef, err
		}
		out.arr = append(out.arr, v)
	}
	return out, nil
}

// flattenNode is @flatten: an object's (and array's, unless omitArrays)
// leaves under their paths joined by separator.
type flattenNode struct {
	sep, arg   node
	omitArrays bool
}

func compileFlatten(opts value) node {
	if !opts.isObject() {
		return &errNode{`@flatten requires an object with a "separator" key`}
	}
	sep := opts.get("separator")
	if !sep.truthy() {
		return &errNode{`@flatten requires a "separator" key`}
	}
	return &flattenNode{sep: compile(sep), arg: compile(opts.get("value")), omitArrays: opts.get("omitArrays").truthy()}
}

func (n *flattenNode) eval(c *ctx, p value) (value, error) {
	sep, err := n.sep.eval(c, p)
	if err != nil {
		return undef, err
	}
	if sep.k != kStr {
		return undef, jsError("@flatten requires a string separator")
	}
	v, err := n.arg.eval(c, p)
	if err != nil {
		return undef, err
	}
	f := flattener{sep: string(sep.str(nil)), omitArrays: n.omitArrays, at: map[string]int{}}
	f.flatten(v, "")
	return value{k: kObj, obj: f.out}, nil
}

type flattener struct {
	sep        string
	omitArrays bool
	out        []member
	at         map[string]int
}

func (f *flattener) set(key string, v value) {
	if j, ok := f.at[key]; ok {
		f.out[j].v = v
		return
	}
	f.at[key] = len(f.out)
	f.out = append(f.out, member{key, v})
}

func (f *flattener) flatten(v value, prefix string) {
	join := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + f.sep + k
	}
	switch {
	case v.k == kObj:
		for _, m := range jsKeyOrder(v.members()) {
			f.flatten(m.v, join(m.key))
		}
	case v.k == kArr && !f.omitArrays:
		for j, e := range v.elems() {
			f.flatten(e, join(strconv.Itoa(j)))
		}
	default:
		f.set(prefix, v)
	}
}

// jsonNode is @json: encode is JSON.stringify (a new string: numbers as
// JavaScript writes them); decode is JSON.parse of a string (the text's
// numbers keep their digits), a string that is not JSON left as it is.
type jsonNode struct {
	mode value
	arg  node
}

func compileJSON(opts value) node {
	if !opts.isObject() {
		return &errNode{`@json requires an object with a "value" key`}
	}
	if !opts.get("mode").truthy() {
		return &errNode{`@json requires a "mode" key`}
	}
	v := opts.get("value")
	if !v.truthy() {
		return &errNode{`@json requires a "value" key`}
	}
	return &jsonNode{mode: opts.get("mode"), arg: compile(v)}
}

func (n *jsonNode) eval(c *ctx, p value) (value, error) {
	v, err := n.arg.eval(c, p)
	if err != nil {
		return undef, err
	}
	mode := ""
	if n.mode.k == kStr {
		mode = string(n.mode.str(nil))
	}
	switch mode {
	case "encode":
		out, ok := appendStringify(nil, v)
		if !ok {
			return undef, nil
		}
		return bytesValue(out), nil
	case "decode":
		if v.k != kStr {
			return v, nil
		}
		d := &doc{}
		if err := d.index(append([]byte(nil), v.str(nil)...)); err != nil {
			return v, nil
		}
		return nodeValue(d, 0), nil
	}
	return undef, nil
}

// mergeNode is @merge: Object.assign({}, ...objects), reversed when the
// direction is "left" (so the first object wins).
type mergeNode struct {
	dir     node
	objects []node
}

func compileMerge(opts value) node {
	if !opts.isObject() {
		return &errNode{`@merge requires an object with an "objects" key and a "direction" key`}
	}
	if !opts.get("direction").truthy() {
		return &errNode{`@merge requires a "direction" key`}
	}
	objs := opts.get("objects")
	if !objs.truthy() {
		return &errNode{`@merge requires a "objects" key`}
	}
	if objs.k != kArr {
		return &errNode{"@merge: expected opts.array, got " + typeName(objs)}
	}
	n := &mergeNode{dir: compile(opts.get("direction"))}
	for _, o := range objs.arr {
		n.objects = append(n.objects, compile(o))
	}
	return n
}

func (n *mergeNode) eval(c *ctx, p value) (value, error) {
	dir, err := n.dir.eval(c, p)
	if err != nil {
		return undef, err
	}
	srcs := make([]value, len(n.objects))
	for j, o := range n.objects {
		if srcs[j], err = o.eval(c, p); err != nil {
			return undef, err
		}
	}
	if dir.k == kStr && string(dir.str(nil)) == "left" {
		for a, b := 0, len(srcs)-1; a < b; a, b = a+1, b-1 {
			srcs[a], srcs[b] = srcs[b], srcs[a]
		}
	}
	out := flattener{at: map[string]int{}} // its set is Object.assign's
	for _, s := range srcs {
		switch s.k {
		case kObj:
			for _, m := range jsKeyOrder(s.members()) {
				out.set(m.key, m.v)
			}
		case kArr:
			for j, e := range s.elems() {
				out.set(strconv.Itoa(j), e)
			}
		case kStr:
			// one member per UTF-16 code unit; half a pair is U+FFFD
			str, j := s.str(nil), 0
			for len(str) > 0 {
				r, size := utf8.DecodeRune(str)
				if r >= 0x10000 {
					out.set(strconv.Itoa(j), strValue("\uFFFD"))
					out.set(strconv.Itoa(j+1), strValue("\uFFFD"))
					j += 2
				} else {
					out.set(strconv.Itoa(j), bytesValue(str[:size]))
					j++
				}
				str = str[size:]
			}
		}
	}
	if out.out == nil {
		out.out = []member{}
	}
	return value{k: kObj, obj: out.out}, nil
}

// transformNode is @transform: apply, a mapping of its own, resolved over
// the payload (which must be an object) gives the payload mapping is
// resolved over.
type transformNode struct {
	apply   node
	err     error // apply is not a valid mapping: the error at Apply
	mapping node
}

func compileTransform(opts value) node {
	if !opts.isObject() {
		return &errNode{`@transform requires an object with an "apply" key and a "mapping" key`}
	}
	if !opts.get("mapping").truthy() {
		return &errNode{`@transform requires a "mapping" key`}
	}
	apply := opts.get("apply")
	if !apply.truthy() {
		return &errNode{`@transform requires a "apply" key`}
	}
	if !apply.isObject() {
		return &errNode{`@transform "apply" key should be an object`}
	}
	n := &transformNode{mapping: compile(opts.get("mapping"))}
	top, err := processRoot(apply)
	if err == nil {
		err = validate(top, []string{"@transform", "apply"})
	}
	if err != nil {
		n.err = jsError("%v", err)
		return n
	}
	n.apply = compile(top)
	return n
}

func (n *transformNode) eval(c *ctx, p value) (value, error) {
	if p.k == kUndef {
		p = emptyObject
	}
	if p.k != kObj {
		return undef, jsError("data must be an object, got %s", typeName(p))
	}
	if n.err != nil {
		return undef, n.err
	}
	np, err := n.apply.eval(c, p)
	if err != nil {
		return undef, err
	}
	return n.mapping.eval(c, removeUndefined(np))
}
