package serve_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/tlscert/tlscerttest"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// logBuffer is a log destination that tests may read while the service
// writes to it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tlsService is a service speaking TLS with the pair in its certFile and
// keyFile, which tests may overwrite.
type tlsService struct {
	*harness
	ca                *tlscerttest.CA
	certFile, keyFile string
	log               *logBuffer
}

// startTLS runs a service on a certificate with serial 1 from a CA of the
// test's own; source "web" (write key wk_web) sends webhooks to urls.
func startTLS(t *testing.T, urls ...string) *tlsService {
	t.Helper()
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := ca.Files(t, 1)
	var eps []webhook.Endpoint
	for _, u := range urls {
		eps = append(eps, webhook.Endpoint{URL: u})
	}
	cfg := serve.Config{
		Addr:    "127.0.0.1:0",
		Store:   "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: len(eps) > 0, Destination: webhook.Destination{SharedSecret: secret, Endpoints: eps}}}},
		TLSCert: certFile, TLSKey: keyFile,
	}
	log := &logBuffer{}
	h := run(t, cfg, serve.Options{Logger: slog.New(slog.NewTextHandler(log, nil)), Poll: 5 * time.Millisecond})
	return &tlsService{harness: h, ca: ca, certFile: certFile, keyFile: keyFile, log: log}
}

// client trusts the test's CA only, as a Segment library pointed at the
// service with that CA would; h2 offers HTTP/2.
func (s *tlsService) client(h2 bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: s.ca.Pool},
		ForceAttemptHTTP2: h2,
	}}
}

// batch posts a Segment batch as the libraries do (Basic auth with the
// write key, JSON) and returns the response, its body read.
func batch(t *testing.T, c *http.Client, url string, ctx context.Context) (*http.Response, string) {
	t.Helper()
	body := `{"batch":[{"type":"track","userId":"u_42","event":"Order Completed","messageId":"m-` + t.Name() + `","timestamp":"2024-05-01T12:00:00.123456+00:00","context":{"library":{"name":"analytics-ruby","version":"2.4.0"}}}],"sentAt":"2024-05-01T12:00:01.000000+00:00"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/batch", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("wk_web:")))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// serial is the serial of the certificate the service showed.
func serial(resp *http.Response) *big.Int {
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return nil
	}
	return resp.TLS.PeerCertificates[0].SerialNumber
}

func TestTLSBatchFromSegmentStyleClient(t *testing.T) {
	t.Parallel()
	hk := newHook(t)
	s := startTLS(t, hk.URL)
	if !strings.HasPrefix(s.url, "https://127.0.0.1:") {
		t.Fatalf("URL %s, want https://127.0.0.1:PORT", s.url)
	}
	for _, tt := range []struct {
		name  string
		h2    bool
		proto string
	}{{"HTTP/1.1", false, "HTTP/1.1"}, {"HTTP/2", true, "HTTP/2.0"}} {
		t.Run(tt.name, func(t *testing.T) {
			c := s.client(tt.h2)
			defer c.CloseIdleConnections()
			resp, body := batch(t, c, s.url, context.Background())
			if resp.StatusCode != 200 || body != `{"success":true}`+"\n" && body != `{"success":true}` {
				t.Errorf("status %d body %q, want 200 {\"success\":true}", resp.StatusCode, body)
			}
			if resp.Proto != tt.proto {
				t.Errorf("protocol %s, want %s", resp.Proto, tt.proto)
			}
			if resp.TLS.Version < tls.VersionTLS12 {
				t.Errorf("TLS version %x", resp.TLS.Version)
			}
		})
	}
	// Both messages went on as signed webhooks.
	waitFor(t, "two webhooks", func() bool { return len(hk.Requests()) == 2 })
	for _, r := range hk.Requests() {
		if r.Header.Get("X-Signature") != sign(r.Body) {
			t.Errorf("webhook %s: signature %q", r.Body, r.Header.Get("X-Signature"))
		}
	}
	// Plain HTTP on the TLS port is not served.
	resp, err := http.Post("http://"+strings.TrimPrefix(s.url, "https://")+"/v1/batch", "application/json", strings.NewReader(`{"batch":[]}`))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP: status %d, want 400", resp.StatusCode)
		}
	}
	if log := s.log.String(); !strings.Contains(log, `msg=serving`) || !strings.Contains(log, "url="+s.url) ||
		!strings.Contains(log, `msg="tls certificate" subject="CN=evfwd test 1" serial=1 not_after=`) {
		t.Errorf("log does not show the https URL and the certificate:\n%s", log)
	}
}

func TestTLSRefusesTLS11(t *testing.T) {
	t.Parallel()
	s := startTLS(t)
	addr := strings.TrimPrefix(s.url, "https://")
	for _, tt := range []struct {
		name     string
		max      uint16
		wantFail bool
	}{{"TLS 1.0", tls.VersionTLS10, true}, {"TLS 1.1", tls.VersionTLS11, true}, {"TLS 1.2", tls.VersionTLS12, false}, {"TLS 1.3", tls.VersionTLS13, false}} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: s.ca.Pool, MinVersion: tls.VersionTLS10, MaxVersion: tt.max})
			if err == nil {
				conn.Close()
			}
			if tt.wantFail != (err != nil) {
				t.Errorf("handshake error %v, want one: %v", err, tt.wantFail)
			}
		})
	}
}

func TestTLSReloadKeepsOpenConnections(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			s := startTLS(t)
			old := s.client(h2)
			defer old.CloseIdleConnections()
			resp, _ := batch(t, old, s.url, context.Background())
			if resp.StatusCode != 200 || serial(resp).Int64() != 1 {
				t.Fatalf("before the reload: status %d, serial %v", resp.StatusCode, serial(resp))
			}

			s.ca.Issue(t, 2).Write(t, s.certFile, s.keyFile)
			if err := s.srv.ReloadTLS(); err != nil {
				t.Fatalf("ReloadTLS: %v", err)
			}

			// The connection opened before the reload carries on.
			reused := false
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
			})
			resp, body := batch(t, old, s.url, ctx)
			if resp.StatusCode != 200 || !reused || serial(resp).Int64() != 1 {
				t.Errorf("after the reload, on the open connection: status %d %q, reused %v, serial %v; want 200 on the same connection (serial 1)",
					resp.StatusCode, body, reused, serial(resp))
			}
			// A new connection gets the new certificate.
			fresh := s.client(h2)
			defer fresh.CloseIdleConnections()
			resp, _ = batch(t, fresh, s.url, context.Background())
			if resp.StatusCode != 200 || serial(resp).Int64() != 2 {
				t.Errorf("a new connection: status %d, serial %v, want 200 with serial 2", resp.StatusCode, serial(resp))
			}
			if log := s.log.String(); !strings.Contains(log, `msg="tls certificate reloaded" subject="CN=evfwd test 2" serial=2 not_after=`) {
				t.Errorf("log does not show the new certificate:\n%s", log)
			}
		})
	}
}

func TestTLSBadReloadKeepsOldCert(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		spoil func(t *testing.T, s *tlsService)
		want  string // the error, with {cert} and {key} for the files
	}{
		{"key of another certificate", func(t *testing.T, s *tlsService) {
			other := s.ca.Issue(t, 3)
			other.Cert = s.ca.Issue(t, 2).Cert
			other.Write(t, s.certFile, s.keyFile)
		}, "key {key} (for certificate {cert}): private key does not match public key"},
		{"certificate missing", func(t *testing.T, s *tlsService) {
			os.Remove(s.certFile)
		}, "certificate: open {cert}: no such file or directory"},
		{"key unreadable", func(t *testing.T, s *tlsService) {
			os.Remove(s.keyFile)
			os.Mkdir(s.keyFile, 0o700)
		}, "key: read {key}: is a directory"},
		{"certificate not PEM", func(t *testing.T, s *tlsService) {
			os.WriteFile(s.certFile, []byte("not a certificate\n"), 0o644)
		}, "certificate {cert}: no PEM CERTIFICATE block"},
		{"key not PEM", func(t *testing.T, s *tlsService) {
			s.ca.Issue(t, 2).Write(t, s.certFile, s.keyFile)
			os.WriteFile(s.keyFile, []byte("not a key\n"), 0o600)
		}, "key {key} (for certificate {cert}): failed to find any PEM data in key input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startTLS(t)
			tt.spoil(t, s)
			err := s.srv.ReloadTLS()
			want := strings.NewReplacer("{cert}", s.certFile, "{key}", s.keyFile).Replace(tt.want)
			if err == nil || err.Error() != want {
				t.Errorf("ReloadTLS: %v, want %s", err, want)
			}
			c := s.client(false)
			defer c.CloseIdleConnections()
			if resp, _ := batch(t, c, s.url, context.Background()); resp.StatusCode != 200 || serial(resp).Int64() != 1 {
				t.Errorf("after a failed reload: status %d serial %v, want 200 with the old certificate (serial 1)", resp.StatusCode, serial(resp))
			}
			if log := s.log.String(); !strings.Contains(log, `level=ERROR msg="tls certificate reload failed; keeping the one in use"`) ||
				!strings.Contains(log, `subject="CN=evfwd test 1" serial=1`) {
				t.Errorf("log does not show the failure and the certificate kept:\n%s", log)
			}
		})
	}
}

func TestTLSConfig(t *testing.T) {
	t.Parallel()
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := ca.Files(t, 1)
	_, otherKey := ca.Files(t, 2)
	tests := []struct {
		name      string
		cert, key string
		want      string // in the error; "" for none
	}{
		{"off", "", "", ""},
		{"a good pair", certFile, keyFile, ""},
		{"cert without key", certFile, "", "tls_cert is set without tls_key: give both or neither"},
		{"key without cert", "", keyFile, "tls_key is set without tls_cert: give both or neither"},
		{"mismatched pair", certFile, otherKey, "tls: key " + otherKey + " (for certificate " + certFile + "): private key does not match public key"},
		{"no such file", filepath.Join(t.TempDir(), "nope.pem"), keyFile, "nope.pem: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serve.Config{
				Store:   "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
				Sources: []serve.Source{{Name: "web", WriteKey: "wk_web"}},
				TLSCert: tt.cert, TLSKey: tt.key,
			}
			err := cfg.Check()
			if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: %v, want %q", err, tt.want)
			}
			if tt.want == "" {
				return
			}
			// New refuses it too, before it opens the store.
			_, err = serve.New(context.Background(), cfg, serve.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want %q", err, tt.want)
			}
			if _, serr := os.Stat(strings.TrimPrefix(cfg.Store, "sqlite://")); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("New opened the store: %v", serr)
			}
		})
	}
	// Without TLS there is nothing to reload.
	s := run(t, serve.Config{Addr: "127.0.0.1:0", Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"), Sources: []serve.Source{{Name: "web", WriteKey: "wk_web"}}}, serve.Options{})
	if err := s.srv.ReloadTLS(); !errors.Is(err, serve.ErrTLSOff) {
		t.Errorf("ReloadTLS without TLS: %v, want ErrTLSOff", err)
	}
	if !strings.HasPrefix(s.url, "http://") {
		t.Errorf("URL %s, want http://", s.url)
	}
}
