package cmd

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Credentials in endpoint URLs never show in `serve --check` (text or
// JSON) or in the errors about a URL (issue 29, finding 3).
func TestServeCheckHidesURLCredentials(t *testing.T) {
	const sentinel = "SENTINEL9c1"
	cfg := writeFile(t, "evfwd.yaml", `sources:
  - name: web
    write_key: wk_web_0123456789
    webhooks:
      enabled: true
      endpoints:
        - url: https://hooks.example/in?token=`+sentinel+`&v=1
        - url: https://hooks.example/b/?`+sentinel+`
          name: billing
`)
	env := map[string]string{"XDG_STATE_HOME": t.TempDir()}
	for _, args := range [][]string{{"--check"}, {"--check", "-o", "json"}} {
		res := execute(t, testFactory(t, "", false, env), append([]string{"serve", "--config", cfg, "--store", filepath.Join(t.TempDir(), "evfwd.db")}, args...)...)
		if res.Code != 0 {
			t.Fatalf("%v: code %d: %s", args, res.Code, res.Stderr)
		}
		if strings.Contains(res.Stdout+res.Stderr, sentinel) {
			t.Errorf("%v shows the URL's token:\n%s%s", args, res.Stdout, res.Stderr)
		}
		if !strings.Contains(res.Stdout, "https://hooks.example/in?token=****") || !strings.Contains(res.Stdout, "billing") {
			t.Errorf("%v does not name the endpoints:\n%s", args, res.Stdout)
		}
	}

	bad := writeFile(t, "bad.yaml", `sources:
  - name: web
    write_key: wk_web_0123456789
    webhooks:
      enabled: true
      endpoints:
        - url: https://user:`+sentinel+`@hooks.example/in
        - url: https://user:`+sentinel+`/in
        - url: ftp://hooks.example/in?token=`+sentinel+`
`)
	res := execute(t, testFactory(t, "", false, env), "serve", "--check", "--config", bad)
	if res.Code != 2 || strings.Contains(res.Stdout+res.Stderr, sentinel) || !strings.Contains(res.Stderr, "credentials in the URL") {
		t.Errorf("bad URLs: code %d, stderr:\n%s", res.Code, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "serve", "--check", "--forward-to", "https://user:"+sentinel+"@hooks.example/in")
	if res.Code != 2 || strings.Contains(res.Stdout+res.Stderr, sentinel) || !strings.Contains(res.Stderr, "--forward-to https://****@hooks.example/in") {
		t.Errorf("--forward-to: code %d, stderr:\n%s", res.Code, res.Stderr)
	}
}

// A weak admin token is exit 2 naming the rule, from the file or the
// environment, --check too (issue 29, finding 6).
func TestServeWeakAdminToken(t *testing.T) {
	for _, tc := range []struct {
		name, file, env, want string
	}{
		{"one character", `admin_token: "a"`, "", "admin_token: 1 characters, at least 16 are required"},
		{"spaces", `admin_token: "   "`, "", "admin_token: only whitespace"},
		{"env", "", "short", "admin_token: 5 characters, at least 16 are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, "evfwd.yaml", tc.file+"\nsources:\n  - name: web\n    write_key: wk\n")
			env := map[string]string{"XDG_STATE_HOME": t.TempDir()}
			if tc.env != "" {
				env["EVFWD_ADMIN_TOKEN"] = tc.env
			}
			for _, args := range [][]string{{"--check"}, {"--addr", "127.0.0.1:0"}} {
				res := execute(t, testFactory(t, "", false, env), append([]string{"serve", "--config", cfg, "--store", filepath.Join(t.TempDir(), "evfwd.db")}, args...)...)
				if res.Code != 2 || !strings.Contains(res.Stderr, tc.want) {
					t.Errorf("%v: code %d, stderr %q; want 2 and %q", args, res.Code, res.Stderr, tc.want)
				}
			}
		})
	}
}

// Dev mode (no config file) with --ui and no token: serve generates one,
// keeps it in the state dir (0600) and says where, never printing it.
func TestServeDevUIGeneratesToken(t *testing.T) {
	state := t.TempDir()
	env := map[string]string{"XDG_STATE_HOME": state}
	f := testFactory(t, "", false, env)
	uiURL := make(chan string, 1)
	_, stop := runServe(t, f, func(o *ServeOptions) { o.uiReady = func(u string) { uiURL <- u } },
		"--addr", "127.0.0.1:0", "--ui", "--ui-addr", "127.0.0.1:0", "--store", filepath.Join(t.TempDir(), "evfwd.db"))
	ui := <-uiURL
	path := filepath.Join(state, "evfwd", "dev-admin-token")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) {
		t.Errorf("token %q: want the hex of 32 random bytes", token)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %o, want 600", fi.Mode().Perm())
	}
	req, _ := http.NewRequest("GET", ui+"api/session", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var session struct{ Auth bool }
	if json.Unmarshal(body, &session); !session.Auth {
		t.Errorf("the generated token does not open the inspector: %d %s", resp.StatusCode, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stderr := f.IO.ErrOut.(interface{ String() string }).String()
	if strings.Contains(stderr, token) || !strings.Contains(stderr, path) {
		t.Errorf("stderr shows the token, or not where it is:\n%s", stderr)
	}

	// A second run logs in with the same token.
	f2 := testFactory(t, "", false, env)
	res := execute(t, f2, "serve", "--check", "--ui")
	if res.Code != 0 {
		t.Fatalf("--check: %d %s", res.Code, res.Stderr)
	}
	if b2, _ := os.ReadFile(path); string(b2) != string(b) {
		t.Errorf("the token changed: %q, then %q", b, b2)
	}
}

// Endpoints on link-local addresses and cloud metadata services are exit
// 2 naming the source, the endpoint and the setting, for serve and --check
// alike, unless allow_private_endpoints is true; loopback and private
// addresses start (issue 43, row 7).
func TestServeRefusesLinkLocalEndpoints(t *testing.T) {
	const sources = `sources:
  - name: web
    write_key: wk_web_0123456789
    webhooks:
      enabled: true
      endpoints:
        - url: http://127.0.0.1:8788/
        - url: http://169.254.169.254/latest/meta-data/
        - url: http://10.1.2.3/hook
`
	env := map[string]string{"XDG_STATE_HOME": t.TempDir()}
	bad := writeFile(t, "evfwd.yaml", sources)
	const want = `source "web": webhooks: endpoints[1] (http://169.254.169.254/latest/meta-data/): 169.254.169.254 is link-local (169.254.0.0/16, where cloud metadata services answer): refused unless allow_private_endpoints is true`
	for _, args := range [][]string{{"--check"}, {"--addr", "127.0.0.1:0"}} {
		res := execute(t, testFactory(t, "", false, env), append([]string{"serve", "--config", bad, "--store", filepath.Join(t.TempDir(), "evfwd.db")}, args...)...)
		if res.Code != 2 || !strings.Contains(res.Stderr, want) || strings.Contains(res.Stderr, "127.0.0.1:8788") || strings.Contains(res.Stderr, "10.1.2.3") {
			t.Errorf("%v: code %d, stderr %q; want 2 and %q alone", args, res.Code, res.Stderr, want)
		}
	}
	res := execute(t, testFactory(t, "", false, env), "serve", "--check", "--forward-to", "http://metadata.google.internal/computeMetadata/v1/")
	if want := "--forward-to http://metadata.google.internal/computeMetadata/v1/: metadata.google.internal is Google Cloud's metadata server: refused unless allow_private_endpoints is true"; res.Code != 2 || !strings.Contains(res.Stderr, want) {
		t.Errorf("--forward-to: code %d, stderr %q; want 2 and %q", res.Code, res.Stderr, want)
	}
	allowed := writeFile(t, "allowed.yaml", "allow_private_endpoints: true\n"+sources)
	for _, args := range [][]string{{"--check"}, {"--check", "-o", "json"}} {
		res := execute(t, testFactory(t, "", false, env), append([]string{"serve", "--config", allowed}, args...)...)
		if res.Code != 0 || !(strings.Contains(res.Stdout, "endpoints  link-local and cloud metadata addresses allowed (allow_private_endpoints)") ||
			strings.Contains(res.Stdout, `"allowPrivateEndpoints":true`)) {
			t.Errorf("%v allowed: code %d, stdout %q, stderr %q", args, res.Code, res.Stdout, res.Stderr)
		}
	}
}
