package serve_test

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/serve"
)

// /metrics, /healthz and the admin API answer only a Host that names
// serve: its address, localhost, an IP address or a name in
// allowed_hosts (issue 29, finding 4: a DNS-rebinding page read metrics).
// The collection API answers any Host: clients reach it by name.
func TestHostChecks(t *testing.T) {
	t.Parallel()
	cfg := serve.Config{
		Addr:         "127.0.0.1:0",
		Store:        "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		AdminToken:   strongToken,
		AllowedHosts: []string{"evfwd.internal"},
		Sources:      []serve.Source{{Name: "web", WriteKey: "wk_web"}},
	}
	h := run(t, cfg, serve.Options{})
	u, _ := url.Parse(h.url)
	port := u.Port()
	do := func(method, path, host, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+strongToken)
		if body != "" {
			req.SetBasicAuth("wk_web", "")
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	guarded := []struct{ method, path string }{
		{"GET", "/metrics"}, {"GET", "/healthz"}, {"GET", "/admin/v1/deletions/1"}, {"POST", "/admin/v1/deletions"},
	}
	for _, host := range []string{"evil.test:" + port, "evil.test", "localhost.evil.test:" + port, "evfwd.internal.evil.test", "localhost:1"} {
		for _, g := range guarded {
			code, body := do(g.method, g.path, host, "")
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "allowed_hosts") {
				t.Errorf("%s %s with Host %s: %d %s, want 421", g.method, g.path, host, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port, "10.1.2.3:" + port, "evfwd.internal", "evfwd.internal:443"} {
		for _, p := range []string{"/metrics", "/healthz"} {
			if code, body := do("GET", p, host, ""); code != 200 {
				t.Errorf("GET %s with Host %s: %d %.200s", p, host, code, body)
			}
		}
		// Past the Host check: the admin API's own answer.
		if code, body := do("GET", "/admin/v1/deletions/1", host, ""); code == http.StatusMisdirectedRequest {
			t.Errorf("admin API with Host %s: %d %s", host, code, body)
		}
	}
	// The collection API answers any Host.
	if code, body := do("POST", "/v1/track", "evil.test:"+port, `{"userId":"u","event":"E"}`); code != 200 {
		t.Errorf("collection API with another Host: %d %s", code, body)
	}
}

func TestAllowedHostsValidated(t *testing.T) {
	t.Parallel()
	cfg := serve.Config{Sources: []serve.Source{{Name: "web", WriteKey: "wk_web"}}, AdminToken: strongToken,
		AllowedHosts: []string{"https://evfwd.internal", "evfwd.internal:8787", "10.0.0.1", "", "ok.internal"}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("valid")
	}
	for _, want := range []string{`allowed_hosts "https://evfwd.internal": a host name, not a URL`, `allowed_hosts "evfwd.internal:8787": a host name without a port`,
		`allowed_hosts "10.0.0.1": IP addresses are allowed already`, `allowed_hosts "": empty`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "ok.internal") {
		t.Errorf("a good name refused: %v", err)
	}
}
