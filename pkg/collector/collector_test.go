package collector_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

var now = time.Date(2024, 5, 1, 12, 0, 0, 123_000_000, time.UTC)

// memStore records what it is asked to ingest and how often; err, when
// set, is returned.
type memStore struct {
	mu    sync.Mutex
	msgs  []store.Message
	calls int
	err   error
}

func (m *memStore) Ingest(_ context.Context, msgs []store.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.err != nil {
		return m.err
	}
	m.msgs = append(m.msgs, msgs...)
	return nil
}

func newHandler(t *testing.T, st *memStore) *collector.Handler {
	return newHandlerKind(t, st, collector.KindServer)
}

// newHandlerKind is newHandler with source "web" of the given kind.
func newHandlerKind(t *testing.T, st *memStore, kind collector.Kind) *collector.Handler {
	t.Helper()
	h, err := collector.New(collector.Config{
		Sources: []collector.Source{
			{Name: "web", WriteKey: "wk_web", Kind: kind, Destinations: []string{store.DestinationWebhooks}},
			{Name: "quiet", WriteKey: "wk_quiet"},
		},
		Store: st,
		Now:   func() time.Time { return now },
		NewID: func() string { return "generated-id" },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type req struct {
	path, body, key string
	gzip            bool
	header          map[string]string
}

func do(h http.Handler, r req) *httptest.ResponseRecorder {
	body := []byte(r.body)
	if r.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	hr := httptest.NewRequest(http.MethodPost, r.path, bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	if r.gzip {
		hr.Header.Set("Content-Encoding", "gzip")
	}
	if r.key != "" {
		hr.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(r.key+":")))
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, hr)
	return w
}

func TestBatchStoresCompletedMessages(t *testing.T) {
	st := &memStore{}
	h := newHandler(t, st)
	body := `{"batch":[
		{"type":"track","event":"Order Completed","userId":"u1","messageId":"m1","timestamp":"2024-05-01T11:00:00Z","properties":{"total":12345678901234567890.000000001},"context":{"ip":"1.2.3.4"}},
		{"type":"identify","anonymousId":"a1","traits":{"plan":"pro"},"integrations":{"Webhooks":false},"writeKey":"x"}
	],"sentAt":"2024-05-01T12:00:00Z","context":{"ip":"9.9.9.9","library":{"name":"x"}},"integrations":{"All":true}}`
	w := do(h, req{path: "/v1/batch", body: body, key: "wk_web"})
	if w.Code != 200 || w.Body.String() != "{\"success\":true}\n" {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
	want := []store.Message{
		{Source: "web", MessageID: "m1", Type: "track", UserID: "u1", ReceivedAt: now,
			Body: []byte(`{"type":"track","version":1,"event":"Order Completed","userId":"u1","messageId":"m1","timestamp":"2024-05-01T11:00:00.000Z","properties":{"total":12345678901234567890.000000001},"context":{"ip":"1.2.3.4","library":{"name":"x"}},"integrations":{"All":true},"receivedAt":"2024-05-01T12:00:00.123Z"}`),
			Form: store.FormWire, Destinations: []string{store.DestinationWebhooks}},
		{Source: "web", MessageID: "generated-id", Type: "identify", UserID: "a1", ReceivedAt: now,
			Form: store.FormWire,
			Body: []byte(`{"type":"identify","version":1,"anonymousId":"a1","traits":{"plan":"pro"},"integrations":{"Webhooks":false,"All":true},"context":{"ip":"9.9.9.9","library":{"name":"x"}},"messageId":"generated-id","timestamp":"2024-05-01T12:00:00.123Z","receivedAt":"2024-05-01T12:00:00.123Z"}`)},
	}
	if diff := cmp.Diff(want, st.msgs); diff != "" {
		t.Errorf("stored mismatch (-want +got):\n%s", diff)
	}
}

func TestSingleEndpointsAndBodyWriteKey(t *testing.T) {
	st := &memStore{}
	h := newHandler(t, st)
	for _, tt := range []struct{ path, body string }{
		{"/v1/track", `{"userId":"u","event":"E","writeKey":"wk_quiet"}`},
		{"/v1/identify", `{"type":"identify","userId":"u","writeKey":"wk_quiet"}`},
		{"/v1/page", `{"anonymousId":"a","name":"Home","writeKey":"wk_quiet"}`},
		{"/v1/screen", `{"anonymousId":"a","writeKey":"wk_quiet"}`},
		{"/v1/group", `{"userId":"u","groupId":"g","writeKey":"wk_quiet"}`},
		{"/v1/alias", `{"userId":"u","previousId":"p","writeKey":"wk_quiet"}`},
		{"/v1/import", `{"batch":[{"type":"track","userId":"u","event":"E"}],"writeKey":"wk_quiet"}`},
	} {
		if w := do(h, req{path: tt.path, body: tt.body}); w.Code != 200 {
			t.Errorf("%s: %d %s", tt.path, w.Code, w.Body)
		}
	}
	if len(st.msgs) != 7 {
		t.Fatalf("stored %d messages, want 7", len(st.msgs))
	}
	for _, m := range st.msgs {
		if m.Source != "quiet" || len(m.Destinations) != 0 || bytes.Contains(m.Body, []byte("writeKey")) {
			t.Errorf("message %+v", m)
		}
	}
}

func TestGzip(t *testing.T) {
	st := &memStore{}
	h := newHandler(t, st)
	w := do(h, req{path: "/v1/batch", body: `{"batch":[{"type":"track","userId":"u","event":"E"}]}`, key: "wk_web", gzip: true})
	if w.Code != 200 || len(st.msgs) != 1 {
		t.Fatalf("got %d %s, %d stored", w.Code, w.Body, len(st.msgs))
	}
}

func TestErrors(t *testing.T) {
	big := strings.Repeat("x", 40<<10)
	huge := `{"batch":[` + strings.Repeat(`{"type":"track","userId":"u","event":"`+strings.Repeat("y", 1000)+`"},`, 600) + `{}]}`
	// A gzip bomb: small on the wire, over the limit inflated.
	bomb := `{"batch":[{"type":"track","userId":"u","event":"E","p":"` + strings.Repeat("z", 600<<10) + `"}]}`
	tests := []struct {
		name   string
		r      req
		status int
		want   string
	}{
		{"no key", req{path: "/v1/batch", body: `{"batch":[{"type":"track","userId":"u","event":"E"}]}`}, 401, `{"error":"missing write key"}`},
		{"unknown basic key", req{path: "/v1/batch", body: `{}`, key: "nope"}, 401, `{"error":"unknown write key"}`},
		{"unknown body key", req{path: "/v1/batch", body: `{"batch":[{"type":"track","userId":"u","event":"E"}],"writeKey":"nope"}`}, 401, `{"error":"unknown write key"}`},
		{"bad auth scheme", req{path: "/v1/batch", body: `{}`, header: map[string]string{"Authorization": "Bearer x"}}, 401, `{"error":"unknown write key"}`},
		{"invalid JSON", req{path: "/v1/batch", body: `{"batch":[`, key: "wk_web"}, 400, ``},
		{"no batch", req{path: "/v1/batch", body: `{}`, key: "wk_web"}, 400, `{"error":"batch is required"}`},
		{"batch not array", req{path: "/v1/batch", body: `{"batch":{}}`, key: "wk_web"}, 400, `{"error":"batch must be an array"}`},
		{"invalid messages", req{path: "/v1/batch", body: `{"batch":[{"type":"track","userId":"u","event":"E"},{"type":"track","userId":"u"},3,{"type":"nope","userId":"u"}]}`, key: "wk_web"}, 400,
			`{"error":"invalid message","details":[{"index":1,"field":"event","reason":"is required"},{"index":2,"reason":"must be a JSON object"},{"index":3,"field":"type","reason":"must be one of identify, track, page, screen, group, alias (got \"nope\")"}]}`},
		{"type mismatch", req{path: "/v1/track", body: `{"type":"page","userId":"u"}`, key: "wk_web"}, 400,
			`{"error":"invalid message","details":[{"index":0,"field":"type","reason":"must be \"track\" on /v1/track"}]}`},
		{"message over the limit", req{path: "/v1/batch", body: `{"batch":[{"type":"track","userId":"u","event":"` + big + `"}]}`, key: "wk_web"}, 413, ``},
		{"single body over the limit", req{path: "/v1/track", body: `{"userId":"u","event":"` + big + `"}`, key: "wk_web"}, 413, `{"error":"body is 40985 bytes, over the 33792-byte limit"}`},
		{"batch over the limit", req{path: "/v1/batch", body: huge, key: "wk_web"}, 413, ``},
		{"gzip over the limit inflated", req{path: "/v1/batch", body: bomb, key: "wk_web", gzip: true}, 413, `{"error":"body is over the 513024-byte limit once inflated"}`},
		{"bad gzip", req{path: "/v1/batch", body: `{}`, key: "wk_web", header: map[string]string{"Content-Encoding": "gzip"}}, 400, ``},
		{"unknown encoding", req{path: "/v1/batch", body: `{}`, key: "wk_web", header: map[string]string{"Content-Encoding": "br"}}, 400, `{"error":"unsupported Content-Encoding \"br\""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &memStore{}
			w := do(newHandler(t, st), tt.r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if !json.Valid(w.Body.Bytes()) {
				t.Errorf("body is not JSON: %s", w.Body)
			}
			if tt.want != "" && strings.TrimSpace(w.Body.String()) != tt.want {
				t.Errorf("body mismatch:\nwant %s\ngot  %s", tt.want, w.Body)
			}
			if len(st.msgs) != 0 {
				t.Errorf("stored %d messages of a refused request", len(st.msgs))
			}
		})
	}
}

func TestBackPressureAndDrain(t *testing.T) {
	st := &memStore{err: store.ErrBusy}
	h := newHandler(t, st)
	body := `{"batch":[{"type":"track","userId":"u","event":"E"}]}`
	w := do(h, req{path: "/v1/batch", body: body, key: "wk_web"})
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Errorf("busy store: %d Retry-After=%q", w.Code, w.Header().Get("Retry-After"))
	}
	st.err = nil
	h.Drain()
	if w := do(h, req{path: "/v1/batch", body: body, key: "wk_web"}); w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("draining: %d, want 503", w.Code)
	}
}

// TestStoreFull: a store that cannot write for lack of space is a 503 with
// Retry-After, never a 500, and reported to OnError; nothing is stored.
func TestStoreFull(t *testing.T) {
	st := &memStore{err: fmt.Errorf("%w: store: commit: database or disk is full (13)", store.ErrFull)}
	var reported []int
	h, err := collector.New(collector.Config{
		Sources: []collector.Source{{Name: "web", WriteKey: "wk_web"}},
		Store:   st,
		OnError: func(status int, err error) { reported = append(reported, status) },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/batch", "/v1/track"} {
		body := `{"userId":"u","event":"E"}`
		if path == "/v1/batch" {
			body = `{"batch":[{"type":"track","userId":"u","event":"E"}]}`
		}
		w := do(h, req{path: path, body: body, key: "wk_web"})
		if w.Code != 503 || w.Header().Get("Retry-After") != fmt.Sprint(collector.RetryAfterFull) ||
			strings.TrimSpace(w.Body.String()) != `{"error":"store cannot write (full), retry later"}` {
			t.Errorf("%s: %d Retry-After=%q %s", path, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	}
	if len(st.msgs) != 0 || fmt.Sprint(reported) != "[503 503]" {
		t.Errorf("stored %d, reported %v", len(st.msgs), reported)
	}
}

// TestStoreUnavailable: a store that cannot be reached, or that did not
// answer within Config.IngestTimeout, is a 503 with Retry-After, never a 500, and
// reported to OnError.
func TestStoreUnavailable(t *testing.T) {
	for _, cause := range []error{
		fmt.Errorf("%w: failed to connect to `host=127.0.0.1`: connection refused", store.ErrUnavailable),
		context.DeadlineExceeded,
	} {
		var reported []int
		h, err := collector.New(collector.Config{
			Sources: []collector.Source{{Name: "web", WriteKey: "wk_web"}},
			Store:   &memStore{err: cause},
			OnError: func(status int, err error) { reported = append(reported, status) },
		})
		if err != nil {
			t.Fatal(err)
		}
		w := do(h, req{path: "/v1/track", body: `{"userId":"u","event":"E"}`, key: "wk_web"})
		if w.Code != 503 || w.Header().Get("Retry-After") != fmt.Sprint(collector.RetryAfter) ||
			strings.TrimSpace(w.Body.String()) != `{"error":"store unavailable, retry later"}` || fmt.Sprint(reported) != "[503]" {
			t.Errorf("%v: %d Retry-After=%q %s, reported %v", cause, w.Code, w.Header().Get("Retry-After"), w.Body, reported)
		}
	}
}

// FuzzHandler: whatever the body (sent as is or gzipped), the handler never
// fails (5xx), stores only valid messages, and answers 413 exactly when the
// JSON is over the endpoint's limit, never 200 then.
func FuzzHandler(f *testing.F) {
	f.Add([]byte(`{"batch":[{"type":"track","userId":"u","event":"E"}],"context":{"a":1},"integrations":{"All":false}}`), "/v1/batch", false, false)
	f.Add([]byte(`{"userId":"u","event":"E","context":null}`), "/v1/track", false, false)
	f.Add([]byte(`{"batch":[{"type":"alias","userId":"u","previousId":"p","context":{"x":[1,2]}}],"context":"s"}`), "/v1/import", false, false)
	f.Add([]byte(`{"batch":[{"type":"group","userId":"u","groupId":"g","timestamp":1714561200}]}`), "/v1/batch", false, false)
	f.Add([]byte(`{"sentAt":"2024-05-01T12:00:00.123456+00:00","batch":[]}`), "/v1/batch", true, false)
	f.Add([]byte(`{"batch": [{"type": "track", "userId": "u", "event": "\u00e9"}], "writeKey": "wk_web"}`), "/v1/batch", true, false)
	f.Add([]byte(`{"batch":[{"type":"track","userId":"u","event":"E","timestamp":"2024-05-01T13:00:00Z","context":{"ip":null}}],"sentAt":"2024-05-01T13:00:05Z"}`), "/v1/b", false, true)
	f.Add([]byte(`{"userId":"u","event":"E","timestamp":"2024-05-01","sentAt":1714561200,"originalTimestamp":"x"}`), "/v1/t", false, true)
	f.Fuzz(func(t *testing.T, body []byte, path string, gz, device bool) {
		st := &memStore{}
		kind := collector.KindServer
		if device {
			kind = collector.KindMobile
		}
		h := newHandlerKind(t, st, kind)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		sent := body
		if gz {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(body)
			zw.Close()
			sent = buf.Bytes()
		}
		hr := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(sent))
		hr.URL.Path = path
		hr.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("wk_web:")))
		if gz {
			hr.Header.Set("Content-Encoding", "gzip")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, hr)
		if w.Code >= 500 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		limit := -1
		switch strings.TrimPrefix(path, "/v1/") {
		case "batch", "import", "b":
			limit = collector.MaxBatchBytes
		case "identify", "track", "page", "screen", "group", "alias", "i", "t", "p", "s", "g", "a":
			limit = collector.MaxMessageBytes
		}
		if limit >= 0 && len(body) > limit && w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%d bytes to %s, over the %d-byte limit: %d %s", len(body), path, limit, w.Code, w.Body)
		}
		if w.Code == 200 {
			for _, m := range st.msgs {
				if !json.Valid(m.Body) || m.MessageID == "" {
					t.Fatalf("stored invalid message %q", m.Body)
				}
				var got struct{ Context struct{ IP any } }
				json.Unmarshal(m.Body, &got)
				if device && got.Context.IP == nil {
					t.Fatalf("a device's message stored without context.ip: %s", m.Body)
				}
			}
		}
	})
}

// TestInvalidUTF8BecomesReplacementChar: a userId (or any string) holding
// bytes that are not UTF-8 is stored as encoding/json decodes it, each bad
// byte a U+FFFD, in the body and in UserID alike, so a deletion request
// for that form (JSON cannot carry the raw bytes) finds the message.
func TestInvalidUTF8BecomesReplacementChar(t *testing.T) {
	st := &memStore{}
	h := newHandler(t, st)
	body := "{\"batch\":[{\"type\":\"track\",\"userId\":\"u\xff\xc3\",\"event\":\"E\xe2\x82\",\"properties\":{\"k\x80\":\"v\"}}," +
		"{\"type\":\"track\",\"anonymousId\":\"a\xed\xa0\x80\",\"event\":\"E\"}],\"context\":{\"ip\":\"\xff\"}}"
	if w := do(h, req{path: "/v1/batch", body: body, key: "wk_web"}); w.Code != 200 {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
	if len(st.msgs) != 2 {
		t.Fatalf("stored %d messages, want 2", len(st.msgs))
	}
	for i, want := range []string{"u\uFFFD\uFFFD", "a\uFFFD\uFFFD\uFFFD"} {
		m := st.msgs[i]
		if m.UserID != want {
			t.Errorf("message %d: UserID %q, want %q", i, m.UserID, want)
		}
		var decoded map[string]any
		if err := json.Unmarshal(m.Body, &decoded); err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(m.Body) || (decoded["userId"] != want && decoded["anonymousId"] != want) {
			t.Errorf("message %d: body %q", i, m.Body)
		}
		if !bytes.Contains(m.Body, []byte(`"context":{"ip":"`+"\uFFFD"+`"}`)) {
			t.Errorf("message %d: the batch context was not made valid: %s", i, m.Body)
		}
	}
	// A deletion request is JSON, decoded by encoding/json: its userId is
	// the stored one.
	var dr struct{ UserID string }
	if err := json.Unmarshal([]byte("{\"userId\":\"u\xff\xc3\"}"), &dr); err != nil || dr.UserID != st.msgs[0].UserID {
		t.Errorf("deletion request decodes to %q, %v; stored %q", dr.UserID, err, st.msgs[0].UserID)
	}
}
