package mapping

import (
	"encoding/json"
	"math/rand"
	"testing"
)

func FuzzParse(f *testing.F) {
	g := &gen{r: rand.New(rand.NewSource(7))}
	for i := 0; i < 50; i++ {
		f.Add([]byte(g.mapping()))
	}
	f.Add([]byte(benchMapping))
	f.Add([]byte(`{"__segment_internal_directive":"ab"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := Parse(raw)
		if err != nil {
			return
		}
		out, err := m.Apply([]byte(benchMessage))
		if err == nil && !json.Valid(out) {
			t.Fatalf("Apply wrote invalid JSON %q", out)
		}
	})
}

func FuzzApply(f *testing.F) {
	g := &gen{r: rand.New(rand.NewSource(8))}
	for i := 0; i < 50; i++ {
		f.Add([]byte(g.message()))
	}
	f.Add([]byte(benchMessage))
	f.Add([]byte(`{"properties":{"s":"\ud800\u00e9","n":1e400}}`))
	mappings := []*Mapping{}
	for _, raw := range []string{benchMapping, `{
		"all": {"@path": "$."},
		"t": {"@template": "{{{properties.s}}}{{properties}}{{properties.n}}"},
		"j": {"@json": {"mode": "encode", "value": {"@path": "properties"}}},
		"d": {"@json": {"mode": "decode", "value": {"@path": "properties.s"}}},
		"f": {"@flatten": {"separator": ".", "value": {"@path": "$."}}},
		"m": {"@merge": {"direction": "left", "objects": [{"@path": "properties"}, {"@path": "context"}, {"@path": "userId"}]}},
		"r": {"@replace": {"pattern": "a", "replacement": "$'$&", "value": {"@path": "event"}, "ignorecase": true}},
		"c": {"@case": {"operator": "upper", "value": {"@path": "event"}}},
		"a": {"@arrayPath": ["properties.products", {"x": {"@path": "sku"}, "n": {"@excludeWhenNull": {"@path": "$."}}}]},
		"x": {"@transform": {"apply": {"e": {"@path": "event"}}, "mapping": {"e": {"@path": "e"}}}},
		"i": {"@if": {"blank": {"@path": "properties.s"}, "then": {"@path": "properties.s.length"}, "else": [1, {"@path": "userId[0]"}]}}
	}`} {
		m, err := Parse([]byte(raw))
		if err != nil {
			f.Fatal(err)
		}
		mappings = append(mappings, m)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		for _, m := range mappings {
			out, err := m.Apply(msg)
			if err == nil && !json.Valid(out) {
				t.Fatalf("Apply(%q) wrote invalid JSON %q", msg, out)
			}
		}
	})
}
