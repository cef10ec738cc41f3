package fql

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSyntaxErrorCaret(t *testing.T) {
	tests := []struct {
		src          string
		line, column int
		caret        string
	}{
		{`type = "a" & event = "b"`, 1, 12, "type = \"a\" & event = \"b\"\n           ^"},
		{"type = \"track\"\nand\tfoo = 1", 2, 5, "and\tfoo = 1\n   \t^"},
		{`event = "é😀" or !(type = "page")`, 1, 17, "event = \"é😀\" or !(type = \"page\")\n                ^"},
	}
	for _, tc := range tests {
		_, err := Parse(tc.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError", tc.src, err)
			continue
		}
		if se.Line != tc.line || se.Column != tc.column {
			t.Errorf("Parse(%q): line %d column %d, want %d %d (%v)", tc.src, se.Line, se.Column, tc.line, tc.column, err)
		}
		if diff := cmp.Diff(tc.caret, se.Caret()); diff != "" {
			t.Errorf("Parse(%q).Caret() mismatch (-want +got):\n%s", tc.src, diff)
		}
	}
}

func TestBlankAndNil(t *testing.T) {
	var nilCond *Condition
	if !nilCond.Match([]byte(`{}`)) || nilCond.String() != "" {
		t.Error("a nil *Condition matches every message and reads as empty")
	}
	for _, src := range []string{"", " ", "\n\t "} {
		c, err := Parse(src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if !c.Match([]byte(`not json`)) || c.String() != src {
			t.Errorf("Parse(%q) matches every message and keeps its text", src)
		}
	}
	c, _ := Parse(`type = "track"`)
	set := NewSet([]*Condition{nil, c, nilCond})
	out := make([]bool, 3)
	for _, msg := range []string{`not json`, `[1]`, `{"type":"track"} x`, `{"type":"track"`} {
		set.Decide([]byte(msg), out)
		if diff := cmp.Diff([]bool{true, false, true}, out); diff != "" {
			t.Errorf("Decide(%s) mismatch (-want +got):\n%s", msg, diff)
		}
	}
}

func TestSetConcurrent(t *testing.T) {
	conds := benchConditions(t)
	set := NewSet(conds)
	want := make([]bool, len(conds))
	set.Decide(benchMessage, want)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			out := make([]bool, len(conds))
			for range 200 {
				set.Decide(benchMessage, out)
				if diff := cmp.Diff(want, out); diff != "" {
					t.Errorf("concurrent Decide mismatch (-want +got):\n%s", diff)
					return
				}
			}
		})
	}
	wg.Wait()
}
