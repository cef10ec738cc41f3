package message

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/google/go-cmp/cmp"
)

func TestParseRawValidation(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // error text, "" for valid
	}{
		{"track ok", `{"type":"track","userId":"u","event":"e"}`, ""},
		{"not an object", `[1]`, "not a JSON object"},
		{"no type", `{"userId":"u"}`, "type is required"},
		{"type not a string", `{"type":1,"userId":"u"}`, "type must be a string"},
		{"unknown type", `{"type":"delete","userId":"u"}`, `type must be one of identify, track, page, screen, group, alias (got "delete")`},
		{"no ids", `{"type":"identify"}`, "userId or anonymousId is required"},
		{"null and empty ids", `{"type":"identify","userId":null,"anonymousId":""}`, "userId or anonymousId is required"},
		{"numeric user id", `{"type":"identify","userId":42}`, "userId must be a string"},
		{"anon only", `{"type":"identify","anonymousId":"a"}`, ""},
		{"no event", `{"type":"track","userId":"u"}`, "event is required"},
		{"event not a string", `{"type":"track","userId":"u","event":{}}`, "event must be a string"},
		{"page category no name", `{"type":"page","userId":"u","category":"c"}`, "name is required when category is set"},
		{"screen ok", `{"type":"screen","userId":"u","name":"n","category":"c"}`, ""},
		{"group no id", `{"type":"group","userId":"u"}`, "groupId is required"},
		{"alias no previous", `{"type":"alias","userId":"u"}`, "previousId is required"},
		{"alias no user", `{"type":"alias","previousId":"p","anonymousId":"a"}`, "userId is required"},
		{"alias ok", `{"type":"alias","userId":"u","previousId":"p"}`, ""},
		{"message id too long", `{"type":"identify","userId":"u","messageId":"` + strings.Repeat("m", 101) + `"}`, "messageId is longer than 100 characters"},
		{"properties not object", `{"type":"track","userId":"u","event":"e","properties":[1]}`, "properties must be an object"},
		{"context not object", `{"type":"track","userId":"u","event":"e","context":"x"}`, "context must be an object"},
		{"null properties", `{"type":"track","userId":"u","event":"e","properties":null}`, ""},
		{"bad timestamp", `{"type":"track","userId":"u","event":"e","timestamp":"yesterday"}`, `timestamp is not a time: invalid timestamp "yesterday": want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or Unix seconds/milliseconds`},
		{"bad timestamp type", `{"type":"track","userId":"u","event":"e","timestamp":true}`, `timestamp is not a time: invalid timestamp "true": want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or Unix seconds/milliseconds`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRaw([]byte(tt.in))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			var ve *ValidationError
			if err != nil && tt.name != "not an object" && !errors.As(err, &ve) {
				t.Errorf("error %T is not a *ValidationError", err)
			}
		})
	}
}

func TestRawTimestampNormalized(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"2024-05-01T14:00:00.123456+02:00"`, `"2024-05-01T12:00:00.123Z"`},
		{`"2024-05-01"`, `"2024-05-01T00:00:00.000Z"`},
		{`1714564800`, `"2024-05-01T12:00:00.000Z"`},
		{`1714564800123`, `"2024-05-01T12:00:00.123Z"`},
		{`"1714564800"`, `"2024-05-01T12:00:00.000Z"`},
	}
	for _, tt := range tests {
		r, err := ParseRaw([]byte(`{"type":"identify","userId":"u","timestamp":` + tt.in + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		got, _ := r.Object().Get("timestamp")
		if diff := cmp.Diff(tt.want, string(got)); diff != "" {
			t.Errorf("%s: mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

// User data passes byte for byte: exact digits, unknown fields, key order.
func TestRawPassThrough(t *testing.T) {
	in := `{"type":"track","userId":"u","event":"Paid","properties":{"amount":12345678901234567890.000000001,"big":1e400,"s":"<é>"},"x-custom":{"nested":[1.0,2.50]},"context":{"ip":"1.2.3.4","library":{"name":"analytics-ruby"}},"timestamp":"2024-05-01T12:00:00.000Z"}`
	r, err := ParseRaw([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	r.Fill(func() string { return "id-1" }, func() time.Time { t.Fatal("now called with a timestamp present"); return time.Time{} })
	lib := &EncodeOptions{Library: LibraryJSON("evfwd", "v9")}
	got, err := r.AppendJSON(nil, lib)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"track","userId":"u","event":"Paid","properties":{"amount":12345678901234567890.000000001,"big":1e400,"s":"<é>"},"x-custom":{"nested":[1.0,2.50]},"context":{"ip":"1.2.3.4","library":{"name":"evfwd","version":"v9"}},"timestamp":"2024-05-01T12:00:00.000Z","messageId":"id-1"}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("id-1", r.MessageId()); diff != "" {
		t.Errorf("messageId mismatch (-want +got):\n%s", diff)
	}
}

func TestRawFillAndContext(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	lib := &EncodeOptions{Library: json.RawMessage(`{"name":"evfwd"}`)}
	tests := []struct {
		name, in, want string
	}{
		{"adds id, timestamp, context", `{"type":"identify","userId":"u"}`,
			`{"type":"identify","userId":"u","messageId":"gen","timestamp":"2024-05-01T12:00:00.000Z","context":{"library":{"name":"evfwd"}}}`},
		{"keeps id, replaces empty id", `{"type":"identify","userId":"u","messageId":"","context":null}`,
			`{"type":"identify","userId":"u","messageId":"gen","context":{"library":{"name":"evfwd"}},"timestamp":"2024-05-01T12:00:00.000Z"}`},
		{"keeps given id", `{"messageId":"mine","type":"identify","userId":"u","context":{}}`,
			`{"messageId":"mine","type":"identify","userId":"u","context":{"library":{"name":"evfwd"}},"timestamp":"2024-05-01T12:00:00.000Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRaw([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			r.Fill(func() string { return "gen" }, func() time.Time { return now })
			got, err := r.AppendJSON(nil, lib)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzRaw(f *testing.F) {
	for _, s := range []string{
		`{"type":"track","userId":"u","event":"e","properties":{"n":12345678901234567890.000000001}}`,
		`{"type":"alias","userId":"u","previousId":"p","context":{"library":1}}`,
		`{"type":"page","anonymousId":"a","category":"c","name":"n","timestamp":1714564800}`,
		`{"type":"identify","userId":"u","context":null,"timestamp":"2024-05-01"}`,
		`{"type":"group","userId":"\u00e9","groupId":"g","type":"group"}`,
		"{\"type\":\"identify\",\"userId\":\"0\",\"\x9c\":\"\"}", // invalid UTF-8 key
		`[]`, `{`, `{"type":"track"}`,
	} {
		f.Add([]byte(s))
	}
	lib := &EncodeOptions{Library: LibraryJSON("evfwd", "fuzz")}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRaw(data)
		if err != nil {
			return
		}
		if !r.Type().Valid() {
			t.Fatalf("accepted type %q", r.Type())
		}
		r.Fill(func() string { return "id" }, func() time.Time { return time.Unix(0, 0) })
		out, err := r.AppendJSON(nil, lib)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %s", out)
		}
		// What we send must parse, validate and encode to the same bytes.
		// (Invalid UTF-8 in a key becomes U+FFFD on the first pass, so
		// for such input compare the second and third passes.)
		reencode := func(b []byte) []byte {
			r, err := ParseRaw(b)
			if err != nil {
				t.Fatalf("output does not validate: %v\n%s", err, b)
			}
			out, err := r.AppendJSON(nil, lib)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		out2 := reencode(out)
		if !utf8.Valid(data) {
			out, out2 = out2, reencode(out2)
		}
		if diff := cmp.Diff(string(out), string(out2)); diff != "" {
			t.Fatalf("re-encoding mismatch (-want +got):\n%s", diff)
		}
	})
}

// FuzzRawForms: a line kept spliced and the same line kept as an Object
// agree on every answer and encode to the same valid JSON, with and
// without context.library, before and after unsplicing, and whether the
// Raw was fresh or reused after the previous input.
func FuzzRawForms(f *testing.F) {
	for _, s := range []string{
		`{"type":"track","userId":"u","event":"e","properties":{"n":1.50},"x":[1]}`,
		`{"type":"identify","userId":"u","messageId":"","timestamp":1714564800123,"context":{"ip":"1","library":{"name":"x"}}}`,
		`{"type":"identify","anonymousId":"a","messageId":null,"timestamp":null,"context":null}`,
		`{"type":"page","anonymousId":"a","context":{},"timestamp":"2024-05-01T12:00:00.000Z"}`,
		`{"type":"alias","userId":"u","previousId":"p","a":1,"b":2,"a":3}`,
		`{"type":"group","userId":"u","groupId":"g","context":{"library":1,"library":2}}`,
		` {"type":"screen","userId":"u","name":"n"} `,
		`{"type":"track","userId":"u","event":"e","<k>":1}`,
		`{"type" : "track","userId":"u","event":"e"}`,
		`{"type":"track","userId":"u","event":"e","context":{"a":[1, 2]}}`,
	} {
		f.Add([]byte(s))
	}
	lib := &EncodeOptions{Library: LibraryJSON("evfwd", "fuzz")}
	// An id with escapes, and longer than the scratch space kept for ids.
	newID := func() string { return "id-\"1\"-" + strings.Repeat("é", 40) }
	now := func() time.Time { return time.Unix(1714564800, 123456789) }
	var reused Raw // holds the previous input's message
	f.Fuzz(func(t *testing.T, data []byte) {
		rerr := reused.Parse(data)
		spliced, err := ParseRaw(data)
		obj, perr := rawjson.ParseObject(data)
		var object *Raw
		if perr == nil {
			object, perr = NewRaw(obj)
		}
		for _, e := range []error{perr, rerr} {
			if (err == nil) != (e == nil) || err != nil && err.Error() != e.Error() {
				t.Fatalf("errors differ: spliced %v, object or reused %v", err, e)
			}
		}
		if err != nil {
			return
		}
		same := func(stage string) {
			t.Helper()
			for _, o := range []*EncodeOptions{nil, lib} {
				a, aerr := spliced.AppendJSON(nil, o)
				b, berr := object.AppendJSON(nil, o)
				c, cerr := reused.AppendJSON(nil, o)
				if diff := cmp.Diff(string(b), string(a)); diff != "" || (aerr == nil) != (berr == nil) {
					t.Fatalf("%s: encodings differ (-object +spliced):\n%s\nerrors %v, %v", stage, diff, aerr, berr)
				}
				if diff := cmp.Diff(string(a), string(c)); diff != "" || (aerr == nil) != (cerr == nil) {
					t.Fatalf("%s: a reused Raw encodes differently (-fresh +reused):\n%s", stage, diff)
				}
				if aerr == nil && !json.Valid(a) {
					t.Fatalf("%s: invalid JSON %s", stage, a)
				}
			}
			for _, r := range []*Raw{object, &reused} {
				if spliced.Type() != r.Type() || spliced.MessageId() != r.MessageId() || !spliced.Timestamp().Equal(r.Timestamp()) {
					t.Fatalf("%s: answers differ", stage)
				}
			}
		}
		same("parsed")
		for _, r := range []*Raw{spliced, object, &reused} {
			r.Fill(newID, now)
		}
		same("filled")
		spliced.Object()
		same("unspliced")
	})
}

// Compact lines with plain keys stay spliced; the rest take the Object form.
func TestRawSplicedWhenPlain(t *testing.T) {
	tests := []struct {
		in      string
		spliced bool
	}{
		{benchLines["replayed"], true},
		{benchLines["bare"], true},
		{`{"type":"identify","userId":"u","context":{"library":{"name":"x"},"ip":"1"}}` + "\r", true},
		{`{"type":"identify", "userId":"u"}`, false},
		{`{"type":"identify","userId":"u","userId":"v"}`, false},
		{`{"type":"identify","userId":"u","\u0061":1}`, false},
		{`{"type":"identify","userId":"u","context":{"libr\u0061ry":1}}`, false},
	}
	for _, tt := range tests {
		r, err := ParseRaw([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if got := r.obj == nil; got != tt.spliced {
			t.Errorf("%s: spliced = %v, want %v", tt.in, got, tt.spliced)
		}
	}
}

func TestKnownKeysAgree(t *testing.T) {
	for k := range numKeys {
		if got, ok := lookupKey([]byte(keyNames[k])); !ok || got != k {
			t.Errorf("lookupKey(%q) = %d, %v; want %d", keyNames[k], got, ok, k)
		}
	}
}

// A Raw that holds no message says so instead of encoding nonsense.
func TestRawZeroValue(t *testing.T) {
	var r Raw
	if out, err := r.AppendJSON(nil, nil); err == nil {
		t.Errorf("AppendJSON on an empty Raw = %s, nil error", out)
	}
	if _, err := json.Marshal(&r); err == nil {
		t.Error("json.Marshal on an empty Raw succeeded")
	}
	if n := r.Object().Len(); n != 0 {
		t.Errorf("Object of an empty Raw has %d members", n)
	}
}
