package fql

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

var fuzzMessages = [][]byte{
	benchMessage,
	[]byte(`{"type":"track","event":"Order Completed","properties":{"total":0,"items":[{"sku":"a"}],"s":"😀"},"userId":true}`),
	[]byte(`{"properties":{"a":{"b":1},"a":""},"context":null,"traits":"abc"}`),
}

func FuzzParse(f *testing.F) {
	for _, tc := range segmentCases {
		f.Add(tc.cond)
	}
	for _, tc := range refusals {
		f.Add(tc.cond)
	}
	f.Fuzz(func(t *testing.T, src string) {
		c, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q): %v is not a *SyntaxError", src, err)
			}
			_ = se.Caret()
			return
		}
		// String gives the source back, and it means the same.
		again, err := Parse(c.String())
		if err != nil {
			t.Fatalf("Parse(%q) then Parse(String()): %v", src, err)
		}
		if !sameTree(c.tree, again.tree) {
			t.Fatalf("Parse(%q): String() parses to another tree", src)
		}
		for _, m := range fuzzMessages {
			if c.Match(m) != again.Match(m) {
				t.Fatalf("Parse(%q): String() decides %s otherwise", src, m)
			}
		}
	})
}

func FuzzMatch(f *testing.F) {
	for _, m := range fuzzMessages {
		f.Add(m)
	}
	for _, tc := range segmentCases {
		f.Add([]byte(tc.msg))
	}
	conds := benchConditions(f)
	for _, tc := range segmentCases {
		if c, err := Parse(tc.cond); err == nil {
			conds = append(conds, c)
		}
	}
	set := NewSet(conds)
	f.Fuzz(func(t *testing.T, msg []byte) {
		out := make([]bool, len(conds))
		set.Decide(msg, out)
		trimmed := bytes.TrimLeft(msg, " \t\r\n")
		if !json.Valid(msg) || len(trimmed) == 0 || trimmed[0] != '{' {
			// Not one JSON object: no condition holds.
			if i := slices.Index(out, true); i >= 0 {
				t.Fatalf("%q holds on %q, which is not one JSON object", conds[i], msg)
			}
		}
		for i, c := range conds {
			if got := c.Match(msg); got != out[i] {
				t.Fatalf("%q on %q: Match %v, Set %v", c, msg, got, out[i])
			}
		}
	})
}
