package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

func parse(t testing.TB, s string) *rawjson.Object {
	t.Helper()
	o, err := rawjson.ParseObject([]byte(s))
	if err != nil {
		t.Fatalf("ParseObject(%s): %v", s, err)
	}
	return o
}

func TestBodyGolden(t *testing.T) {
	for _, typ := range Types {
		t.Run(string(typ), func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "collected", string(typ)+".json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Body(parse(t, string(bytes.TrimSpace(in))))
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			golden(t, filepath.Join("body", string(typ)+".json"), append(got, '\n'))
		})
	}
}

func TestBody(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{
			"type and version lead, rest in collected order",
			`{"userId":"u","event":"E","type":"track","timestamp":"2024-05-01T12:00:00.123Z"}`,
			`{"type":"track","version":1,"userId":"u","event":"E","timestamp":"2024-05-01T12:00:00.123Z"}`,
		},
		{
			"timestamp normalized in place",
			`{"type":"page","timestamp":"2024-05-01T14:00:00.1234567+02:00","userId":"u"}`,
			`{"type":"page","version":1,"timestamp":"2024-05-01T12:00:00.123Z","userId":"u"}`,
		},
		{
			"unix seconds number",
			`{"type":"identify","userId":"u","timestamp":1714564800}`,
			`{"type":"identify","version":1,"userId":"u","timestamp":"2024-05-01T12:00:00.000Z"}`,
		},
		{
			"receivedAt stands in for a missing timestamp",
			`{"type":"track","userId":"u","event":"E","receivedAt":"2024-05-01T12:00:00.5Z"}`,
			`{"type":"track","version":1,"timestamp":"2024-05-01T12:00:00.500Z","userId":"u","event":"E","receivedAt":"2024-05-01T12:00:00.5Z"}`,
		},
		{
			"writeKey and sentAt dropped, collected version replaced",
			`{"type":"group","version":7,"writeKey":"wk","sentAt":"2024-05-01T12:00:00Z","groupId":"g","timestamp":"2024-05-01T12:00:00Z"}`,
			`{"type":"group","version":1,"groupId":"g","timestamp":"2024-05-01T12:00:00.000Z"}`,
		},
		{
			"bytes untouched",
			`{"type":"track","event":"E","properties":{"n":12345678901234567890.000000001,"s":"\u00e9<>"},"timestamp":"2024-05-01T12:00:00Z"}`,
			`{"type":"track","version":1,"event":"E","properties":{"n":12345678901234567890.000000001,"s":"\u00e9<>"},"timestamp":"2024-05-01T12:00:00.000Z"}`,
		},
		{
			"alias renames in place and ignores look-alikes",
			`{"type":"alias","User ID":"x","userId":"new","previousId":"old","timestamp":"2024-05-01T12:00:00Z"}`,
			`{"type":"alias","version":1,"User ID":"new","Previous ID":"old","timestamp":"2024-05-01T12:00:00.000Z"}`,
		},
		{
			"delete keeps only type, userId, timestamp",
			`{"timestamp":"2024-05-01T12:00:00Z","context":{},"userId":"u","type":"delete","version":1,"messageId":"m"}`,
			`{"type":"delete","userId":"u","timestamp":"2024-05-01T12:00:00.000Z"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Body(parse(t, tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBodyErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no type", `{"userId":"u","timestamp":"2024-05-01T12:00:00Z"}`, "type is required (a string)"},
		{"unknown type", `{"type":"merge","timestamp":"2024-05-01T12:00:00Z"}`, `type "merge" is not one of page, screen, identify, track, alias, group, delete`},
		{"no timestamp", `{"type":"track","event":"E"}`, "timestamp is required"},
		{"bad timestamp", `{"type":"track","timestamp":"yesterday"}`, `timestamp "yesterday" is not a timestamp (want RFC 3339, a date, or Unix seconds/milliseconds)`},
		{"delete without userId", `{"type":"delete","anonymousId":"a","timestamp":"2024-05-01T12:00:00Z"}`, "userId is required for delete"},
		{"alias without previousId", `{"type":"alias","userId":"u","timestamp":"2024-05-01T12:00:00Z"}`, "previousId is required for alias"},
		{"alias with numeric userId", `{"type":"alias","userId":1,"previousId":"p","timestamp":"2024-05-01T12:00:00Z"}`, "userId is required for alias"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Body(parse(t, tt.in))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("errors.Is(%v, ErrInvalidMessage) = false", err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkBody(b *testing.B) {
	in, err := os.ReadFile(filepath.Join("testdata", "collected", "track.json"))
	if err != nil {
		b.Fatal(err)
	}
	msg := parse(b, string(bytes.TrimSpace(in)))
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if buf, err = AppendBody(buf[:0], msg); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSampleBodies(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 123_000_000, time.UTC)
	for _, typ := range Types {
		t.Run(string(typ), func(t *testing.T) {
			msg, err := Sample(typ, at, "00000000-0000-4000-8000-000000000042")
			if err != nil {
				t.Fatal(err)
			}
			got, err := Body(msg)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("sample", string(typ)+".json"), append(got, '\n'))
		})
	}
}

func TestSampleFromDevices(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 123_000_000, time.UTC)
	for _, from := range SampleSources {
		for _, typ := range Types {
			msg, err := SampleFrom(from, typ, at, "00000000-0000-4000-8000-000000000042")
			if err != nil {
				t.Fatalf("%s %s: %v", from, typ, err)
			}
			body, err := Body(msg)
			if err != nil {
				t.Fatalf("%s %s: %v", from, typ, err)
			}
			if from == "server" || typ == TypeDelete {
				server, _ := Sample(typ, at, "00000000-0000-4000-8000-000000000042")
				if want, _ := Body(server); !bytes.Equal(body, want) {
					t.Errorf("%s %s: %s, want the sample %s", from, typ, body, want)
				}
				continue
			}
			var got struct {
				Timestamp, OriginalTimestamp, AnonymousID string
				Context                                   struct {
					IP      string
					Library struct{ Name string }
				}
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			lib := map[string]string{"web": "analytics.js", "mobile": "analytics-kotlin"}[from]
			if got.Context.Library.Name != lib || got.Context.IP == "" || got.AnonymousID == "" ||
				got.Timestamp != "2024-05-01T12:00:00.123Z" || got.OriginalTimestamp != "2024-05-01T12:00:02.540Z" {
				t.Errorf("%s %s: %s", from, typ, body)
			}
		}
	}
	if _, err := SampleFrom("desktop", "track", at, "m"); err == nil || !strings.Contains(err.Error(), `"desktop"`) {
		t.Errorf("unknown source: %v", err)
	}
}
