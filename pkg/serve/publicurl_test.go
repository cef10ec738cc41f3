package serve_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/pkg/serve"
)

// TestWarnsHostInSettings (issue 43): serve warns once, as it starts, when
// web or mobile sources are served beyond loopback without public_url,
// naming them: their settings document then points clients at the Host
// each request names. On loopback, with public_url, or with server
// sources only, it says nothing.
func TestWarnsHostInSettings(t *testing.T) {
	t.Parallel()
	const warning = "public_url is not set"
	for _, tt := range []struct {
		name, addr, publicURL string
		kinds                 []string
		want                  string // the sources named; "" no warning
	}{
		{"every address", "0.0.0.0:0", "", []string{"web", "server", "mobile"}, "sources=site0,site2"},
		{"IPv6 every address", "[::]:0", "", []string{"mobile"}, "sources=site0"},
		{"loopback", "127.0.0.1:0", "", []string{"web", "mobile"}, ""},
		{"with public_url", "0.0.0.0:0", "https://collect.example.com", []string{"web"}, ""},
		{"server sources only", "0.0.0.0:0", "", []string{"server", ""}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := serve.Config{Addr: tt.addr, PublicURL: tt.publicURL, Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db")}
			for i, k := range tt.kinds {
				cfg.Sources = append(cfg.Sources, serve.Source{Name: "site" + string(rune('0'+i)), WriteKey: "wk_" + string(rune('0'+i)), Kind: k})
			}
			var logs syncbuf.Buffer
			run(t, cfg, serve.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			got := logs.String()
			switch n := strings.Count(got, warning); {
			case tt.want == "" && n != 0:
				t.Errorf("warned:\n%s", got)
			case tt.want != "" && (n != 1 || !strings.Contains(got, tt.want) || !strings.Contains(got, "level=WARN")):
				t.Errorf("want one WARN line naming %s, got:\n%s", tt.want, got)
			}
		})
	}
}
