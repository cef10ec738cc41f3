package cmd

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// flagsAs are the values cmd's flags would run with, the config found as
// evfwd finds it, without running the command.
func flagsAs(t *testing.T, f *cli.Factory, args []string, names ...string) map[string]string {
	t.Helper()
	root := NewRootCmd(f)
	cmd, _, err := root.Find(args)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		for _, name := range names {
			got[name] = c.Flags().Lookup(name).Value.String()
		}
		return nil
	}
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	return got
}

// After serve init in a directory, listen there keeps its own address:
// the file's addr is serve's, which listen once took, so that serve could
// not start (issue 41, row 2). listen's own settings go under listen:, and
// keys serve has no flag for stay shared; deliveries still reads serve's
// store.
func TestListenAfterServeInit(t *testing.T) {
	t.Chdir(t.TempDir())
	factory := func() *cli.Factory {
		f := testFactory(t, "", false, map[string]string{"XDG_STATE_HOME": t.TempDir()})
		f.LocalConfig = cli.LocalConfigFile
		return f
	}
	if res := execute(t, factory(), "serve", "init"); res.Code != 0 {
		t.Fatalf("init: code %d, stderr %q", res.Code, res.Stderr)
	}
	listen := func() map[string]string {
		return flagsAs(t, factory(), []string{"listen"}, "addr", "ui-addr", "forward-to", "tls-cert", "tolerance")
	}
	serveAddr := func() string {
		res := execute(t, factory(), "serve", "--check", "-o", "json")
		var got struct{ Addr string }
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &got) != nil {
			t.Fatalf("serve --check: code %d, stderr %q", res.Code, res.Stderr)
		}
		return got.Addr
	}
	want := map[string]string{"addr": defaultListenAddr, "ui-addr": defaultListenUIAddr, "forward-to": "", "tls-cert": "", "tolerance": "5m0s"}
	if diff := cmp.Diff(want, listen()); diff != "" {
		t.Errorf("listen beside serve init's file: mismatch (-want +got):\n%s", diff)
	}
	if got := serveAddr(); got != "127.0.0.1:8787" {
		t.Errorf("serve's addr %q, want the file's", got)
	}

	// serve's other keys at the top level, listen's under listen:.
	f, err := os.OpenFile(cli.LocalConfigFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("ui_addr: 127.0.0.1:18790\ntls_cert: cert.pem\ntls_key: key.pem\nstore: sqlite:///var/lib/evfwd/evfwd.db\ntolerance: 1m\nlisten:\n  addr: 127.0.0.1:19000\n")
	f.Close()
	want = map[string]string{"addr": "127.0.0.1:19000", "ui-addr": defaultListenUIAddr, "forward-to": "", "tls-cert": "", "tolerance": "1m0s"}
	if diff := cmp.Diff(want, listen()); diff != "" {
		t.Errorf("listen with a listen: section: mismatch (-want +got):\n%s", diff)
	}
	want = map[string]string{"addr": "127.0.0.1:8787", "ui-addr": "127.0.0.1:18790", "tls-cert": "cert.pem"}
	if diff := cmp.Diff(want, flagsAs(t, factory(), []string{"serve"}, "addr", "ui-addr", "tls-cert")); diff != "" {
		t.Errorf("serve, with the top-level keys: mismatch (-want +got):\n%s", diff)
	}
	if got := flagsAs(t, factory(), []string{"deliveries", "list"}, "store"); got["store"] != "sqlite:///var/lib/evfwd/evfwd.db" {
		t.Errorf("deliveries' store %q, want serve's", got["store"])
	}
}

// A port another program holds: serve and listen say which address,
// which setting chose it, which program likely holds it and what to try;
// exit 1.
func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	held := ": port in use, likely by another evfwd %s or another program; stop it, or try %s 127.0.0.1:0\n"
	serveFile := writeFile(t, "serve.yaml", "addr: "+taken+"\n")
	listenFile := writeFile(t, "listen.yaml", "tolerance: 1m\nlisten:\n  addr: "+taken+"\n")
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"serve, the file's addr", nil, []string{"serve", "--config", serveFile},
			"--addr " + taken + " set by addr (line 1 of " + serveFile + ")" + fmtHeld(held, "serve", "--addr")},
		{"serve, EVFWD_ADDR", map[string]string{"EVFWD_ADDR": taken}, []string{"serve"},
			"--addr " + taken + " set by EVFWD_ADDR" + fmtHeld(held, "serve", "--addr")},
		{"serve, --addr", nil, []string{"serve", "--addr", taken},
			"--addr " + taken + fmtHeld(held, "serve", "--addr")},
		{"serve --ui", map[string]string{"EVFWD_ADDR": "127.0.0.1:0"}, []string{"serve", "--ui", "--ui-addr", taken},
			"--ui-addr " + taken + fmtHeld(held, "serve --ui", "--ui-addr")},
		{"listen, its section", nil, []string{"listen", "--config", listenFile},
			"--addr " + taken + " set by listen.addr (line 3 of " + listenFile + ")" + fmtHeld(held, "listen", "--addr")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"XDG_STATE_HOME": t.TempDir(), "EVFWD_STORE": "sqlite://" + filepath.Join(t.TempDir(), "e.db"), "EVFWD_ADMIN_TOKEN": "0123456789abcdef0123"}
			for k, v := range tt.env {
				env[k] = v
			}
			res := execute(t, testFactory(t, "", false, env), tt.args...)
			if res.Code != cli.ExitFailure || !strings.HasSuffix(res.Stderr, "error: "+tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and the end %q", res.Code, res.Stderr, tt.want)
			}
		})
	}
}

func fmtHeld(held, program, flag string) string {
	return strings.Replace(strings.Replace(held, "%s", program, 1), "%s", flag, 1)
}

// Which program likely holds a port: the one whose default port it is.
func TestPortInUseGuess(t *testing.T) {
	given := func(flag string) string { return "--" + flag }
	byDefault := func(string) string { return "the default" }
	tests := []struct {
		self, flag, addr string
		origin           func(string) string
		want             string
	}{
		{"evfwd serve", "--addr", "127.0.0.1:8787", byDefault, "--addr 127.0.0.1:8787 (the default): port in use, likely by another evfwd serve; stop it, or try --addr 127.0.0.1:0"},
		{"evfwd listen", "--addr", "127.0.0.1:8787", given, "--addr 127.0.0.1:8787: port in use, likely by evfwd serve; stop it, or try --addr 127.0.0.1:0"},
		{"evfwd serve", "--addr", "0.0.0.0:8788", given, "--addr 0.0.0.0:8788: port in use, likely by evfwd listen; stop it, or try --addr 0.0.0.0:0"},
		{"evfwd listen --ui", "--ui-addr", "[::1]:8790", nil, "--ui-addr [::1]:8790: port in use, likely by evfwd serve --ui; stop it, or try --ui-addr [::1]:0"},
	}
	for _, tt := range tests {
		if got := portInUse(tt.self, tt.flag, tt.addr, tt.origin).Error(); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}
