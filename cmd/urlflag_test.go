package cmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestURLFlagsWithoutScheme: every URL flag a user types says what to add
// when the scheme is missing (cli.CheckURLScheme), exit 2, before any
// connection is tried.
func TestURLFlagsWithoutScheme(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"trigger", "track", "--url", "127.0.0.1:9100/x"}, "--url 127.0.0.1:9100/x: no scheme; did you mean http://127.0.0.1:9100/x?"},
		{[]string{"track", "--write-key", "k", "--user-id", "u", "--event", "E", "--endpoint", "127.0.0.1:9100"}, "--endpoint 127.0.0.1:9100: no scheme; did you mean http://127.0.0.1:9100?"},
		{[]string{"send", "--write-key", "k", "--endpoint", "localhost:8080", "-"}, "--endpoint localhost:8080: no scheme; did you mean http://localhost:8080?"},
		{[]string{"delete", "--user-id", "u", "--admin-token", "t", "--endpoint", "evfwd.example.com"}, "--endpoint evfwd.example.com: no scheme; did you mean https://evfwd.example.com?"},
		{[]string{"listen", "--forward-to", "localhost:3000/hooks"}, "--forward-to localhost:3000/hooks: no scheme; did you mean http://localhost:3000/hooks?"},
		{[]string{"serve", "--check", "--forward-to", "127.0.0.1:8788/hooks"}, "--forward-to 127.0.0.1:8788/hooks: no scheme; did you mean http://127.0.0.1:8788/hooks?"},
	} {
		r := execute(t, testFactory(t, "", false, nil), tt.args...)
		if diff := cmp.Diff(result{Stderr: "error: " + tt.want + "\n", Code: 2}, r); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tt.args, diff)
		}
	}
}

// TestConfigWebhookURLWithoutScheme: a webhook endpoint in serve's config
// typed without its scheme gets the same fix as a URL flag
// (webhook.MissingScheme), naming the file and the endpoint, exit 2.
func TestConfigWebhookURLWithoutScheme(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", `sources:
  - name: web
    write_key: wk_web_0123456789
    webhooks:
      enabled: true
      endpoints:
        - url: 127.0.0.1:8788/hooks
        - url: hooks.example.com/in?token=s3cret
`)
	r := execute(t, testFactory(t, "", false, nil), "serve", "--check", "--config", cfg)
	for _, want := range []string{
		`source "web": webhooks: endpoints[0] (127.0.0.1:8788/hooks): no scheme; did you mean http://127.0.0.1:8788/hooks?`,
		`source "web": webhooks: endpoints[1] (hooks.example.com/in?token=****): no scheme; did you mean https://hooks.example.com/in?token=****?`,
	} {
		if r.Code != 2 || !strings.Contains(r.Stderr, want) || strings.Contains(r.Stderr, "s3cret") {
			t.Errorf("code %d, want 2 and %q in stderr:\n%s", r.Code, want, r.Stderr)
		}
	}
}

// TestURLFromEnvOrFileWithoutScheme: a URL set by EVFWD_ENDPOINT or the
// client config file, not typed, is named as it was set (cli.MarkURLFlags).
func TestURLFromEnvOrFileWithoutScheme(t *testing.T) {
	cfg := writeFile(t, "config.yaml", "endpoint: localhost:8080\nlisten:\n  forward_to: app:3000/hooks\n")
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"track", "--write-key", "k", "--user-id", "u", "--event", "E"}, map[string]string{"EVFWD_ENDPOINT": "127.0.0.1:9100"},
			"EVFWD_ENDPOINT 127.0.0.1:9100: no scheme; did you mean http://127.0.0.1:9100?"},
		{[]string{"--config", cfg, "track", "--write-key", "k", "--user-id", "u", "--event", "E"}, nil,
			"config " + cfg + ": endpoint localhost:8080: no scheme; did you mean http://localhost:8080?"},
		{[]string{"--config", cfg, "listen"}, nil,
			"config " + cfg + ": forward_to app:3000/hooks: no scheme; did you mean http://app:3000/hooks?"},
	} {
		r := execute(t, testFactory(t, "", false, tt.env), tt.args...)
		if diff := cmp.Diff(result{Stderr: "error: " + tt.want + "\n", Code: 2}, r); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tt.args, diff)
		}
	}
}
