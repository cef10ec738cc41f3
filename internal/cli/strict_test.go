package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// The shape of serve's config (pkg/serve.Config), squash included.
type testServeConfig struct {
	Addr       string         `mapstructure:"addr"`
	Store      string         `mapstructure:"store"`
	Sources    []testSource   `mapstructure:"sources"`
	AdminToken string         `mapstructure:"admin_token"`
	Retention  time.Duration  `mapstructure:"retention"`
	Since      time.Time      `mapstructure:"since"`
	Extra      map[string]any `mapstructure:"extra"`
}

type testSource struct {
	Name     string       `mapstructure:"name"`
	WriteKey string       `mapstructure:"write_key"`
	Webhooks testWebhooks `mapstructure:"webhooks"`
}

type testWebhooks struct {
	Enabled         bool `mapstructure:"enabled"`
	testDestination `mapstructure:",squash"`
}

type testDestination struct {
	Endpoints    []testEndpoint `mapstructure:"endpoints"`
	SharedSecret string         `mapstructure:"shared_secret"`
}

type testEndpoint struct {
	URL     string            `mapstructure:"url"`
	Headers map[string]string `mapstructure:"headers"`
}

// testTree is a small evfwd: serve reads testServeConfig, listen and sign
// have flags, deliveries has a subcommand.
func testTree() *cobra.Command {
	run := func(*cobra.Command, []string) error { return nil }
	root := &cobra.Command{Use: "evfwd"}
	root.PersistentFlags().String("output", "text", "")
	root.PersistentFlags().String("config", "", "")
	serve := &cobra.Command{Use: "serve", RunE: run}
	serve.Flags().String("addr", "", "")
	serve.Flags().String("store", "", "")
	serve.Flags().Duration("retention", 0, "")
	serve.Flags().Duration("lease-ttl", 0, "")
	ReadsConfig(serve, testServeConfig{})
	listen := &cobra.Command{Use: "listen", RunE: run}
	listen.Flags().String("addr", "", "")
	listen.Flags().IntSlice("respond", nil, "")
	sign := &cobra.Command{Use: "sign", RunE: run}
	(&Secret{}).AddFlags(sign)
	send := &cobra.Command{Use: "send", RunE: run}
	send.Flags().String("endpoint", "", "")
	send.Flags().String("write-key", "", "")
	send.Flags().Int("batch-size", 100, "")
	deliveries := &cobra.Command{Use: "deliveries"}
	list := &cobra.Command{Use: "list", RunE: run}
	list.Flags().String("status", "", "")
	deliveries.AddCommand(list)
	root.AddCommand(serve, listen, sign, send, deliveries)
	return root
}

const validConfig = `addr: 127.0.0.1:8787
store: sqlite:///var/lib/evfwd/evfwd.db
admin_token: tok
retention: 72h
since: 2024-05-01T00:00:00Z
sources:
  - name: web
    write_key: wk_live_123
    webhooks: &hooks
      enabled: true
      shared_secret: s3cret
      endpoints:
        - url: https://hooks.example.com/a
          headers: { X-Env: prod, Enabled: "not a key here", write_key: x }
  - name: app
    Write_Key: wk_app
    webhooks:
      <<: *hooks
      enabled: false
extra: { anything: { goes: here } }
endpoint: http://127.0.0.1:8787
write-key: wk_cli
batch_size: 50
lease_ttl: 1m
output: json
listen:
  addr: 127.0.0.1:9999
  respond: [500, 200]
sign:
  secret-file: /run/secrets/hook
list:
  status: dead
`

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name, file, text string
		want             []string // each error, %s for the file
	}{
		{"valid", "evfwd.yaml", validConfig, nil},
		{"empty", "evfwd.yaml", "", nil},
		{"enabled", "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n    webhooks:\n      enabeld: true\n",
			[]string{`sources[0].webhooks.enabeld (line 5 of %s): unknown key; did you mean "enabled"?`}},
		{"shared_secret", "evfwd.yaml", "sources:\n  - name: web\n    write_key: wk\n    webhooks:\n      enabled: true\n      shared_secert: s\n",
			[]string{`sources[0].webhooks.shared_secert (line 6 of %s): unknown key; did you mean "shared_secret"?`}},
		{"addr", "evfwd.yaml", "adr: 127.0.0.1:9000\nsources: []\n",
			[]string{`adr (line 1 of %s): unknown key; did you mean "addr"?`}},
		{"write_key", "evfwd.yaml", "sources:\n  - name: web\n  - name: app\n    write_kye: wk\n",
			[]string{`sources[1].write_kye (line 4 of %s): unknown key; did you mean "write_key"?`}},
		{"a dash for an underscore", "evfwd.yaml", "sources:\n  - name: web\n    write-key: wk\n",
			[]string{`sources[0].write-key (line 3 of %s): unknown key; did you mean "write_key"?`}},
		{"headers are free, their neighbours are not", "evfwd.yaml",
			"sources:\n  - webhooks:\n      endpoints:\n        - url: u\n          headers: {X-Whatever: 1}\n          hedaers: {}\n",
			[]string{`sources[0].webhooks.endpoints[0].hedaers (line 6 of %s): unknown key; did you mean "headers"?`}},
		{"nothing close: the keys of a small level", "evfwd.yaml", "sources:\n  - colour: red\n",
			[]string{`sources[0].colour (line 2 of %s): unknown key; known here: name, webhooks, write_key`}},
		{"nothing close at the top", "evfwd.yaml", "frobnicate: 1\n",
			[]string{`frobnicate (line 1 of %s): unknown key`}},
		{"a command section", "evfwd.yaml", "listen:\n  adr: x\n",
			[]string{`listen.adr (line 2 of %s): unknown key; did you mean "addr"?`}},
		{"a command that does not run", "evfwd.yaml", "deliveries:\n  status: dead\n",
			[]string{`deliveries (line 1 of %s): unknown key`}},
		{"a CLI flag", "evfwd.yaml", "batch-siz: 5\nendpont: x\n",
			[]string{`batch-siz (line 1 of %s): unknown key; did you mean "batch-size"?`, `endpont (line 2 of %s): unknown key; did you mean "endpoint"?`}},
		{"help and config are no keys", "evfwd.yaml", "config: other.yaml\nhelp: true\n",
			[]string{`config (line 1 of %s): unknown key`, `help (line 2 of %s): unknown key`}},
		{"an anchor's typo once, where it is", "evfwd.yaml",
			"sources:\n  - name: a\n    webhooks: &h\n      enabeld: true\n  - name: b\n    webhooks: *h\n  - name: c\n    webhooks:\n      <<: *h\n",
			[]string{`sources[0].webhooks.enabeld (line 4 of %s): unknown key; did you mean "enabled"?`}},
		{"an odd key is quoted", "evfwd.yaml", "sources:\n  - \"my key\": 1\n",
			[]string{`sources[0]."my key" (line 2 of %s): unknown key; known here: name, webhooks, write_key`}},
		{"json has lines", "evfwd.json", "{\n  \"sources\": [\n\t{\"name\": \"web\", \"webhooks\": {\"enabeld\": true}}\n  ]\n}\n",
			[]string{`sources[0].webhooks.enabeld (line 3 of %s): unknown key; did you mean "enabled"?`}},
		{"toml has none", "evfwd.toml", "adr = \"x\"\n[[sources]]\nname = \"web\"\n[sources.webhooks]\nenabeld = true\n",
			[]string{`adr (in %s): unknown key; did you mean "addr"?`, `sources[0].webhooks.enabeld (in %s): unknown key; did you mean "enabled"?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(path, true)
			if err != nil {
				t.Fatal(err)
			}
			root := testTree()
			serve, _, _ := root.Find([]string{"serve"})
			err = cfg.Apply(serve, func(string) string { return "" })
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
				if code := ExitCode(err); code != ExitUsage {
					t.Errorf("exit code %d, want %d", code, ExitUsage)
				}
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, strings.ReplaceAll(w, "%s", path))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadsConfigPaths(t *testing.T) {
	type node struct {
		Name string `mapstructure:"name"`
		Next *node  `mapstructure:"next"` // holds itself
	}
	type Embedded struct {
		Inner string `mapstructure:"inner"`
	}
	type odd struct {
		Embedded             // no squash: a key of its own
		Skipped       string `mapstructure:"-"`
		unexported    string
		Untagged      int
		Node          node              `mapstructure:"node"`
		Blob          []byte            `mapstructure:"blob"`
		ByName        map[string]node   `mapstructure:"by_name"`
		Lists         [][]testEndpoint  `mapstructure:"lists"`
		Labels        map[string]string `mapstructure:"labels,omitempty"`
		AnythingGoes  any               `mapstructure:"anything"`
		Retention     time.Duration     `mapstructure:"retention"`
		Since         *time.Time        `mapstructure:"since"`
		testWebhooks2 `mapstructure:",squash"`
	}
	_ = odd{}.unexported
	cmd := &cobra.Command{Use: "x"}
	ReadsConfig(cmd, testServeConfig{})
	ReadsConfig(cmd, &odd{})
	got := strings.Split(cmd.Annotations[annotationKeys], "\n")
	want := []string{
		"addr", "store", "sources", "sources.name", "sources.write_key", "sources.webhooks", "sources.webhooks.enabled",
		"sources.webhooks.endpoints", "sources.webhooks.endpoints.url", "sources.webhooks.endpoints.headers",
		"sources.webhooks.endpoints.headers.*", "sources.webhooks.shared_secret", "admin_token", "retention", "since",
		"extra", "extra.*",
		"embedded", "embedded.inner", "untagged", "node", "node.name", "node.next", "blob",
		"by_name", "by_name.*", "by_name.*.name", "by_name.*.next", "lists", "lists.url", "lists.headers", "lists.headers.*",
		"labels", "labels.*", "anything", "retention", "since", "flag",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

type testWebhooks2 struct {
	Flag bool `mapstructure:"flag"`
}

func TestNearest(t *testing.T) {
	names := []string{"addr", "admin_token", "batch-size", "batch_size", "enabled", "endpoint", "endpoints", "retention", "shared_secret", "store", "write_key"}
	tests := []struct{ typed, want string }{
		{"adr", "addr"},
		{"enabeld", "enabled"}, // a swap is one edit
		{"shared_secert", "shared_secret"},
		{"write_kye", "write_key"},
		{"batch_siz", "batch_size"}, // the separator typed wins
		{"batch-siz", "batch-size"},
		{"retension", "retention"},
		{"endpont", "endpoint"},
		{"sotre", "store"},
		{"x", ""},      // one letter is not a typo of anything
		{"adm", ""},    // three letters allow one edit
		{"colour", ""}, // nothing close
		{"stor_e", "store"},
		{"enabled_", "enabled"},
		{"éndpoint", "endpoint"}, // runes, not bytes
	}
	for _, tt := range tests {
		if got := nearest(tt.typed, names); got != tt.want {
			t.Errorf("nearest(%q) = %q, want %q", tt.typed, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"abc", "abc", 0},
		{"abc", "acb", 1}, {"ca", "abc", 3}, {"kitten", "sitting", 3}, {"secert", "secret", 1},
		{"héllo", "hello", 1},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// FuzzCheckKeys: whatever YAML comes in, the checker does not panic, ends
// (aliases that nest or loop included), and reports only keys with a line
// that no level knows.
func FuzzCheckKeys(f *testing.F) {
	for _, seed := range []string{
		validConfig,
		"sources:\n  - webhooks:\n      enabeld: true\n",
		"a: &a [*a]\n",
		"sources: &s\n  - webhooks: *s\n",
		"sources:\n  - &x {name: a, webhooks: {<<: *x}}\n",
		"a: &a {b: *a}\n<<: *a\n",
		"<<: [1, {adr: x}, [y]]\n",
		"? [a, b]\n: c\n",
		"sources: [[{adr: 1}], {webhooks: [{enabeld: 1}]}]\n",
		"--- \n...\n",
		"{\"sources\": [{\"write_kye\": 1}]}",
		"a: &a [*a, *a, *a]\nb: &b [*a, *a, *a]\nc: &c [*b, *b, *b]\nsources: [*c, *c, *c]\n",
	} {
		f.Add([]byte(seed))
	}
	known := knownKeys(testTree())
	f.Fuzz(func(t *testing.T, data []byte) {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil {
			return
		}
		for _, e := range checkKeys(&doc, known, "f.yaml") {
			if e.Line <= 0 || e.Path == "" || !strings.HasPrefix(e.Error(), e.Path+" (line ") {
				t.Errorf("%+v: no path or line", e)
			}
			if e.Suggest != "" && editDistance(strings.ToLower(e.Key), e.Suggest) > 2 {
				t.Errorf("%+v: a far suggestion", e)
			}
		}
	})
}
