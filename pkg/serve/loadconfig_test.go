package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/spf13/viper"
)

// yamlFile is a config file of content, as LoadConfig reads it (without
// JSONAt: mappings as viper holds them).
func yamlFile(t *testing.T, content string) File {
	t.Helper()
	v := viper.New()
	v.SetConfigType("yaml")
	if err := v.ReadConfig(strings.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	return File{Name: "evfwd.yaml", Viper: v}
}

const oneSource = `addr: 127.0.0.1:1
admin_token: from-the-file-0123456789
trusted_proxies: [10.0.0.0/8]
sources:
  - name: web
    write_key: wk_web_0123456789
    webhooks:
      enabled: true
      endpoints: [{url: "http://127.0.0.1:8788/hooks"}]
`

// The file's settings by Config's tags, the flags over them, the
// environment over the file's secrets, the default store under the state
// dir.
func TestLoadConfig(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	env := map[string]string{"XDG_STATE_HOME": state, admin.TokenEnv: "from-the-env-0123456789", PublicURLEnv: "https://collect.example"}
	l, err := LoadConfig(yamlFile(t, oneSource), Flags{Addr: "127.0.0.1:2", Retention: time.Hour, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	want := "addr 127.0.0.1:2, store sqlite://" + filepath.Join(state, "evfwd", "evfwd.db") + ", retention 1h0m0s, token from-the-env-0123456789, public https://collect.example, proxies [10.0.0.0/8], sources 1, dev false"
	got := fmt.Sprintf("addr %s, store %s, retention %s, token %s, public %s, proxies %v, sources %d, dev %v",
		l.Addr, l.Store, l.Retention, l.AdminToken, l.PublicURL, l.TrustedProxies, len(l.Sources), l.Dev)
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Without sources: the dev source; --check and --ui make up its keys and
// the inspector's token without writing them, a run keeps them.
func TestLoadConfigDev(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	getenv := func(k string) string { return map[string]string{"XDG_STATE_HOME": state}[k] }
	fl := Flags{UI: true, UIAddr: DefaultUIAddr, Check: true, ForwardTo: []string{"http://127.0.0.1:8788/hooks"}, Getenv: getenv}
	l, err := LoadConfig(yamlFile(t, "addr: 127.0.0.1:1\n"), fl)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Dev || len(l.Sources) != 1 || l.Sources[0].Name != DevSourceName || !l.Sources[0].Webhooks.Enabled || l.AdminToken == "" {
		t.Fatalf("--check: %+v, want the dev source delivering and a token", l)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("--check wrote %v", entries)
	}
	fl.Check = false
	if l, err = LoadConfig(File{}, fl); err != nil {
		t.Fatal(err)
	}
	if l.DevTokenFile != DevAdminTokenPath(StateDir(getenv)) {
		t.Errorf("token file %q", l.DevTokenFile)
	}
	for _, p := range []string{l.DevTokenFile, DevSourcePath(StateDir(getenv))} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
}

// Every setting at fault is a *ConfigError naming it, an input error.
func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	env := map[string]string{"XDG_STATE_HOME": t.TempDir()}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name    string
		content string
		fl      Flags
		want    string
	}{
		{"tls pair", "", Flags{TLSCert: "c.pem"}, "--tls-cert and --tls-key go together"},
		{"forward-to beside sources", oneSource, Flags{ForwardTo: []string{"http://a.example/"}}, "--forward-to is for the dev source serve runs without configured sources; config evfwd.yaml: sources take their endpoints from the file"},
		{"forward-to not http", "", Flags{ForwardTo: []string{"ftp://a.example/"}, Check: true}, `--forward-to ftp://a.example/: scheme "ftp": only http and https are supported`},
		{"ui without a token", oneSource[strings.Index(oneSource, "sources:"):], Flags{UI: true, UIAddr: DefaultUIAddr}, "--ui needs the admin token"},
		{"ui-addr", oneSource, Flags{UI: true, UIAddr: "8790"}, `--ui-addr "8790": want HOST:PORT, such as 127.0.0.1:8790`},
		{"invalid", oneSource + "retention: -1h\n", Flags{Retention: -time.Hour}, "config evfwd.yaml:\n  retention -1h0m0s: want a duration of 0 (keep everything) or more"},
		{"not decodable", "sources: 7\n", Flags{}, "config evfwd.yaml: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fl.Getenv = getenv
			_, err := LoadConfig(yamlFile(t, tt.content), tt.fl)
			var ce *ConfigError
			if !errors.As(err, &ce) || !ce.InputError() || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("%v, want a *ConfigError starting %q", err, tt.want)
			}
		})
	}
}
