package cmd

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/internal/syncbuf"
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

// The one-time sign-in link goes to a terminal and never into the log
// (issue 43, row 7): to the controlling terminal whatever stderr is and
// whatever --log-format, else to stderr when it is a terminal; with
// neither, no link, and the log says to sign in with the admin token.
func TestServeSignInLinkOnTheTerminal(t *testing.T) {
	const token = "adm1n-0123456789abcdef"
	for _, tt := range []struct {
		name        string
		terminal    bool // a controlling terminal
		stderrTTY   bool
		format      string
		onTerminal  bool
		onStderr    bool
		stderrHolds string // a part of stderr
	}{
		{"json log, a terminal", true, false, "json", true, false, `"msg":"inspector: sign-in link shown on the terminal"`},
		{"text log to a file, a terminal", true, false, "text", true, false, `msg="inspector: sign-in link shown on the terminal"`},
		{"stderr a terminal, none controlling", false, true, "text", false, true, "open this link to sign in"},
		{"json log, no terminal", false, false, "json", false, false, `"msg":"inspector: sign in with the admin token (no terminal to show a one-time sign-in link on)"`},
		{"text log, no terminal", false, false, "text", false, false, `msg="inspector: sign in with the admin token (no terminal to show a one-time sign-in link on)"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := testFactory(t, "", tt.stderrTTY, map[string]string{"EVFWD_ADMIN_TOKEN": token, "XDG_STATE_HOME": t.TempDir()})
			stderr, terminal := &syncbuf.Buffer{}, &syncbuf.Buffer{}
			f.IO.ErrOut = stderr
			if tt.terminal {
				f.IO.Terminal = func() (io.WriteCloser, error) { return nopCloser{terminal}, nil }
			} else {
				f.IO.Terminal = func() (io.WriteCloser, error) { return nil, errors.New("open /dev/tty: no such device or address") }
			}
			uiURL := make(chan string, 1)
			_, stop := runServe(t, f, func(o *ServeOptions) { o.uiReady = func(u string) { uiURL <- u } },
				"--addr", "127.0.0.1:0", "--ui", "--ui-addr", "127.0.0.1:0", "--log-format", tt.format, "--store", filepath.Join(t.TempDir(), "evfwd.db"))
			ui := <-uiURL
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			// serve has stopped: nothing writes any more.
			link := func(s string) bool {
				m := signInLine.FindStringSubmatch(s)
				return m != nil && strings.HasPrefix(m[1], ui+"#signin=")
			}
			if got := link(terminal.String()); got != tt.onTerminal {
				t.Errorf("link on the terminal: %v, want %v:\n%s", got, tt.onTerminal, terminal.String())
			}
			if got := link(stderr.String()); got != tt.onStderr {
				t.Errorf("link on stderr: %v, want %v:\n%s", got, tt.onStderr, stderr.String())
			}
			if !tt.onStderr && strings.Contains(stderr.String(), "#signin=") {
				t.Errorf("a sign-in code in the log:\n%s", stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.stderrHolds) {
				t.Errorf("stderr does not hold %q:\n%s", tt.stderrHolds, stderr.String())
			}
			if tt.format == "json" {
				for _, line := range strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n") {
					if !json.Valid([]byte(line)) {
						t.Errorf("stderr is not a stream of JSON: %q", line)
					}
				}
			}
			if strings.Contains(stderr.String()+terminal.String(), token) {
				t.Error("the admin token was printed")
			}
		})
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
