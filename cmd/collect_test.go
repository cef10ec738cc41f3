package cmd

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
)

// collectServer is a test collection API: it records every /v1/batch
// request and answers with respond (200 {"success":true} by default).
type collectServer struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []collected
	respond func(n int, msgs []map[string]json.RawMessage, w http.ResponseWriter) // n counts requests from 0
}

type collected struct {
	Header http.Header
	Body   []byte
	Msgs   []map[string]json.RawMessage
	Status int
}

func newCollectServer(t *testing.T, respond func(n int, msgs []map[string]json.RawMessage, w http.ResponseWriter)) *collectServer {
	s := &collectServer{t: t, respond: respond}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b struct {
			Batch []map[string]json.RawMessage `json:"batch"`
		}
		if r.URL.Path != "/v1/batch" || json.Unmarshal(body, &b) != nil {
			t.Errorf("bad request %s %s", r.URL.Path, body)
		}
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, collected{Header: r.Header.Clone(), Body: body, Msgs: b.Batch})
		s.mu.Unlock()
		rec := &statusWriter{ResponseWriter: w, status: 200}
		if s.respond != nil {
			s.respond(n, b.Batch, rec)
		} else {
			w.Write([]byte(`{"success":true}`))
		}
		s.mu.Lock()
		s.reqs[n].Status = rec.status
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

func (s *collectServer) URL() string { return s.srv.URL }

func (s *collectServer) requests() []collected {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]collected(nil), s.reqs...)
}

// accepted returns the messages of every request answered 2xx, in order.
func (s *collectServer) accepted() []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	for _, r := range s.requests() {
		if r.Status < 300 {
			out = append(out, r.Msgs...)
		}
	}
	return out
}

func str(m map[string]json.RawMessage, k string) string {
	var s string
	json.Unmarshal(m[k], &s)
	return s
}

var fixedNow = time.Date(2024, 5, 2, 8, 30, 0, 123456789, time.UTC)

// clientFactory is testFactory with a fixed clock and the server's
// endpoint and a write key in the environment.
func clientFactory(t *testing.T, stdin string, srv *collectServer) *cli.Factory {
	env := map[string]string{"EVFWD_WRITE_KEY": "wk_test"}
	if srv != nil {
		env["EVFWD_ENDPOINT"] = srv.URL()
	}
	f := testFactory(t, stdin, false, env)
	f.Now = func() time.Time { return fixedNow }
	return f
}
