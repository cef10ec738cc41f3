package cmd

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/internal/tlscert/tlscerttest"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

func TestServeConfigErrorsNameSourceAndEndpoint(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", `sources:
  - name: web
    write_key: wk
    webhooks:
      enabled: true
      endpoints:
        - url: ftp://hooks.example.com/a
`)
	res := execute(t, testFactory(t, "", false, nil), "serve", "--config", cfg, "--store", filepath.Join(t.TempDir(), "x.db"))
	if res.Code != 2 || !strings.Contains(res.Stderr, `source "web": webhooks:`) || !strings.Contains(res.Stderr, "ftp://hooks.example.com/a") {
		t.Errorf("code %d stderr %s", res.Code, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, nil), "serve", "--log-format", "xml")
	if res.Code != 2 {
		t.Errorf("bad --log-format: code %d", res.Code)
	}
}

func TestServeRunsAndDrains(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")
	f := testFactory(t, "", false, map[string]string{"EVFWD_STORE": "sqlite://" + filepath.Join(t.TempDir(), "e.db"), "EVFWD_ADDR": "127.0.0.1:0"})
	_, stop := runServe(t, f, nil, "--config", cfg, "--log-format", "json")
	err := stop()
	// serve has stopped: nothing writes to stderr any more.
	stderr := f.IO.ErrOut.(*bytes.Buffer).String()
	if err != nil || !strings.Contains(stderr, `"msg":"serving"`) || !strings.Contains(stderr, `"msg":"stopped"`) {
		t.Errorf("serve: %v, stderr %s", err, stderr)
	}
}

// runServe runs `evfwd serve args...` on f in the background, edit (when
// set) applied to its options, and returns its URL once it listens, and
// stop, which cancels it and returns what the command returned.
func runServe(t *testing.T, f *cli.Factory, edit func(*ServeOptions), args ...string) (url string, stop func() error) {
	t.Helper()
	ready := make(chan string, 1)
	root := NewRootCmd(f)
	old, _, _ := root.Find([]string{"serve"})
	root.RemoveCommand(old)
	root.AddCommand(NewCmdServe(f, func(o *ServeOptions) error {
		o.ready = func(url string) { ready <- url }
		if edit != nil {
			edit(o)
		}
		return serveRun(o)
	}))
	root.SetArgs(append([]string{"serve"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	select {
	case url = <-ready:
	case err := <-done:
		done <- err // for stop
		t.Fatalf("serve ended before it was ready: %v", err)
	}
	return url, stop
}

func TestDeliveriesListShowRetry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// m3 as an older evfwd stored it: the collected message, writeKey and all.
	old := storetest.Msg("web", "m3", 0, true)
	old.Body = []byte(`{"type":"track","event":"E","userId":"u","messageId":"m3","writeKey":"wk_secret","timestamp":"2024-05-01T12:00:00.000Z"}`)
	st.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true), old})
	ds, _ := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 1, Now: time.Now(), TTL: time.Minute})
	st.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "o", Status: store.Dead, Attempts: 3, LastError: "http://x: HTTP 500",
		Records: []store.Attempt{{Delivery: 1, URL: "http://x", Start: time.Now(), Status: 500, Class: "http_5xx", Outcome: "retryable"}}}})
	st.Close()
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}

	res := execute(t, testFactory(t, "", false, env), "deliveries", "list", "--status", "dead")
	if res.Code != 0 || !strings.Contains(res.Stdout, "dead") || !strings.Contains(res.Stdout, "m1") || strings.Contains(res.Stdout, "m2") {
		t.Errorf("list: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "list", "-o", "json")
	if res.Code != 0 || strings.Count(res.Stdout, "\n") != 3 {
		t.Errorf("list json: %q", res.Stdout)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "show", "1")
	if res.Code != 0 || !strings.Contains(res.Stdout, "http://x") || !strings.Contains(res.Stdout, `"messageId":"m1"`) {
		t.Errorf("show: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	// Whatever form a row is in, show prints the body its attempts post.
	res = execute(t, testFactory(t, "", false, env), "deliveries", "show", "3")
	if res.Code != 0 || !strings.Contains(res.Stdout, `{"type":"track","version":1,"event":"E"`) || strings.Contains(res.Stdout, "wk_secret") {
		t.Errorf("show of a collected row: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "retry", "--status", "dead")
	if res.Code != 0 || !strings.Contains(res.Stdout, "1 delivery scheduled") {
		t.Errorf("retry: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	for _, args := range [][]string{{"deliveries", "retry"}, {"deliveries", "show", "x"}, {"deliveries", "list", "--status", "nope"}} {
		if res := execute(t, testFactory(t, "", false, env), args...); res.Code != 2 {
			t.Errorf("%v: code %d, want 2", args, res.Code)
		}
	}
}

func TestDemo(t *testing.T) {
	res := execute(t, testFactory(t, "", false, nil), "demo", "--timeout", "20s")
	if res.Code != 0 || !strings.Contains(res.Stdout, "6 events sent, 6 webhooks arrived with a valid X-Signature") {
		t.Errorf("demo: %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
	}
}

func TestDeliveriesPrune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Received in 2024: m1 dead (finished), m2 still pending.
	st.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true), storetest.Msg("web", "m2", 0, true)})
	ds, _ := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 1, Now: time.Now(), TTL: time.Minute})
	st.Complete(ctx, []store.Completion{{ID: ds[0].ID, Owner: "o", Status: store.Dead, Attempts: 3,
		Records: []store.Attempt{{Delivery: 1, URL: "http://x", Start: time.Now(), Status: 500, Class: "http_5xx", Outcome: "retryable"}}}})
	st.Close()
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}

	// The config's retention is the default window; this one keeps all.
	cfg := writeFile(t, "evfwd.yaml", "retention: 876000h\n")
	res := execute(t, testFactory(t, "", false, env), "deliveries", "prune", "--config", cfg)
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, "pruned 0 messages") {
		t.Errorf("prune within the config's window: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "prune", "--older-than", "24h", "-o", "json")
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, `{"messages":1,"deliveries":1,"attempts":1,"before":"`) {
		t.Errorf("prune: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "list", "-o", "json")
	if res.Code != 0 || strings.Count(res.Stdout, "\n") != 1 || !strings.Contains(res.Stdout, `"messageId":"m2"`) {
		t.Errorf("after prune, list: %q", res.Stdout)
	}
	if res := execute(t, testFactory(t, "", false, env), "deliveries", "prune", "--older-than", "0s"); res.Code != 2 {
		t.Errorf("--older-than 0s: code %d, want 2", res.Code)
	}
}

func TestServeConfigTypos(t *testing.T) {
	const source = "sources:\n  - name: web\n    write_key: wk\n"
	tests := []struct{ name, config, want string }{
		{"enabled", source + "    webhooks:\n      enabeld: true\n      endpoints:\n        - url: https://hooks.example.com/a\n",
			`sources[0].webhooks.enabeld (line 5 of CONFIG): unknown key; did you mean "enabled"?`},
		{"shared_secret", source + "    webhooks:\n      enabled: true\n      shared_secert: s3cret\n      endpoints:\n        - url: https://hooks.example.com/a\n",
			`sources[0].webhooks.shared_secert (line 6 of CONFIG): unknown key; did you mean "shared_secret"?`},
		{"addr", "adr: 127.0.0.1:9000\n" + source,
			`adr (line 1 of CONFIG): unknown key; did you mean "addr"?`},
		{"write_key", "sources:\n  - name: web\n    write_kye: wk\n",
			`sources[0].write_kye (line 3 of CONFIG): unknown key; did you mean "write_key"?`},
		{"retention", source + "retension: 24h\n",
			`retension (line 4 of CONFIG): unknown key; did you mean "retention"?`},
		{"admin_token", source + "admin_tokn: t\n",
			`admin_tokn (line 4 of CONFIG): unknown key; did you mean "admin_token"?`},
		{"headers", source + "    webhooks:\n      endpoints:\n        - url: https://hooks.example.com/a\n          hedaers: {X-Env: prod}\n",
			`sources[0].webhooks.endpoints[0].hedaers (line 7 of CONFIG): unknown key; did you mean "headers"?`},
		{"a CLI key", source + "batch-siz: 10\n",
			`batch-siz (line 4 of CONFIG): unknown key; did you mean "batch-size"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeFile(t, "evfwd.yaml", tt.config)
			want := result{Stderr: "error: " + strings.ReplaceAll(tt.want, "CONFIG", cfg) + "\n", Code: 2}
			for _, args := range [][]string{
				{"serve", "--check", "--config", cfg},
				{"serve", "--config", cfg, "--store", filepath.Join(t.TempDir(), "x.db")},
				{"sign", "--secret", "s", "--config", cfg, cfg}, // one file for every command
			} {
				got := execute(t, testFactory(t, "", false, nil), args...)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%v: mismatch (-want +got):\n%s", args[0], diff)
				}
			}
		})
	}
}

// checkConfig is a full config, with every key serve reads and a few of
// the other commands'.
const checkConfig = `addr: 127.0.0.1:9000
store: postgres://evfwd:hunter2@db.internal:5432/evfwd?sslmode=disable
admin_token: adm1n-t0ken-0123456789
retention: 72h
public_url: https://collect.example.com
trusted_proxies: [10.0.0.0/8]
allowed_hosts: [evfwd.internal]
sources:
  - name: web
    write_key: wk_live_4f9a1c2e8b7d23
    kind: web
    allowed_origins: [https://www.example.com]
    webhooks:
      enabled: true
      shared_secret: s3cret
      endpoints:
        - url: https://hooks.example.com/a?token=hunter3
          headers: { X-Env: prod, Authorization: Bearer abc123 }
        - url: https://hooks.example.com/b
          name: billing
  - name: app
    write_key: wk_app
    kind: mobile
    webhooks:
      enabled: true
      endpoints:
        - url: https://hooks.example.com/c
  - name: batch
    write_key: wk_batch
endpoint: http://127.0.0.1:9000
batch_size: 50
listen:
  addr: 127.0.0.1:9999
  respond: [500, 200]
sign:
  secret-file: /run/secrets/hook
`

func TestServeCheck(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", checkConfig)
	for _, tt := range []struct{ name, ext string }{{"text", ".txt"}, {"json", ".json"}} {
		t.Run(tt.name, func(t *testing.T) {
			res := execute(t, testFactory(t, "", false, nil), "serve", "--check", "--config", cfg, "-o", tt.name)
			if res.Code != 0 {
				t.Fatalf("code %d, stderr %s", res.Code, res.Stderr)
			}
			for _, secret := range []string{"hunter2", "hunter3", "adm1n", "s3cret", "prod", "abc123", "4f9a1c2e8b7d", "wk_app", "wk_batch"} {
				if strings.Contains(res.Stdout+res.Stderr, secret) {
					t.Errorf("%q printed", secret)
				}
			}
			golden(t, "serve/check"+tt.ext, strings.ReplaceAll(res.Stdout, cfg, "evfwd.yaml"))
			golden(t, "serve/check-"+tt.name+".stderr", res.Stderr)
		})
	}
}

func TestServeCheckExitCodes(t *testing.T) {
	state := t.TempDir()
	env := map[string]string{"XDG_STATE_HOME": state}
	minimal := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string // a part of it
	}{
		{"valid, default store", []string{"--config", minimal}, 0, "config valid"},
		{"valid, -o json", []string{"--config", minimal, "-o", "json"}, 0, ""},
		{"no sources: the dev source", nil, 0, "config valid"},
		{"forward-to beside sources", []string{"--config", minimal, "--forward-to", "http://127.0.0.1:8788/"}, 2, "--forward-to is for the dev source"},
		{"forward-to not a URL", []string{"--forward-to", "ftp://x/"}, 2, "error: --forward-to ftp://x/: scheme \"ftp\": only http and https are supported\n"},
		{"config file without sources: the dev source", []string{"--config", writeFile(t, "nosources.yaml", "addr: 0.0.0.0:18797\n")}, 0, "config valid"},
		{"forward-to beside a config file without sources", []string{"--config", writeFile(t, "nosources.yaml", "addr: 0.0.0.0:18797\n"), "--forward-to", "http://127.0.0.1:8788/"}, 0, "config valid"},
		{"six forward-to", []string{"--forward-to", "http://a/", "--forward-to", "http://b/", "--forward-to", "http://c/",
			"--forward-to", "http://d/", "--forward-to", "http://e/", "--forward-to", "http://f/"}, 2, "at most 5"},
		{"invalid source", []string{"--config", writeFile(t, "bad.yaml", "sources:\n  - name: web\n    webhooks: {enabled: true}\n")}, 2,
			`source "web": write_key is required`},
		{"store scheme", []string{"--config", minimal, "--store", "mysql://db/evfwd"}, 2, `store "mysql://db/evfwd": unknown scheme`},
		{"store URL", []string{"--config", minimal, "--store", "postgres://u:p@db:notaport/evfwd"}, 2, "store: invalid PostgreSQL URL"},
		{"retention", []string{"--config", minimal, "--retention", "-1h"}, 2, "retention -1h0m0s"},
		{"log format", []string{"--config", minimal, "--log-format", "xml"}, 2, "--log-format"},
		{"an argument", []string{"--config", minimal, "extra"}, 2, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := execute(t, testFactory(t, "", false, env), append([]string{"serve", "--check"}, tt.args...)...)
			if res.Code != tt.code || !strings.Contains(res.Stderr, tt.stderr) {
				t.Errorf("code %d, want %d; stderr %q, want it to hold %q", res.Code, tt.code, res.Stderr, tt.stderr)
			}
			if tt.code != 0 && res.Stdout != "" {
				t.Errorf("stdout %q, want nothing", res.Stdout)
			}
		})
	}
	// The default store is shown, neither opened nor created.
	res := execute(t, testFactory(t, "", false, env), "serve", "--check", "--config", minimal)
	if want := "store      sqlite://" + filepath.Join(state, "evfwd", "evfwd.db") + "\n"; !strings.Contains(res.Stdout, want) {
		t.Errorf("stdout %q, want %q", res.Stdout, want)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("--check created %v under the state dir", entries)
	}
	// One JSON object on one line, and nothing else.
	res = execute(t, testFactory(t, "", false, env), "serve", "--check", "--config", minimal, "-o", "json")
	var got map[string]any
	if strings.Count(res.Stdout, "\n") != 1 || json.Unmarshal([]byte(res.Stdout), &got) != nil || res.Stderr != "" {
		t.Errorf("json: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func TestServeTLSFlagsGoTogether(t *testing.T) {
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := ca.Files(t, 1)
	minimal := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")
	store := "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db")
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"--tls-cert alone", []string{"--tls-cert", certFile}, nil},
		{"--tls-key alone", []string{"--tls-key", keyFile}, nil},
		{"EVFWD_TLS_CERT alone", nil, map[string]string{"EVFWD_TLS_CERT": certFile}},
		{"tls_key in the file alone", []string{"--config", writeFile(t, "key.yaml", "tls_key: "+keyFile+"\nsources:\n  - name: web\n    write_key: wk\n")}, nil},
	}
	for _, tt := range tests {
		for _, check := range []bool{false, true} {
			args := append([]string{"serve", "--config", minimal, "--store", store, "--addr", "127.0.0.1:0"}, tt.args...)
			if check {
				args = append(args, "--check")
			}
			res := execute(t, testFactory(t, "", false, tt.env), args...)
			if want := "error: --tls-cert and --tls-key go together\n"; res.Code != 2 || res.Stderr != want || res.Stdout != "" {
				t.Errorf("%s (--check %v): code %d stdout %q stderr %q, want 2 and %q", tt.name, check, res.Code, res.Stdout, res.Stderr, want)
			}
		}
	}
	if _, err := os.Stat(strings.TrimPrefix(store, "sqlite://")); !os.IsNotExist(err) {
		t.Errorf("the store was opened: %v", err)
	}
}

func TestServeCheckTLS(t *testing.T) {
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := ca.Files(t, 1)
	_, otherKey := ca.Files(t, 2)
	const sources = "sources:\n  - name: web\n    write_key: wk\n"
	env := map[string]string{"XDG_STATE_HOME": t.TempDir()}

	// A mismatched pair, from flags or from the file: exit 2 naming both files.
	for _, args := range [][]string{
		{"--config", writeFile(t, "evfwd.yaml", sources), "--tls-cert", certFile, "--tls-key", otherKey},
		{"--config", writeFile(t, "evfwd.yaml", "tls_cert: "+certFile+"\ntls_key: "+otherKey+"\n"+sources)},
	} {
		res := execute(t, testFactory(t, "", false, env), append([]string{"serve", "--check"}, args...)...)
		want := "tls: key " + otherKey + " (for certificate " + certFile + "): private key does not match public key"
		if res.Code != 2 || !strings.Contains(res.Stderr, want) || res.Stdout != "" {
			t.Errorf("%v: code %d stdout %q stderr %q, want 2 and %q", args, res.Code, res.Stdout, res.Stderr, want)
		}
	}
	// A missing file is named too, and serve does not start either.
	missing := filepath.Join(t.TempDir(), "cert.pem")
	for _, check := range []string{"--check", "--addr=127.0.0.1:0"} {
		res := execute(t, testFactory(t, "", false, env), "serve", check, "--config", writeFile(t, "evfwd.yaml", sources), "--tls-cert", missing, "--tls-key", keyFile)
		if want := "tls: certificate: open " + missing + ": no such file or directory"; res.Code != 2 || !strings.Contains(res.Stderr, want) {
			t.Errorf("%s: code %d stderr %q, want 2 and %q", check, res.Code, res.Stderr, want)
		}
	}

	// A good pair from the environment shows in the settings.
	env["EVFWD_TLS_CERT"], env["EVFWD_TLS_KEY"] = certFile, keyFile
	cfg := writeFile(t, "evfwd.yaml", sources)
	res := execute(t, testFactory(t, "", false, env), "serve", "--check", "--config", cfg)
	if want := "tls        cert " + certFile + ", key " + keyFile + "\n"; res.Code != 0 || !strings.Contains(res.Stdout, want) {
		t.Errorf("code %d stdout %q stderr %q, want 0 and %q", res.Code, res.Stdout, res.Stderr, want)
	}
	res = execute(t, testFactory(t, "", false, env), "serve", "--check", "--config", cfg, "-o", "json")
	var got struct{ TLS *tlsSettings }
	if err := json.Unmarshal([]byte(res.Stdout), &got); err != nil || got.TLS == nil || *got.TLS != (tlsSettings{Cert: certFile, Key: keyFile}) {
		t.Errorf("json: %q (%v)", res.Stdout, err)
	}
}

func TestServeTLSReloadOnHUP(t *testing.T) {
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := ca.Files(t, 1)
	cfg := writeFile(t, "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n")
	f := testFactory(t, "", false, map[string]string{
		"EVFWD_STORE": "sqlite://" + filepath.Join(t.TempDir(), "e.db"), "EVFWD_ADDR": "127.0.0.1:0",
		"EVFWD_TLS_CERT": certFile, "EVFWD_TLS_KEY": keyFile,
	})
	reloaded := make(chan error)
	hup := make(chan os.Signal)
	url, stop := runServe(t, f, func(o *ServeOptions) {
		o.hup, o.reloaded = hup, func(err error) { reloaded <- err }
	}, "--config", cfg)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("URL %s, want https", url)
	}

	// serialOf posts a batch on a new connection and returns the serial
	// of the certificate it met.
	serialOf := func() int64 {
		t.Helper()
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/batch", strings.NewReader(`{"batch":[{"type":"track","userId":"u","event":"e"}]}`))
		req.SetBasicAuth("wk", "")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("status %d", resp.StatusCode)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serialOf(); got != 1 {
		t.Errorf("serial %d, want 1", got)
	}
	ca.Issue(t, 2).Write(t, certFile, keyFile)
	hup <- syscall.SIGHUP
	if err := <-reloaded; err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := serialOf(); got != 2 {
		t.Errorf("after SIGHUP: serial %d, want 2", got)
	}
	// A bad pair is refused and the certificate in use stays.
	os.WriteFile(keyFile, []byte("garbage\n"), 0o600)
	hup <- syscall.SIGHUP
	if err := <-reloaded; err == nil || !strings.Contains(err.Error(), keyFile) {
		t.Errorf("reload of a bad pair: %v, want an error naming %s", err, keyFile)
	}
	if got := serialOf(); got != 2 {
		t.Errorf("after a failed reload: serial %d, want 2", got)
	}
}

func TestDeliveriesEndpoints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	err = st.SaveEndpoint(ctx, store.EndpointState{Source: "web", URL: "http://hooks.test/a", State: store.EndpointOpen,
		Failures: 5, Since: since, NextProbe: since.Add(2 * time.Second), LastError: "HTTP 503", UpdatedAt: since})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	res := execute(t, testFactory(t, "", false, env), "deliveries", "endpoints")
	if res.Code != 0 || !strings.Contains(res.Stdout, "http://hooks.test/a") || !strings.Contains(res.Stdout, "open") ||
		!strings.Contains(res.Stdout, "2024-05-01T12:00:02.000Z") {
		t.Errorf("endpoints: %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "endpoints", "-o", "json")
	if res.Code != 0 || !strings.Contains(res.Stdout, `"state":"open"`) || !strings.Contains(res.Stdout, `"failures":5`) {
		t.Errorf("endpoints json: %d %q", res.Code, res.Stdout)
	}
}

// Without sources serve runs the dev source, prints its keys with the
// lines that export them, and keeps them for the next run.
func TestServeDevSource(t *testing.T) {
	state := t.TempDir()
	env := map[string]string{"XDG_STATE_HOME": state, "EVFWD_ADDR": "127.0.0.1:0"}
	exports := regexp.MustCompile(`(?m)^  export (EVFWD_[A-Z_]+)=(\S+)$`)
	runDev := func(args ...string) map[string]string {
		t.Helper()
		f := testFactory(t, "", false, env)
		url, stop := runServe(t, f, nil, args...)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		stderr := f.IO.ErrOut.(*bytes.Buffer).String()
		got := map[string]string{}
		for _, m := range exports.FindAllStringSubmatch(stderr, -1) {
			got[m[1]] = m[2]
		}
		if got["EVFWD_ENDPOINT"] != url || got["EVFWD_WRITE_KEY"] == "" || got["EVFWD_SECRET"] == "" {
			t.Errorf("exports %v (url %s) in\n%s", got, url, stderr)
		}
		if strings.Contains(stderr, "\x1b[") {
			t.Errorf("escape codes on a pipe:\n%s", stderr)
		}
		if load := fmt.Sprintf("  export const analytics = AnalyticsBrowser.load({ writeKey: '%s', cdnURL: '%s' })\n", got["EVFWD_WRITE_KEY"], url); !strings.Contains(stderr, load) {
			t.Errorf("no line for a web page (%q) in\n%s", load, stderr)
		}
		return got
	}
	first := runDev()
	src, err := serve.DevSource(filepath.Join(state, "evfwd"))
	if err != nil || src.WriteKey != first["EVFWD_WRITE_KEY"] || src.Webhooks.SharedSecret != first["EVFWD_SECRET"] {
		t.Errorf("kept %+v, %v; printed %v", src, err, first)
	}
	fi, err := os.Stat(serve.DevSourcePath(filepath.Join(state, "evfwd")))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v", fi, err)
	}
	again := runDev("--forward-to", "http://127.0.0.1:8788/hooks")
	if again["EVFWD_WRITE_KEY"] != first["EVFWD_WRITE_KEY"] {
		t.Errorf("second run printed other keys: %v, then %v", first, again)
	}
}

// serve init writes a config that serve --check takes as written, and
// leaves an existing file alone unless --force.
func TestServeInit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evfwd.yaml")
	res := execute(t, testFactory(t, "", false, nil), "serve", "init", "--config", path)
	if res.Code != 0 || !strings.Contains(res.Stderr, "wrote "+path) {
		t.Fatalf("init: code %d, stderr %q", res.Code, res.Stderr)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The export lines for evfwd listen and the rest: the file's own keys.
	for _, want := range []string{"  export EVFWD_WRITE_KEY=" + initKey(t, written, "write_key") + "\n", "  export EVFWD_SECRET=" + initKey(t, written, "shared_secret") + "\n"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr %q, want it to hold %q", res.Stderr, want)
		}
	}
	if strings.Contains(res.Stderr, "EVFWD_ENDPOINT") {
		t.Errorf("EVFWD_ENDPOINT printed for the default address: %q", res.Stderr)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600: the file holds secrets", fi.Mode().Perm())
	}
	res = execute(t, testFactory(t, "", false, nil), "serve", "--check", "--config", path)
	if res.Code != 0 || !strings.Contains(res.Stdout, "source main") || !strings.Contains(res.Stdout, "enabled, signed") {
		t.Errorf("check of the written file: code %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	res = execute(t, testFactory(t, "", false, nil), "serve", "init", "--config", path)
	if res.Code != 2 || !strings.Contains(res.Stderr, "exists; --force overwrites it") {
		t.Errorf("second init: code %d, stderr %q", res.Code, res.Stderr)
	}
	if again, _ := os.ReadFile(path); string(again) != string(written) {
		t.Error("a refused init changed the file")
	}
	// --force over a file made readable by all: the new secrets are not.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	res = execute(t, testFactory(t, "", false, nil), "serve", "init", "--config", path, "--force", "-o", "json")
	again, _ := os.ReadFile(path)
	var out struct{ Config, WriteKey, Secret string }
	if res.Code != 0 || string(again) == string(written) || json.Unmarshal([]byte(res.Stdout), &out) != nil || out.Config != path ||
		out.WriteKey != initKey(t, again, "write_key") || out.Secret != initKey(t, again, "shared_secret") {
		t.Errorf("--force: code %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("after --force: mode %v, want 0600", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	// Without --config: ./evfwd.yaml.
	t.Chdir(t.TempDir())
	if res := execute(t, testFactory(t, "", false, nil), "serve", "init"); res.Code != 0 {
		t.Errorf("init in the working dir: code %d, stderr %q", res.Code, res.Stderr)
	}
	if _, err := os.Stat("evfwd.yaml"); err != nil {
		t.Error(err)
	}
}

// initKey is the value of key in a config serve init wrote.
func initKey(t *testing.T, config []byte, key string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + key + `: (\S+)$`).FindSubmatch(config)
	if m == nil {
		t.Fatalf("no %s in\n%s", key, config)
	}
	return string(m[1])
}

// A config file without sources, wherever it comes from, such as one
// holding the client's settings: serve starts its dev source and says why,
// and the start line names the file (issue 30, row 3).
func TestServeConfigFileWithoutSources(t *testing.T) {
	cfg := writeFile(t, "client.yaml", "endpoint: http://127.0.0.1:8787\nwrite-key: wk_from_the_file\naddr: 127.0.0.1:0\n")
	for _, tt := range []struct {
		name string
		args []string
		edit func(*cli.Factory)
		env  map[string]string
	}{
		{"--config", []string{"--config", cfg}, nil, nil},
		{"EVFWD_CONFIG", nil, nil, map[string]string{"EVFWD_CONFIG": cfg}},
		{"the default file", nil, func(f *cli.Factory) { f.DefaultConfig = cfg }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"XDG_STATE_HOME": t.TempDir()}
			maps.Copy(env, tt.env)
			f := testFactory(t, "", false, env)
			if tt.edit != nil {
				tt.edit(f)
			}
			_, stop := runServe(t, f, nil, tt.args...)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			stderr := f.IO.ErrOut.(*bytes.Buffer).String()
			for _, want := range []string{
				"> config " + cfg + ` has no sources: running source "dev" for local development`,
				"msg=serving ", "config=" + cfg + " ",
			} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q, want it to hold %q", stderr, want)
				}
			}
		})
	}
}

// --config ” reads no file, not even a broken default one.
func TestServeConfigEmptyReadsNone(t *testing.T) {
	broken := writeFile(t, "config.yaml", "sources: [\n")
	f := testFactory(t, "", false, map[string]string{"XDG_STATE_HOME": t.TempDir()})
	f.DefaultConfig = broken
	if res := execute(t, f, "serve", "--check"); res.Code != 2 || !strings.Contains(res.Stderr, "config "+broken) {
		t.Fatalf("the broken default file was not read: code %d, stderr %q", res.Code, res.Stderr)
	}
	f = testFactory(t, "", false, map[string]string{"XDG_STATE_HOME": t.TempDir(), "EVFWD_CONFIG": broken})
	f.DefaultConfig = broken
	res := execute(t, f, "serve", "--check", "--config", "")
	if res.Code != 0 || !strings.Contains(res.Stdout, "config     (none)\n") {
		t.Errorf("--config '': code %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
}

// The config file is --config, else EVFWD_CONFIG, else ./evfwd.yaml, else
// the user's; every command reads the one found (issue 30, row 8).
func TestConfigDiscovery(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	user := writeFile(t, "config.yaml", "write-key: wk_user\n")
	env := writeFile(t, "env.yaml", "write-key: wk_env\n")
	named := writeFile(t, "named.yaml", "write-key: wk_named\n")
	factory := func(vars map[string]string) *cli.Factory {
		f := testFactory(t, "", false, vars)
		f.LocalConfig, f.DefaultConfig = cli.LocalConfigFile, user
		return f
	}
	// serve --check names the file it read; track's write key says which
	// file the client read.
	check := func(name string, vars map[string]string, args []string, wantFile, wantKey string) {
		t.Helper()
		f := factory(vars)
		res := execute(t, f, append([]string{"serve", "--check", "-o", "json"}, args...)...)
		var got struct{ Config string }
		if res.Code != 0 || json.Unmarshal([]byte(res.Stdout), &got) != nil || got.Config != wantFile {
			t.Errorf("%s: serve read %q (code %d, stderr %q), want %q", name, got.Config, res.Code, res.Stderr, wantFile)
		}
		f = factory(vars)
		var key string
		root := NewRootCmd(f)
		track, _, _ := root.Find([]string{"track"})
		track.RunE = func(cmd *cobra.Command, _ []string) error {
			key, _ = cmd.Flags().GetString("write-key")
			return nil
		}
		root.SetArgs(append([]string{"track", "--event", "E", "--user-id", "u"}, args...))
		if err := root.Execute(); err != nil || key != wantKey {
			t.Errorf("%s: track's write key %q (%v), want %q", name, key, err, wantKey)
		}
	}
	check("the user's file", nil, nil, user, "wk_user")
	if err := os.WriteFile("evfwd.yaml", []byte("write-key: wk_local\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("./evfwd.yaml", nil, nil, cli.LocalConfigFile, "wk_local")
	check("EVFWD_CONFIG", map[string]string{"EVFWD_CONFIG": env}, nil, env, "wk_env")
	check("--config", map[string]string{"EVFWD_CONFIG": env}, []string{"--config", named}, named, "wk_named")
	check("--config ''", map[string]string{"EVFWD_CONFIG": env}, []string{"--config", ""}, "", "")
}

// serve init, then serve in the same folder: the file is found, and the
// start line names it.
func TestServeInitThenServe(t *testing.T) {
	t.Chdir(t.TempDir())
	vars := map[string]string{"XDG_STATE_HOME": t.TempDir(), "EVFWD_ADDR": "127.0.0.1:0", "EVFWD_STORE": "sqlite://" + filepath.Join(t.TempDir(), "e.db")}
	f := testFactory(t, "", false, vars)
	f.LocalConfig = cli.LocalConfigFile
	res := execute(t, f, "serve", "init")
	if res.Code != 0 || !strings.Contains(res.Stderr, "start:     evfwd serve\n") {
		t.Fatalf("init: code %d, stderr %q", res.Code, res.Stderr)
	}
	f = testFactory(t, "", false, vars)
	f.LocalConfig = cli.LocalConfigFile
	_, stop := runServe(t, f, nil)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if stderr := f.IO.ErrOut.(*bytes.Buffer).String(); !strings.Contains(stderr, "config=./evfwd.yaml ") || !strings.Contains(stderr, "sources=1 ") ||
		strings.Contains(stderr, `"dev"`) {
		t.Errorf("stderr %q, want the start line to name ./evfwd.yaml and its source", stderr)
	}
	// With EVFWD_CONFIG naming another file, serve would read that one:
	// init's hint names the file it wrote.
	vars["EVFWD_CONFIG"] = "/etc/evfwd/evfwd.yaml"
	res = execute(t, testFactory(t, "", false, vars), "serve", "init", "--force")
	if res.Code != 0 || !strings.Contains(res.Stderr, "start:     evfwd serve --config ./evfwd.yaml\n") {
		t.Errorf("init beside EVFWD_CONFIG: code %d, stderr %q", res.Code, res.Stderr)
	}
}

// Under --log-format json the dev source is one INFO record, keys and
// all, and stderr stays JSON; on a wildcard address its endpoint is one a
// client can dial.
func TestServeDevSourceJSONLog(t *testing.T) {
	state := t.TempDir()
	f := testFactory(t, "", false, map[string]string{"XDG_STATE_HOME": state, "EVFWD_ADDR": ":0"})
	url, stop := runServe(t, f, nil, "--log-format", "json", "--forward-to", "http://127.0.0.1:8788/hooks")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	src, err := serve.DevSource(filepath.Join(state, "evfwd"))
	if err != nil {
		t.Fatal(err)
	}
	var dev []map[string]any
	for line := range strings.Lines(f.IO.ErrOut.(*bytes.Buffer).String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON on stderr: %q", line)
		}
		if rec["source"] == serve.DevSourceName {
			dev = append(dev, rec)
		}
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	want := map[string]any{
		"level": "INFO", "source": "dev", "key_file": serve.DevSourcePath(filepath.Join(state, "evfwd")),
		"write_key": src.WriteKey, "secret": src.Webhooks.SharedSecret, "endpoint": "http://127.0.0.1:" + port,
		"forward_to": []any{"http://127.0.0.1:8788/hooks"},
	}
	if len(dev) != 1 {
		t.Fatalf("%d dev source records, want 1: %v", len(dev), dev)
	}
	delete(dev[0], "time")
	delete(dev[0], "msg")
	if diff := cmp.Diff(want, dev[0]); diff != "" {
		t.Errorf("dev source record (-want +got):\n%s", diff)
	}
}

// On a terminal the dev source's lines are styled; the export lines stay
// whole, fit to copy.
func TestServeDevSourceOnATerminal(t *testing.T) {
	f := testFactory(t, "", true, map[string]string{"XDG_STATE_HOME": t.TempDir(), "EVFWD_ADDR": "127.0.0.1:0"})
	f.IO.ErrColor = true
	_, stop := runServe(t, f, nil)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	stderr := f.IO.ErrOut.(*bytes.Buffer).String()
	if !strings.Contains(stderr, "\x1b[") || !regexp.MustCompile(`export EVFWD_WRITE_KEY=wk_dev_[0-9a-f]{32}\x1b`).MatchString(stderr) {
		t.Errorf("stderr on a terminal:\n%q", stderr)
	}
}

// EVFWD_PUBLIC_URL overrides the file's public_url, and a bad one is a
// config error (exit 2).
func TestServePublicURLFromEnv(t *testing.T) {
	cfg := writeFile(t, "evfwd.yaml", "public_url: https://file.example\nsources:\n  - name: web\n    write_key: wk\n    kind: web\n")
	env := map[string]string{"EVFWD_PUBLIC_URL": "https://env.example/evfwd"}
	res := execute(t, testFactory(t, "", false, env), "serve", "--check", "--config", cfg, "-o", "json")
	if res.Code != 0 || !strings.Contains(res.Stdout, `"publicUrl":"https://env.example/evfwd"`) || !strings.Contains(res.Stdout, `"kind":"web"`) {
		t.Errorf("code %d, stdout %s, stderr %s", res.Code, res.Stdout, res.Stderr)
	}
	env["EVFWD_PUBLIC_URL"] = "env.example"
	res = execute(t, testFactory(t, "", false, env), "serve", "--check", "--config", cfg)
	if res.Code != 2 || !strings.Contains(res.Stderr, `public_url "env.example": want http(s)://host`) {
		t.Errorf("code %d, stderr %s", res.Code, res.Stderr)
	}
}

// A store path that cannot be the store: the cause in words, exit 2, and
// nothing left beside it (issue 30, row 7).
func TestServeStorePathInWords(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "file", "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--store", "sqlite://" + dir}, "error: store " + dir + ": is a directory; name a file in it, such as " + filepath.Join(dir, "evfwd.db") + "\n"},
		{[]string{"serve", "--store", "sqlite://" + file + "/evfwd.db"}, "error: store " + file + "/evfwd.db: " + file + " is not a directory\n"},
		{[]string{"deliveries", "list", "--store", "sqlite://" + dir}, "error: store " + dir + ": is a directory; name a file in it, such as " + filepath.Join(dir, "evfwd.db") + "\n"},
	} {
		f := testFactory(t, "", false, map[string]string{"XDG_STATE_HOME": t.TempDir(), "EVFWD_ADDR": "127.0.0.1:0"})
		res := execute(t, f, tt.args...)
		if res.Code != 2 || res.Stderr != tt.want {
			t.Errorf("%v: code %d, stderr %q; want 2 and %q", tt.args, res.Code, res.Stderr, tt.want)
		}
	}
	if _, err := os.Stat(dir + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s.lock left behind: %v", dir, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}
}
