package audience

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// collect reads a whole list into "user=value" strings and the error.
func collect(in string, traits bool) ([]string, error) {
	out := []string{}
	for v, err := range Read(strings.NewReader(in), traits) {
		if err != nil {
			return out, err
		}
		out = append(out, v.UserID+"="+string(v.Value))
	}
	return out, nil
}

func TestReadAudience(t *testing.T) {
	for _, tt := range []struct{ name, in string }{
		{"ndjson strings", "\"a\"\n\"b\"\r\n\n  \"c\"  \n"},
		{"ndjson objects", `{"userId":"a","email":"x"}` + "\n" + `{"userId":"b"}` + "\n" + `"c"`},
		{"array", ` ["a", {"userId":"b"}, "c"] `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := collect(tt.in, false)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"a=true", "b=true", "c=true"}, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, in := range []string{"", "  \n\n", "[]"} {
		if got, err := collect(in, false); err != nil || len(got) != 0 {
			t.Errorf("collect(%q) = %v, %v; want nothing", in, got, err)
		}
	}
}

func TestReadTraits(t *testing.T) {
	in := `{"userId":"a","value":12345678901234567890.5}
{"userId":"b","value": { "tier" : "gold" }}
{"userId":"c","value":null}
{"userId":"d","value":"x"}`
	got, err := collect(in, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a=12345678901234567890.5", `b={"tier":"gold"}`, `d="x"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	got, err = collect(`[{"userId":"a","value":1},{"userId":"b","value":true}]`, true)
	if err != nil || len(got) != 2 {
		t.Errorf("array = %v, %v", got, err)
	}
}

func TestReadErrors(t *testing.T) {
	for _, tt := range []struct {
		in     string
		traits bool
		want   string
	}{
		{"\"a\"\n42\n", false, "line 2: want a userId string"},
		{"\"a\"\n{\"userId\":\"\"}\n", false, "line 2: userId is empty"},
		{"{\"id\":\"a\"}", false, "line 1: userId is required"},
		{"{\"userId\":1}", false, "line 1: json: cannot unmarshal number"},
		{"\"a\"\n{bad\n", false, "line 2: invalid character"},
		{`["a", 1]`, false, "element 2: want a userId string"},
		{`["a", "b"`, false, "end of array"},
		{`["a"] "b"`, false, "after the array: unexpected data"},
		{`{"userId":"a"}`, true, "line 1: value is required"},
		{`"a"`, true, "line 1: want an object"},
		{"\"" + strings.Repeat("x", MaxLine) + "\"", false, "line 1: line is"},
	} {
		_, err := collect(tt.in, tt.traits)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || !errors.Is(err, ErrList) {
			t.Errorf("collect(%.40q) error = %v, want %q...", tt.in, err, tt.want)
		}
	}
}

// TestIdentifyIsStoredAsItsWebhookBody: a sync's identify is stored as the
// exact body the forwarder sends, one per source.
func TestIdentifyIsStoredAsItsWebhookBody(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 123e6, time.UTC)
	msgs := Messages("high_value_users", ClassAudience, []string{"web", "app"}, now, func() string { return "m-1" }, nil)(`u"1`, []byte("true"))
	want := `{"type":"identify","version":1,"userId":"u\"1","traits":{"high_value_users":true},` +
		`"context":{"personas":{"computation_class":"audience","computation_key":"high_value_users"}},` +
		`"messageId":"m-1","timestamp":"2024-05-01T12:00:00.123Z","receivedAt":"2024-05-01T12:00:00.123Z"}`
	for i, src := range []string{"web", "app"} {
		m := msgs[i]
		if string(m.Body) != want {
			t.Errorf("body\n got %s\nwant %s", m.Body, want)
		}
		m.Body = nil
		wantMsg := store.Message{Source: src, MessageID: "m-1", Type: "identify", UserID: `u"1`, ReceivedAt: now,
			Form: store.FormWire, Destinations: []string{store.DestinationWebhooks}}
		if diff := cmp.Diff(wantMsg, m); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add("\"a\"\n{\"userId\":\"b\",\"value\":1}\n", true)
	f.Add(`["a",{"userId":"b"}]`, false)
	f.Fuzz(func(t *testing.T, in string, traits bool) {
		for v, err := range Read(strings.NewReader(in), traits) {
			if err != nil {
				if !errors.Is(err, ErrList) {
					t.Fatalf("error %v is not a ListError", err)
				}
				return
			}
			if v.UserID == "" || len(v.Value) == 0 {
				t.Fatalf("empty entry %+v", v)
			}
		}
	})
}

func TestAppendLine(t *testing.T) {
	for _, tt := range []struct {
		line   string
		traits bool
		want   string
	}{
		{"u1", false, `"u1"`},
		{"  u 2\r", false, `"u 2"`},
		{`say "hi"`, false, `"say \"hi\""`},
		{` "u3" `, false, `"u3"`},
		{`{"userId":"u4"}`, false, `{"userId":"u4"}`},
		{"", false, ""},
		{`{"userId":"a","value":1}`, true, `{"userId":"a","value":1}`},
		{"a", true, "a"}, // Read refuses it, naming the line
	} {
		if got := string(AppendLine([]byte("x\n"), []byte(tt.line), tt.traits)); got != "x\n"+tt.want+"\n" {
			t.Errorf("AppendLine(%q, %v) appended %q, want %q", tt.line, tt.traits, got[2:], tt.want+"\n")
		}
	}
	// A file of bare userIds, line for line, reads as its members.
	var list []byte
	for _, l := range strings.Split("a\n\n\"b\"\n{\"userId\":\"c\"}\nd e", "\n") {
		list = AppendLine(list, []byte(l), false)
	}
	got, err := collect(string(list), false)
	if diff := cmp.Diff([]string{"a=true", "b=true", "c=true", "d e=true"}, got); err != nil || diff != "" {
		t.Errorf("Read(AppendLine...): %v, mismatch (-want +got):\n%s", err, diff)
	}
}
