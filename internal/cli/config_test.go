package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfgPath, []byte("endpoint: http://from-file\nlisten:\n  addr: 127.0.0.1:9999\n  respond: [500, 200]\nbatch_size: 7\n"), 0o600)
	cfg, err := LoadConfig(cfgPath, true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // endpoint, addr, respond, batch-size
	}{
		{"file", nil, nil, []string{"http://from-file", "127.0.0.1:9999", "[500,200]", "7"}},
		{"env beats file", nil, map[string]string{"EVFWD_ENDPOINT": "http://from-env"}, []string{"http://from-env", "127.0.0.1:9999", "[500,200]", "7"}},
		{"flag beats env", []string{"--endpoint", "http://from-flag", "--addr", ":1"}, map[string]string{"EVFWD_ENDPOINT": "http://from-env"},
			[]string{"http://from-flag", ":1", "[500,200]", "7"}},
		{"unbound flag ignores env", nil, map[string]string{"EVFWD_ADDR": "x"}, []string{"http://from-file", "127.0.0.1:9999", "[500,200]", "7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var endpoint, addr string
			var respond []int
			var batch int
			cmd := &cobra.Command{Use: "listen", RunE: func(*cobra.Command, []string) error { return nil }}
			cmd.Flags().StringVar(&endpoint, "endpoint", "http://default", "")
			cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8788", "")
			cmd.Flags().IntSliceVar(&respond, "respond", nil, "")
			cmd.Flags().IntVar(&batch, "batch-size", 100, "")
			BindEnv(cmd, "endpoint")
			cmd.SetArgs(tt.args)
			cmd.PreRunE = func(c *cobra.Command, _ []string) error {
				return cfg.Apply(c, func(k string) string { return tt.env[k] })
			}
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			got := []string{endpoint, addr, strings.ReplaceAll(cmd.Flags().Lookup("respond").Value.String(), " ", ""), cmd.Flags().Lookup("batch-size").Value.String()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadConfig(filepath.Join(dir, "absent.yaml"), false); err != nil {
		t.Errorf("missing default file: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "absent.yaml"), true); ExitCode(err) != ExitUsage {
		t.Errorf("missing named file: %v, want a usage error", err)
	}
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte("a: 1\nb: [\n  c: d\n"), 0o600)
	_, err := LoadConfig(broken, false)
	if err == nil || !strings.HasPrefix(err.Error(), "config "+broken+": yaml: line ") || ExitCode(err) != ExitUsage {
		t.Errorf("broken file: %v, want a usage error naming file and line", err)
	}

	cfgPath := filepath.Join(dir, "bad-value.yaml")
	os.WriteFile(cfgPath, []byte("count: lots\n"), 0o600)
	cfg, _ := LoadConfig(cfgPath, false)
	cmd := &cobra.Command{Use: "listen"}
	cmd.Flags().Int("count", 0, "")
	err = cfg.Apply(cmd, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `config `+cfgPath+`: invalid value "lots" for --count`) {
		t.Errorf("bad value: %v", err)
	}
}

// TestConfigURLWithoutScheme: a URL flag's value from the environment or
// the file without its scheme says where it came from, not the flag
// nobody typed; a typed flag is left to the command's CheckURLScheme.
func TestConfigURLWithoutScheme(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfgPath, []byte("endpoint: localhost:8080\nforward_to: hooks.example/in?token=s3cret\n"), 0o600)
	cfg, err := LoadConfig(cfgPath, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--forward-to", "http://ok.example"}, "config " + cfgPath + ": endpoint localhost:8080: no scheme; did you mean http://localhost:8080?"},
		{map[string]string{"EVFWD_ENDPOINT": "127.0.0.1:9100"}, nil, "EVFWD_ENDPOINT 127.0.0.1:9100: no scheme; did you mean http://127.0.0.1:9100?\n" +
			"config " + cfgPath + ": forward_to hooks.example/in?token=****: no scheme; did you mean https://hooks.example/in?token=****?"},
		{map[string]string{"EVFWD_ENDPOINT": "http://ok.example"}, []string{"--forward-to", "x"}, ""},
	} {
		cmd := &cobra.Command{Use: "listen"}
		cmd.Flags().String("endpoint", "", "")
		cmd.Flags().StringArray("forward-to", nil, "")
		BindEnv(cmd, "endpoint")
		MarkURLFlags(cmd, "endpoint", "forward-to")
		if err := cmd.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		err := cfg.Apply(cmd, func(k string) string { return tt.env[k] })
		got := ""
		if err != nil {
			got = err.Error()
			if ExitCode(err) != ExitUsage {
				t.Errorf("exit %d, want %d", ExitCode(err), ExitUsage)
			}
		}
		if got != tt.want {
			t.Errorf("env %v args %v:\n got %s\nwant %s", tt.env, tt.args, got, tt.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		code int
		msg  string
	}{
		{nil, 0, ""},
		{errors.New("boom"), 1, "boom"},
		{UsageErrorf("bad %s", "flag"), 2, "bad flag"},
		{Silent(1), 1, ""},
		{Silent(130), 130, ""},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.code {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.code)
		}
		if tt.err != nil {
			if got := Message(tt.err); got != tt.msg {
				t.Errorf("Message(%v) = %q, want %q", tt.err, got, tt.msg)
			}
		}
	}
}

func TestStylesPlainWithoutColour(t *testing.T) {
	var b strings.Builder
	st := NewStyles(&b, false)
	if got := st.OK.Sprint("✓") + st.Box.Render("x"); strings.Contains(got, "\x1b[") {
		t.Errorf("escape codes without colour: %q", got)
	}
	if got := NewStyles(&b, true).OK.Sprint("✓"); !strings.Contains(got, "\x1b[") {
		t.Errorf("no escape codes with colour: %q", got)
	}
}

// A top-level key named like a flag of the command that owns the top level
// (serve) is that command's: another command's flag of the name reads its
// own section only, unless it shares the owner's setting; Origin says
// where each value came from, with the file's line.
func TestConfigTopLevelOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evfwd.yaml")
	os.WriteFile(path, []byte("addr: 127.0.0.1:8787\nstore: sqlite:///s.db\ntolerance: 1m\nlisten:\n  ui_addr: 127.0.0.1:9001\n"), 0o600)
	cfg, err := LoadConfig(path, true)
	if err != nil {
		t.Fatal(err)
	}
	root := &cobra.Command{Use: "evfwd"}
	newCmd := func(name string, flags ...string) *cobra.Command {
		c := &cobra.Command{Use: name, RunE: func(*cobra.Command, []string) error { return nil }}
		for _, f := range flags {
			c.Flags().String(f, "default", "")
		}
		root.AddCommand(c)
		return c
	}
	serve := newCmd("serve", "addr", "store", "ui-addr")
	OwnsTopLevel(serve)
	listen := newCmd("listen", "addr", "ui-addr", "tolerance")
	BindEnv(listen, "ui-addr")
	deliveries := newCmd("deliveries", "store")
	SharesTopLevel(deliveries, "store")
	tests := []struct {
		cmd  *cobra.Command
		args []string
		env  map[string]string
		want map[string][2]string // flag: value, Origin
	}{
		{serve, nil, nil, map[string][2]string{
			"addr":  {"127.0.0.1:8787", "addr (line 1 of " + path + ")"},
			"store": {"sqlite:///s.db", "store (line 2 of " + path + ")"},
		}},
		{listen, nil, nil, map[string][2]string{
			"addr":      {"default", "the default"},
			"ui-addr":   {"127.0.0.1:9001", "listen.ui_addr (line 5 of " + path + ")"},
			"tolerance": {"1m", "tolerance (line 3 of " + path + ")"},
		}},
		{listen, []string{"--addr", ":1"}, map[string]string{"EVFWD_UI_ADDR": ":2"}, map[string][2]string{
			"addr":    {":1", "--addr"},
			"ui-addr": {":2", "EVFWD_UI_ADDR"},
		}},
		{deliveries, nil, nil, map[string][2]string{"store": {"sqlite:///s.db", "store (line 2 of " + path + ")"}}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd.Name(), func(t *testing.T) {
			tt.cmd.PreRunE = func(c *cobra.Command, _ []string) error {
				return cfg.Apply(c, func(k string) string { return tt.env[k] })
			}
			root.SetArgs(append([]string{tt.cmd.Name()}, tt.args...))
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			got := map[string][2]string{}
			for name := range tt.want {
				got[name] = [2]string{tt.cmd.Flags().Lookup(name).Value.String(), cfg.Origin(tt.cmd, name)}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
