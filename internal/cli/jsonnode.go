package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// JSONAt returns the value at path in the config file (keys, and indexes
// into lists) as JSON, with its keys in the file's order and their case
// kept: what viper's maps lose, and what a value whose order and case
// matter (a destination's mapping) needs. ok is false when the file has no
// such value or was not YAML or JSON.
func (c *Config) JSONAt(path ...any) (_ []byte, ok bool, err error) {
	_, n := c.node(path...)
	if n == nil {
		return nil, false, nil
	}
	b, err := nodeJSON(nil, n, 0)
	return b, err == nil, err
}

// node finds the value at path in the file (keys, any case as viper reads
// them, and indexes into lists), and the key it is under (nil under an
// index, or at the top); nil when the file has no such value or was not
// YAML or JSON.
func (c *Config) node(path ...any) (key, val *yaml.Node) {
	if c.doc == nil || c.doc.Kind != yaml.DocumentNode || len(c.doc.Content) == 0 {
		return nil, nil
	}
	val = c.doc.Content[0]
	for _, p := range path {
		val, key = resolveAlias(val), nil
		switch p := p.(type) {
		case string:
			if val.Kind != yaml.MappingNode {
				return nil, nil
			}
			var next *yaml.Node
			for i := 0; i+1 < len(val.Content); i += 2 {
				if strings.EqualFold(val.Content[i].Value, p) {
					key, next = val.Content[i], val.Content[i+1]
				}
			}
			if next == nil {
				return nil, nil
			}
			val = next
		case int:
			if val.Kind != yaml.SequenceNode || p < 0 || p >= len(val.Content) {
				return nil, nil
			}
			val = val.Content[p]
		}
	}
	return key, val
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// nodeJSON appends n as JSON.
func nodeJSON(b []byte, n *yaml.Node, depth int) ([]byte, error) {
	if depth > 64 {
		return nil, fmt.Errorf("line %d: nested too deep", n.Line)
	}
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		b = append(b, '{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b = append(b, ',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b = append(append(b, k...), ':')
			var err error
			if b, err = nodeJSON(b, n.Content[i+1], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case yaml.SequenceNode:
		b = append(b, '[')
		for i, item := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = nodeJSON(b, item, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %v", n.Line, err)
		}
		switch v := v.(type) {
		case int, int64, uint64:
			// YAML's own number forms (0x1F, 1_000) in JSON's.
			return fmt.Append(b, v), nil
		case float64:
			return strconv.AppendFloat(b, v, 'g', -1, 64), nil
		}
		out, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n.Line, err)
		}
		return append(b, out...), nil
	}
	return nil, fmt.Errorf("line %d: not a value JSON can hold", n.Line)
}
