package receiver

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/evfwd/evfwd/pkg/signature"
)

func TestRecordKeepsRawBody(t *testing.T) {
	bodies := []string{
		trackBody,
		"{\n  \"type\": \"delete\",\n  \"userId\": \"u\"\n}\n", // pretty, newline
		"not json at all",
		"\xff\xfe binary",
		"",
		`"just a string"`,
		" 1 ",
		"\t{\"a\": 1, \"b\" : [ 2 ]} ",
		`{"a": 1, "b" : [ 2 ]}`,
		`{"html":"<b>&</b>","n":12345678901234567890.000000001}`,
	}
	var file bytes.Buffer
	s := serve(t, Options{Secrets: [][]byte{secret}, Record: &file})
	for _, b := range bodies {
		s.post(t, "/hooks?x=1", b, signature.Sign(secret, []byte(b)))
	}
	s.Close()
	if err := s.h.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for rec, err := range ReadRecords(&file) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(rec.RawBody()))
		if err := signature.Verify(secret, rec.RawBody(), rec.Header(signature.Header)); err != nil {
			t.Errorf("line %d: re-verify: %v", rec.Line, err)
		}
		if rec.Query != "x=1" || rec.Path != "/hooks" || rec.Status != 200 {
			t.Errorf("line %d: %+v", rec.Line, rec)
		}
	}
	if diff := cmp.Diff(bodies, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestRequestJSON(t *testing.T) {
	r := &Request{
		ReceivedAt: time.Date(2024, 5, 1, 12, 0, 5, 123e6, time.UTC),
		Method:     "POST", Path: "/hooks",
		Header: map[string][]string{"X-Signature": {"ab"}, "Content-Type": {"application/json"}},
		Body:   []byte(`{"a":1}`),
		Size:   7,
		Type:   "track", Event: "E", UserID: "u",
		Signature: Signature{Verdict: SigInvalid, Scheme: "segment", Reason: "mismatch", Secret: 2, Message: "signature does not match"},
		Shape:     Shape{Reason: "missing version"},
		Replay:    true,
		Status:    401, Latency: 1234 * time.Microsecond,
	}
	want := `{"receivedAt":"2024-05-01T12:00:05.123Z","method":"POST","path":"/hooks","headers":{"Content-Type":"application/json","X-Signature":"ab"},"size":7,"type":"track","event":"E","userId":"u","signature":{"verdict":"invalid","scheme":"segment","reason":"mismatch","secret":2,"message":"signature does not match"},"shape":{"ok":false,"reason":"missing version"},"duplicate":false,"replay":true,"status":401,"latencyMs":1.234,"body":{"a":1}}` + "\n"
	if diff := cmp.Diff(want, string(r.Line())); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestReadRecordsBadLines(t *testing.T) {
	in := `{"method":"POST","path":"/","headers":{},"body":{}}
not json

{"x":1}
{"method":"GET","path":"/b","headers":{},"body":"hi","bodyRaw":"hi"}
`
	var got []string
	for rec, err := range ReadRecords(strings.NewReader(in)) {
		if err != nil {
			got = append(got, err.Error()[:6])
			continue
		}
		got = append(got, fmt.Sprintf("%d %s %s", rec.Line, rec.Path, rec.RawBody()))
	}
	want := []string{"1 / {}", "line 2", "line 4", "5 /b hi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestReadRecordsLegacyKeys: a record file written before output keys
// became camelCase reads the same as one written now.
func TestReadRecordsLegacyKeys(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 5, 123e6, time.UTC)
	r := &Request{ReceivedAt: at, Method: "POST", Path: "/hooks", Header: map[string][]string{"X-Signature": {"ab"}},
		Body: []byte("{\"a\": 1}\n"), UserID: "u", MessageID: "m", Latency: 1234 * time.Microsecond,
		Forward: &Forwarded{URL: "http://app", Status: 200, Latency: 2 * time.Millisecond}}
	current := r.Line()
	old := current
	for _, k := range [][2]string{{"receivedAt", "received_at"}, {"userId", "user_id"}, {"messageId", "message_id"},
		{"latencyMs", "latency_ms"}, {"bodyRaw", "body_raw"}} {
		old = bytes.ReplaceAll(old, []byte(`"`+k[0]+`"`), []byte(`"`+k[1]+`"`))
	}
	if bytes.Equal(old, current) {
		t.Fatal("no key was renamed")
	}
	var got []*Record
	for rec, err := range ReadRecords(bytes.NewReader(append(current, old...))) {
		if err != nil {
			t.Fatal(err)
		}
		rec.Line = 0
		got = append(got, rec)
	}
	if len(got) != 2 {
		t.Fatalf("read %d records, want 2", len(got))
	}
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Errorf("old keys read differently (-current +old):\n%s", diff)
	}
	if !got[1].ReceivedAt.Equal(at) || got[1].UserID != "u" || got[1].LatencyMS != 1.234 ||
		got[1].Forward.LatencyMS != 2 || string(got[1].RawBody()) != string(r.Body) {
		t.Errorf("old record read as %+v", got[1])
	}
}

func TestLineWriterConcurrent(t *testing.T) {
	var out bytes.Buffer
	lw := NewLineWriter(&out)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				lw.WriteLine(fmt.Appendf(nil, "%d-%d\n", g, i))
			}
		}()
	}
	wg.Wait()
	if err := lw.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(out.Bytes(), []byte("\n")); got != 4000 {
		t.Errorf("flushed %d lines, want 4000", got)
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := lw.WriteLine([]byte("late\n")); err == nil {
		t.Error("write after Close succeeded")
	}
}

// FuzzRecordRoundTrip: whatever the body, the record line reads back to
// the exact bytes, so signatures can always be re-checked.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add([]byte(trackBody), "POST", "/hooks")
	f.Add([]byte("{\n \"a\": 1\n}\n"), "PUT", "/x y")
	f.Add([]byte("\xff\x00\"<>&"), "POST", "/\u2028")
	f.Add([]byte(" {} "), "POST", "/")
	f.Fuzz(func(t *testing.T, body []byte, method, path string) {
		r := &Request{Method: method, Path: path, Body: body, Header: map[string][]string{"X-Signature": {"ab"}}}
		line := r.Line()
		if bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("record is not one line: %q", line)
		}
		n := 0
		for rec, err := range ReadRecords(bytes.NewReader(line)) {
			n++
			if method == "" {
				// A record without a method is not a request record.
				if err == nil {
					t.Fatal("read a record without a method")
				}
				continue
			}
			if err != nil {
				t.Fatalf("%v in %q", err, line)
			}
			if !bytes.Equal(rec.RawBody(), body) {
				t.Fatalf("body %q read back as %q from %q", body, rec.RawBody(), line)
			}
			if rec.Header("x-signature") != "ab" {
				t.Fatalf("header lost: %v", rec.Headers)
			}
		}
		if n != 1 {
			t.Fatalf("%d records from one line", n)
		}
	})
}
