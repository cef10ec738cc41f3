package serve

import (
	"testing"

	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/go-cmp/cmp"
)

func TestMasked(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Addr: "127.0.0.1:8787", Store: "postgres://evfwd:pw@db/evfwd", AdminToken: "tok",
		Sources: []Source{
			{Name: "web", WriteKey: "wk_live_4f9a1c2e8b7d23", Webhooks: Webhooks{Enabled: true, Destination: webhook.Destination{
				SharedSecret: "s3cret",
				Endpoints: []webhook.Endpoint{{URL: "https://hooks.example.com/a?token=SENTINEL", Headers: map[string]string{"X-Env": "prod"}},
					{URL: "https://hooks.example.com/b", Signing: webhook.SigningStandard, SigningSecret: "whsec_c2VjcmV0"}},
			}}},
			{Name: "app", WriteKey: "wk_app"},
		},
	}
	got := cfg.Masked()
	want := Config{
		Addr: "127.0.0.1:8787", Store: "postgres://evfwd:****@db/evfwd", AdminToken: "****",
		Sources: []Source{
			{Name: "web", WriteKey: "wk_l…23", Webhooks: Webhooks{Enabled: true, Destination: webhook.Destination{
				SharedSecret: "****",
				Endpoints: []webhook.Endpoint{{URL: "https://hooks.example.com/a?token=****", Headers: map[string]string{"X-Env": "****"}},
					{URL: "https://hooks.example.com/b", Signing: webhook.SigningStandard, SigningSecret: "****"}},
			}}},
			{Name: "app", WriteKey: "****"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if cfg.Sources[0].WriteKey != "wk_live_4f9a1c2e8b7d23" || cfg.Sources[0].Webhooks.Endpoints[0].Headers["X-Env"] != "prod" ||
		cfg.Sources[0].Webhooks.Endpoints[1].SigningSecret != "whsec_c2VjcmV0" {
		t.Errorf("Masked changed the config it was called on: %+v", cfg.Sources[0])
	}
}

func TestMaskURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://evfwd:hunter2@db:5432/evfwd?sslmode=disable", "postgres://evfwd:****@db:5432/evfwd?sslmode=disable"},
		{"postgres://evfwd@db/evfwd?password=hunter2&pool_max_conns=4", "postgres://evfwd@db/evfwd?password=****&pool_max_conns=4"},
		{"postgres://evfwd@db/evfwd", "postgres://evfwd@db/evfwd"},
		{"postgres://evfwd:p%w@db/evfwd", "postgres://****@db/evfwd"}, // no URL: only the host part shows
		{"sqlite:///var/lib/my dir/evfwd.db", "sqlite:///var/lib/my dir/evfwd.db"},
		{"/var/lib/evfwd.db", "/var/lib/evfwd.db"},
		{"https://user:pw@hooks.example.com/a", "https://user:****@hooks.example.com/a"},
	}
	for _, tt := range tests {
		if got := MaskURL(tt.in); got != tt.want {
			t.Errorf("MaskURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
