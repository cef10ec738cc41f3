package cmd

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/internal/tlscert/tlscerttest"
)

// TestHealthcheckAsksServe runs a real serve and asks it the way the
// container image does: from the same environment, an address on every
// interface asked on loopback.
func TestHealthcheckAsksServe(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")
	env := map[string]string{"EVFWD_STORE": "sqlite://" + filepath.Join(t.TempDir(), "e.db"), "EVFWD_ADDR": "127.0.0.1:0"}
	base, _ := runServe(t, testFactory(t, "", false, env), nil, "--config", cfg)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"EVFWD_ADDR": "0.0.0.0:" + u.Port()}
	for _, tt := range []struct {
		args []string
		out  string
	}{
		{[]string{"healthcheck"}, "200 {\"status\":\"ok\"}\n"},
		{[]string{"healthcheck", "--url", "/livez"}, "200 {\"status\":\"ok\"}\n"},
		{[]string{"healthcheck", "--url", base + "/healthz", "-o", "json"},
			`{"body":"{\"status\":\"ok\"}","status":200,"url":"` + base + `/healthz"}` + "\n"},
	} {
		res := execute(t, testFactory(t, "", false, env), append(tt.args, "--config", "")...)
		if res.Code != 0 || res.Stdout != tt.out || res.Stderr != "" {
			t.Errorf("%v: code %d, stdout %q, stderr %q; want 0, %q", tt.args, res.Code, res.Stdout, res.Stderr, tt.out)
		}
	}
}

func TestHealthcheckFails(t *testing.T) {
	unready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"status":"unavailable"}` + "\n"))
	}))
	defer unready.Close()
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hung.Close()
	closed := httptest.NewServer(nil)
	closed.Close()
	for _, tt := range []struct {
		name, url, stderr string
		code              int
	}{
		{"503", unready.URL + "/readyz", `: 503 {"status":"unavailable"}`, 1},
		{"no answer", hung.URL, "context deadline exceeded", 1},
		{"refused", closed.URL, "(connection refused): is evfwd serve running", 1},
		{"no scheme", "127.0.0.1:8787/readyz", "--url", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := execute(t, testFactory(t, "", false, nil), "healthcheck", "--config", "", "--url", tt.url, "--timeout", "200ms")
			if res.Code != tt.code || res.Stdout != "" || !strings.Contains(res.Stderr, tt.stderr) {
				t.Errorf("code %d, stdout %q, stderr %q; want %d and %q", res.Code, res.Stdout, res.Stderr, tt.code, tt.stderr)
			}
		})
	}
}

// TestHealthcheckPinsServesCertificate: with serve's --tls-cert the check
// speaks HTTPS to serve's address and accepts that certificate alone.
func TestHealthcheckPinsServesCertificate(t *testing.T) {
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := ca.Files(t, 2)
	otherCert, _ := ca.Files(t, 3)
	cfg := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")
	env := map[string]string{"EVFWD_STORE": "sqlite://" + filepath.Join(t.TempDir(), "e.db"), "EVFWD_ADDR": "127.0.0.1:0",
		"EVFWD_TLS_CERT": certFile, "EVFWD_TLS_KEY": keyFile}
	base, _ := runServe(t, testFactory(t, "", false, env), nil, "--config", cfg)
	addr := strings.TrimPrefix(base, "https://")
	res := execute(t, testFactory(t, "", false, map[string]string{"EVFWD_TLS_CERT": certFile}), "healthcheck", "--config", "", "--addr", addr)
	if res.Code != 0 || res.Stdout != "200 {\"status\":\"ok\"}\n" {
		t.Errorf("serve's own certificate: code %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, nil), "healthcheck", "--config", "", "--addr", addr, "--tls-cert", otherCert)
	if res.Code != 1 || !strings.Contains(res.Stderr, "is not the one in "+otherCert) {
		t.Errorf("another certificate: code %d, stderr %q", res.Code, res.Stderr)
	}
}
