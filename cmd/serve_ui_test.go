package cmd

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// --ui needs the admin token and a HOST:PORT, and --check says where the
// inspector would be.
func TestServeUIFlags(t *testing.T) {
	minimal := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")
	token := map[string]string{"EVFWD_ADMIN_TOKEN": "adm1n-0123456789abcdef"}
	for _, tt := range []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stdout string // a part of it
		stderr string // a part of it
	}{
		{"no token", nil, []string{"--check", "--ui"}, 2, "", "--ui needs the admin token, which the page asks for: set admin_token in the config or EVFWD_ADMIN_TOKEN"},
		{"no token, serving", nil, []string{"--ui", "--addr", "127.0.0.1:0"}, 2, "", "set admin_token in the config or EVFWD_ADMIN_TOKEN"},
		{"bad address", token, []string{"--check", "--ui", "--ui-addr", "8790"}, 2, "", `--ui-addr "8790": want HOST:PORT, such as 127.0.0.1:8790`},
		{"check", token, []string{"--check", "--ui"}, 0, "inspector  http://127.0.0.1:8790/ (sign in with the link serve prints at start, or the admin token)\n", ""},
		{"check, every address", token, []string{"--check", "--ui", "--ui-addr", "0.0.0.0:9000"}, 0, "inspector  http://127.0.0.1:9000/", ""},
		{"check, json", token, []string{"--check", "--ui", "-o", "json"}, 0, `"ui":{"addr":"127.0.0.1:8790","url":"http://127.0.0.1:8790/"}`, ""},
		{"check, off", token, []string{"--check"}, 0, "inspector  off (--ui serves it)\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"XDG_STATE_HOME": t.TempDir()}
			for k, v := range tt.env {
				env[k] = v
			}
			args := append([]string{"serve", "--config", minimal, "--store", filepath.Join(t.TempDir(), "evfwd.db")}, tt.args...)
			res := execute(t, testFactory(t, "", false, env), args...)
			if res.Code != tt.code || !strings.Contains(res.Stdout, tt.stdout) || !strings.Contains(res.Stderr, tt.stderr) {
				t.Errorf("code %d, want %d\nstdout %q, want it to hold %q\nstderr %q, want it to hold %q", res.Code, tt.code, res.Stdout, tt.stdout, res.Stderr, tt.stderr)
			}
		})
	}
}

// serve --ui serves the inspector beside the API, and logs where.
func TestServeUIServes(t *testing.T) {
	env := map[string]string{"EVFWD_ADMIN_TOKEN": "adm1n-0123456789abcdef", "XDG_STATE_HOME": t.TempDir()}
	f := testFactory(t, "", false, env)
	uiURL := make(chan string, 1)
	url, stop := runServe(t, f, func(o *ServeOptions) { o.uiReady = func(u string) { uiURL <- u } },
		"--addr", "127.0.0.1:0", "--ui", "--ui-addr", "127.0.0.1:0", "--store", filepath.Join(t.TempDir(), "evfwd.db"))
	ui := <-uiURL
	if !strings.HasPrefix(ui, "http://127.0.0.1:") || !strings.HasSuffix(ui, "/") || ui == url+"/" {
		t.Fatalf("inspector URL %q (serve's %q)", ui, url)
	}
	get := func(token string) map[string]any {
		req, _ := http.NewRequest("GET", ui+"api/session", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); resp.StatusCode != 200 || err != nil {
			t.Fatalf("GET /api/session: %d %s", resp.StatusCode, b)
		}
		return v
	}
	if s := get(""); s["mode"] != "serve" || s["auth"] != false {
		t.Errorf("session without the token: %v", s)
	}
	s := get("adm1n-0123456789abcdef")
	if serve, _ := s["serve"].(map[string]any); s["auth"] != true || serve["url"] != url {
		t.Errorf("session with the token: %v", s)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if errOut := f.IO.ErrOut.(interface{ String() string }).String(); !strings.Contains(errOut, `msg="inspector on `+ui+`"`) {
		t.Errorf("stderr does not say where the inspector is:\n%s", errOut)
	}
}
