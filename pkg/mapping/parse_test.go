package mapping

import (
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	cases := []struct{ mapping, want string }{
		{`{"user":{"email":{"@path":5}}}`, "mapping.user.email.@path: should be a string or a mapping directive but it is a number"},
		{`{"a.b":{"@template":true}}`, `mapping["a.b"].@template: should be a string`},
		{`{"x":{"@nope":1}}`, "mapping.x: @nope is not a directive"},
		{`{"x":{"@path":"a","@template":"b"}}`, "mapping.x: should have only one @-prefixed key"},
		{`{"x":{"@path":"a","y":1}}`, `mapping.x: a directive object should have only its @-prefixed key but it also has "y"`},
		{`{"x":{"@json":{"mode":"zip","value":"a"}}}`, `mapping.x.@json.mode: should be one of encode, decode but it is "zip"`},
		{`{"x":{"@replace":{"pattern":"elevenchars","value":"a"}}}`, "mapping.x.@replace.pattern: should be a string of length 10 or less"},
		{`{"x":{"@merge":{"objects":[5]}}}`, "mapping.x.@merge.objects.0: should be an object or a mapping directive but it is a number"},
		{`{"x":{"@if":{"exists":{"@path":"a"},"then":{"@liquid":"{{ a }}"}}}}`, "mapping.x.@if.then: @liquid is not supported"},
		{`{"x":[{"@liquid":"{{ a }}"}]}`, "mapping.x.0: @liquid is not supported"},
		{`{"__segment_internal_directive":"ab"}`, "mapping.__segment_internal_directive: the root mapping must only have a single directive object"},
		{`[1]`, "a mapping must be a JSON object"},
		{`{"x":`, "mapping: unexpected end of JSON input"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.mapping))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", tc.mapping, err, tc.want)
		}
	}
}

// TestDigitsKept: what is copied keeps its bytes; what is computed is
// JavaScript's.
func TestDigitsKept(t *testing.T) {
	m, err := Parse([]byte(`{"a":{"@path":"n"},"b":1.0,"c":{"@path":"big"},"s":{"@path":"esc"},"t":{"@template":"{{n}}"},"o":{"@path":"o"}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Apply([]byte(`{"n":1.50,"big":12345678901234567890,"esc":"\u00e9\n","o":{ "x" : [1.0, 2] }}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":1.50,"b":1.0,"c":12345678901234567890,"s":"\u00e9\n","t":"1.5","o":{"x":[1.0,2]}}`
	if string(got) != want {
		t.Errorf("mismatch (-want +got):\n-%s\n+%s", want, got)
	}
}
