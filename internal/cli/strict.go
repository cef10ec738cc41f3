package cli

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// The config file is strict: a key no command reads is an error naming the
// key, the file and line, and the nearest known key, so that a typo such
// as `enabeld: true` is not silently ignored. The known keys are derived
// from the command tree: every flag name (as `batch-size` or `batch_size`)
// at the top level and under the name of the command it belongs to, plus
// the structured settings commands declare with ReadsConfig.

// annotationKeys holds, on a command, the dotted key paths it reads from
// the file's top level (see ReadsConfig).
const annotationKeys = "evfwd_config_keys"

// notInFile are flags the file cannot set, as they say where the file is or
// belong to cobra, and commands without a section (help, version).
var notInFile = map[string]bool{"help": true, "config": true, "version": true}

// ReadsConfig says that cmd decodes v (a struct, through its mapstructure
// tags) from the top level of the config file, so that the file may hold
// v's keys whichever command runs. Fields added to v later are known
// without more ado; a map takes any key, an interface field any value.
func ReadsConfig(cmd *cobra.Command, v any) {
	var paths []string
	structPaths(reflect.TypeOf(v), "", nil, &paths)
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	if old := cmd.Annotations[annotationKeys]; old != "" {
		paths = append(strings.Split(old, "\n"), paths...)
	}
	cmd.Annotations[annotationKeys] = strings.Join(paths, "\n")
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// structPaths appends the dotted path of every key below a value of type t
// at prefix ("" for the top level): "sources", "sources.name",
// "sources.webhooks.endpoints.headers.*" ("*" stands for any key). A
// path with nothing below it takes any value, mapping or not.
func structPaths(t reflect.Type, prefix string, seen []reflect.Type, out *[]string) {
	// A pointer is its value; a list's items share the list's path.
	for t != nil && (t.Kind() == reflect.Pointer || (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8) {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(textUnmarshaler) || slices.Contains(seen, t) {
		// A value read from one string (time.Time, ...), or a type that
		// holds itself: nothing below it to check.
		return
	}
	join := func(key string) string {
		if prefix == "" {
			return key
		}
		return prefix + "." + key
	}
	switch t.Kind() {
	case reflect.Map:
		if prefix != "" {
			*out = append(*out, join("*"))
			structPaths(t.Elem(), join("*"), seen, out)
		}
	case reflect.Struct:
		seen = append(seen, t)
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			switch {
			case f.Anonymous && strings.Contains(","+opts+",", ",squash,"):
				// Its fields are this struct's, exported or not.
				structPaths(f.Type, prefix, seen, out)
				continue
			case name == "-" || !f.IsExported():
				continue
			case name == "":
				name = f.Name
			}
			path := join(strings.ToLower(name))
			*out = append(*out, path)
			structPaths(f.Type, path, seen, out)
		}
	}
}

// keySet is the tree of keys a config file may hold. A sequence in the
// file is checked item by item against the keySet of its key; a key with
// nothing known below it takes any value (a flag's, a header's).
type keySet struct {
	keys map[string]*keySet // the keys known below this one, by lower-case name
	any  *keySet            // when set, any other key is known too, with this below it
}

func (k *keySet) child(name string) *keySet {
	if name == "*" {
		if k.any == nil {
			k.any = &keySet{}
		}
		return k.any
	}
	if k.keys == nil {
		k.keys = map[string]*keySet{}
	}
	name = strings.ToLower(name)
	c := k.keys[name]
	if c == nil {
		c = &keySet{}
		k.keys[name] = c
	}
	return c
}

func (k *keySet) addPath(path string) {
	for part := range strings.SplitSeq(path, ".") {
		k = k.child(part)
	}
}

// knownKeys is everything the file may hold for the command tree under
// root: each flag's name at the top level and under its command's name
// (which Lookup reads, underscores standing for dashes), and the paths the
// commands declared with ReadsConfig.
func knownKeys(root *cobra.Command) *keySet {
	top := &keySet{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		var section *keySet
		if c.Runnable() && !notInFile[c.Name()] {
			section = top.child(c.Name())
		}
		add := func(f *pflag.Flag) {
			if notInFile[f.Name] {
				return
			}
			for _, name := range []string{f.Name, underscore(f.Name)} {
				top.child(name)
				if section != nil {
					section.child(name)
				}
			}
		}
		c.LocalFlags().VisitAll(add)
		c.InheritedFlags().VisitAll(add)
		if paths := c.Annotations[annotationKeys]; paths != "" {
			for p := range strings.SplitSeq(paths, "\n") {
				top.addPath(p)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return top
}

// UnknownKeyError is a key of the config file that no command reads.
type UnknownKeyError struct {
	Key     string // the key as written: enabeld
	Path    string // where it is: sources[0].webhooks.enabeld
	File    string
	Line    int      // 0 when the format gives none
	Suggest string   // the nearest known key at that level, "" when none is close
	Known   []string // when none is close and the level has few keys, all of them
}

func (e *UnknownKeyError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	switch {
	case e.Line > 0:
		fmt.Fprintf(&b, " (line %d of %s)", e.Line, e.File)
	case e.File != "":
		fmt.Fprintf(&b, " (in %s)", e.File)
	}
	b.WriteString(": unknown key")
	switch {
	case e.Suggest != "":
		fmt.Fprintf(&b, "; did you mean %q?", e.Suggest)
	case len(e.Known) > 0:
		fmt.Fprintf(&b, "; known here: %s", strings.Join(e.Known, ", "))
	}
	return b.String()
}

// maxListed is how many known keys an error lists when none is close.
const maxListed = 6

// checkKeys reports every key of doc (a parsed file) that known does not
// hold, in the order of the file. Anchors and merge keys (<<) are
// followed; each mapping is checked once against each part of known, so
// that aliases cost nothing more however they nest.
func checkKeys(doc *yaml.Node, known *keySet, file string) []*UnknownKeyError {
	c := &checker{file: file, done: map[checked]bool{}}
	if doc != nil && doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	c.value(doc, known, "")
	return c.errs
}

type checked struct {
	node *yaml.Node
	set  *keySet
}

type checker struct {
	file string
	done map[checked]bool
	errs []*UnknownKeyError
}

// value checks the keys below n, the value at path, against set.
func (c *checker) value(n *yaml.Node, set *keySet, path string) {
	n = c.resolve(n)
	if n == nil || (set.keys == nil && set.any == nil) {
		return
	}
	switch n.Kind {
	case yaml.MappingNode:
		c.mapping(n, set, path)
	case yaml.SequenceNode:
		for i, item := range n.Content {
			if item = c.resolve(item); item != nil && item.Kind == yaml.MappingNode {
				c.mapping(item, set, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
}

func (c *checker) mapping(n *yaml.Node, set *keySet, path string) {
	if c.done[checked{n, set}] {
		return
	}
	c.done[checked{n, set}] = true
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode {
			continue // not a key viper can read: its own parser said so
		}
		if key.ShortTag() == "!!merge" {
			// <<: *base, or <<: [*a, *b]: their keys are this mapping's.
			if val = c.resolve(val); val != nil && val.Kind == yaml.SequenceNode {
				for _, v := range val.Content {
					if v = c.resolve(v); v != nil && v.Kind == yaml.MappingNode {
						c.mapping(v, set, path)
					}
				}
			} else if val != nil && val.Kind == yaml.MappingNode {
				c.mapping(val, set, path)
			}
			continue
		}
		at := quoteKey(key.Value)
		if path != "" {
			at = path + "." + at
		}
		next := set.keys[strings.ToLower(key.Value)]
		if next == nil {
			next = set.any
		}
		if next == nil {
			c.errs = append(c.errs, c.unknown(key, set, at))
			continue
		}
		c.value(val, next, at)
	}
}

// resolve follows aliases to the node they name.
func (c *checker) resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	return n
}

func (c *checker) unknown(key *yaml.Node, set *keySet, path string) *UnknownKeyError {
	e := &UnknownKeyError{Key: key.Value, Path: path, File: c.file, Line: key.Line}
	names := make([]string, 0, len(set.keys))
	for name := range set.keys {
		names = append(names, name)
	}
	slices.Sort(names)
	e.Suggest = nearest(strings.ToLower(key.Value), names)
	if e.Suggest == "" && len(names) <= maxListed {
		e.Known = names
	}
	return e
}

// nearest returns the name closest to typed by edit distance (a swap of
// two neighbours counts as one edit), when it is close enough to be what
// was meant: at most 2 edits, and at most one per three characters typed.
// Ties go to the first name in order.
func nearest(typed string, names []string) string {
	limit := min(2, max(1, len([]rune(typed))/3))
	best, bestD := "", limit+1
	for _, name := range names {
		if d := editDistance(typed, name); d < bestD {
			best, bestD = name, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of adjacent runes.
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// Three rows of the (len(s)+1) x (len(t)+1) table.
	prev2, prev, cur := make([]int, len(t)+1), make([]int, len(t)+1), make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}

// unknownKeys is checkKeys for a loaded file, as one usage error (exit 2)
// with a line for each key, or nil.
func unknownKeys(doc *yaml.Node, known *keySet, file string) error {
	found := checkKeys(doc, known, file)
	if len(found) == 0 {
		return nil
	}
	errs := make([]error, len(found))
	for i, e := range found {
		errs[i] = e
	}
	return UsageError(errors.Join(errs...))
}

// quoteKey is how a key appears in a message when it is not a plain word.
func quoteKey(s string) string {
	if s == "" || strings.ContainsAny(s, " .[]\"\t\n") {
		return strconv.Quote(s)
	}
	return s
}
