package receiver

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/evfwd/evfwd/pkg/signature"
)

// serving is a Server that a test serves on loopback.
type serving struct {
	srv    *Server
	url    string
	stop   context.CancelFunc
	done   chan serveResult
	events []string // in the order Serve told them
}

type serveResult struct {
	stop Stop
	err  error
}

// startServer serves a Handler with opts on a Server with cfg and returns
// once it is ready (Events.Ready, not a sleep).
func startServer(t *testing.T, cfg ServerConfig, opts Options, ui UI) *serving {
	t.Helper()
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{srv: srv, stop: cancel, done: make(chan serveResult, 1)}
	ready := make(chan string, 1)
	ev := Events{
		UIServing: func(addr net.Addr) { s.events = append(s.events, "ui on "+addr.String()) },
		Listening: func(url string) { s.events = append(s.events, "listening on "+url) },
		Ready:     func(url string) { s.events = append(s.events, "ready"); ready <- url },
	}
	go func() {
		stop, err := srv.Serve(ctx, h, ui, ev)
		s.done <- serveResult{stop, err}
	}()
	select {
	case s.url = <-ready:
	case r := <-s.done:
		// Ready and then stopped (a Timeout of 1 ms on a busy machine):
		// both channels hold a value, and select takes either.
		select {
		case s.url = <-ready:
			s.done <- r // for wait
		default:
			t.Fatalf("Serve returned before it was ready: %v", r.err)
		}
	}
	t.Cleanup(func() {
		cancel()
		s.wait()
		h.Close()
	})
	return s
}

// wait returns what Serve returned.
func (s *serving) wait() serveResult {
	r := <-s.done
	s.done <- r // for the next wait
	return r
}

// fakeUI records what Serve does with a UI.
type fakeUI struct {
	mu   sync.Mutex
	seen uiSeen
}

type uiSeen struct {
	URL, Addr string
	Added     []string // the types of the reports handed over
	Closed    bool
}

func (u *fakeUI) SetURL(url string) { u.mu.Lock(); u.seen.URL = url; u.mu.Unlock() }
func (u *fakeUI) Add(r *Request) {
	u.mu.Lock()
	u.seen.Added = append(u.seen.Added, r.Type)
	u.mu.Unlock()
}
func (u *fakeUI) Close() { u.mu.Lock(); u.seen.Closed = true; u.mu.Unlock() }

func (u *fakeUI) Handler(addr string) http.Handler {
	u.mu.Lock()
	u.seen.Addr = addr
	u.mu.Unlock()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the page") })
}

func (u *fakeUI) snapshot() uiSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen
}

func TestServerStopsAtCount(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	cfg := ServerConfig{Addr: "127.0.0.1:0", ReadyFile: ready, Count: 2, CountType: "track"}
	s := startServer(t, cfg, Options{Secrets: [][]byte{secret}, Path: "/hooks"}, nil)
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") || !strings.HasSuffix(s.url, "/hooks") {
		t.Errorf("url %q, want http://127.0.0.1:PORT/hooks", s.url)
	}
	identify := `{"type":"identify","version":1,"userId":"u_7","messageId":"m2","timestamp":"2024-05-01T12:00:05.000Z"}`
	good := signature.Sign(secret, []byte(trackBody))
	sends := []struct {
		path, body, sig string
		want            int
	}{
		{"/hooks", trackBody, "", http.StatusUnauthorized},                            // refused: not counted
		{"/other", trackBody, good, http.StatusNotFound},                              // refused: not counted
		{"/hooks", identify, signature.Sign(secret, []byte(identify)), http.StatusOK}, // not a track
		{"/hooks", trackBody, good, http.StatusOK},
		{"/hooks", trackBody, good, http.StatusOK}, // a duplicate counts: it was accepted
	}
	base := strings.TrimSuffix(s.url, "/hooks")
	for _, m := range sends {
		if got := post(t, http.DefaultClient, base+m.path, m.body, m.sig); got != m.want {
			t.Errorf("POST %s: %d, want %d", m.path, got, m.want)
		}
	}
	if r := s.wait(); r.stop != StopCount || r.err != nil {
		t.Errorf("Serve returned %v, %v; want StopCount", r.stop, r.err)
	}
	if got := s.srv.Accepted(); got != 2 {
		t.Errorf("Accepted %d, want 2", got)
	}
	b, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s.url+"\n", string(b)); diff != "" {
		t.Errorf("ready file mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"listening on " + s.url, "ready"}, s.events); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
}

func TestServerServesUIUntilContextEnds(t *testing.T) {
	ui := &fakeUI{}
	s := startServer(t, ServerConfig{Addr: "127.0.0.1:0", UIAddr: "127.0.0.1:0"}, Options{}, ui)
	uiAddr := s.srv.UIAddr().String()
	resp, err := http.Get("http://" + uiAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(page) != "the page" {
		t.Errorf("the UI port answered %q, want the UI's handler", page)
	}
	if got := post(t, http.DefaultClient, s.url, trackBody, ""); got != http.StatusOK {
		t.Errorf("POST: %d, want 200", got)
	}
	s.stop()
	if r := s.wait(); r.stop != StopDone || r.err != nil {
		t.Errorf("Serve returned %v, %v; want StopDone", r.stop, r.err)
	}
	// Serve returned after Shutdown, so the handler has handed over its
	// report.
	want := uiSeen{URL: s.url, Addr: uiAddr, Added: []string{"track"}, Closed: true}
	if diff := cmp.Diff(want, ui.snapshot()); diff != "" {
		t.Errorf("UI mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ui on " + uiAddr, "listening on " + s.url, "ready"}, s.events); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
	for _, addr := range []string{uiAddr, strings.TrimPrefix(s.url, "http://")} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still open after Serve returned", addr)
		}
	}
}

func TestServerTimeout(t *testing.T) {
	s := startServer(t, ServerConfig{Addr: "127.0.0.1:0", Count: 5, Timeout: time.Millisecond}, Options{}, nil)
	if r := s.wait(); r.stop != StopTimeout || r.err != nil {
		t.Errorf("Serve returned %v, %v; want StopTimeout", r.stop, r.err)
	}
	if got := s.srv.Accepted(); got != 0 {
		t.Errorf("Accepted %d, want 0", got)
	}
}

// TestServerCutsDelayShort: a request held back by a simulated delay is
// answered once Serve stops, not after the delay, nor cut off by the
// shutdown's grace running out.
func TestServerCutsDelayShort(t *testing.T) {
	arrived := make(chan struct{})
	opts := Options{Simulate: Simulation{Delay: time.Hour, FailRate: 0.5, Rand: func() float64 {
		close(arrived) // the request reached the simulation, which delays it next
		return 0.9     // no failure
	}}}
	s := startServer(t, ServerConfig{Addr: "127.0.0.1:0"}, opts, nil)
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Post(s.url, "application/json", strings.NewReader(trackBody))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		answered <- err
	}()
	<-arrived
	s.stop()
	if err := <-answered; err != nil {
		t.Errorf("the delayed request: %v, want 200 OK", err)
	}
	if r := s.wait(); r.stop != StopDone || r.err != nil {
		t.Errorf("Serve returned %v, %v; want StopDone", r.stop, r.err)
	}
}

func TestServerTLS(t *testing.T) {
	// The pair httptest serves with, and its client that trusts it.
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	cert := ts.TLS.Certificates[0]
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)

	s := startServer(t, ServerConfig{Addr: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile}, Options{}, nil)
	if !strings.HasPrefix(s.url, "https://") {
		t.Errorf("url %q, want https", s.url)
	}
	if got := post(t, ts.Client(), s.url, trackBody, ""); got != http.StatusOK {
		t.Errorf("POST over TLS: %d, want 200", got)
	}
}

func TestServerSetupErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name    string
		cfg     ServerConfig
		setting string
		inUse   bool
	}{
		{"port in use", ServerConfig{Addr: taken.Addr().String()}, "Addr", true},
		{"ui port in use", ServerConfig{Addr: "127.0.0.1:0", UIAddr: taken.Addr().String()}, "UIAddr", true},
		{"bad address", ServerConfig{Addr: "256.0.0.1:1"}, "Addr", false},
		{"no pair", ServerConfig{Addr: "127.0.0.1:0", TLSCert: missing, TLSKey: missing}, "TLS", false},
	}
	for _, tt := range tests {
		srv, err := NewServer(tt.cfg)
		var e *SetupError
		if !errors.As(err, &e) || e.Setting != tt.setting || errors.Is(err, syscall.EADDRINUSE) != tt.inUse {
			t.Errorf("%s: %v, want a SetupError for %s (port in use: %v)", tt.name, err, tt.setting, tt.inUse)
		}
		if srv != nil {
			srv.Close()
		}
	}
}

func TestServerReadyFileError(t *testing.T) {
	h, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ready := filepath.Join(t.TempDir(), "missing", "ready")
	srv, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", ReadyFile: ready})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	readied := false
	_, err = srv.Serve(context.Background(), h, nil, Events{Ready: func(string) { readied = true }})
	var e *SetupError
	if !errors.As(err, &e) || e.Setting != "ReadyFile" || !errors.Is(err, os.ErrNotExist) || readied {
		t.Errorf("Serve: %v (ready %v), want a SetupError for ReadyFile before Ready", err, readied)
	}
}
