package cmd

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/go-cmp/cmp"
)

// startDestinationsServe runs serve in-process with the admin API on:
// source web has its webhooks block and a destination crm, source app a
// destination crm too. A reload adds web's audit.
func startDestinationsServe(t *testing.T) string {
	t.Helper()
	hook := httptest.NewServer(&hookRecorder{})
	t.Cleanup(hook.Close)
	eps := []webhook.Endpoint{{URL: hook.URL}}
	cfg := serve.Config{
		Addr: "127.0.0.1:0", Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"), AdminToken: testAdminToken,
		Sources: []serve.Source{
			{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{Endpoints: eps}},
				Destinations: []destination.Config{{Name: "crm", Endpoints: eps}}},
			{Name: "app", WriteKey: "wk_app", Destinations: []destination.Config{{Name: "crm", Endpoints: eps}}},
		},
	}
	next := cfg
	next.Sources = append([]serve.Source(nil), cfg.Sources...)
	next.Sources[0].Destinations = append([]destination.Config{{Name: "audit", Endpoints: eps}}, cfg.Sources[0].Destinations...)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := serve.New(ctx, cfg, serve.Options{Poll: 5 * time.Millisecond, Reload: func() (serve.Config, error) { return next, nil }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv.URL()
}

func TestDestinationsCommands(t *testing.T) {
	url := startDestinationsServe(t)
	env := map[string]string{"EVFWD_ENDPOINT": url, "EVFWD_ADMIN_TOKEN": testAdminToken}
	run := func(args ...string) result {
		t.Helper()
		return execute(t, testFactory(t, "", false, env), append([]string{"destinations"}, args...)...)
	}
	listJSON := func() map[string]bool {
		t.Helper()
		r := run("list", "-o", "json")
		if r.Code != 0 {
			t.Fatalf("list -o json: %+v", r)
		}
		paused := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			var d admin.Destination
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			paused[d.Source+"/"+d.Name] = d.Paused
		}
		return paused
	}

	if diff := cmp.Diff(map[string]bool{"web/webhooks": false, "web/crm": false, "app/crm": false}, listJSON()); diff != "" {
		t.Errorf("list mismatch (-want +got):\n%s", diff)
	}
	r := run("list")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "SOURCE  ") || !strings.Contains(r.Stdout, "running") {
		t.Errorf("list:\n%+v", r)
	}

	if r := run("pause", "web/crm"); r.Code != 0 || !strings.Contains(r.Stdout, "paused web/crm") {
		t.Errorf("pause web/crm: %+v", r)
	}
	if got := listJSON(); !got["web/crm"] || got["app/crm"] {
		t.Errorf("after pause web/crm: %v", got)
	}
	r = run("resume", "crm", "--source", "web", "-o", "json")
	var d admin.Destination
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &d) != nil || d != (admin.Destination{Source: "web", Name: "crm"}) {
		t.Errorf("resume crm --source web -o json: %+v (%+v)", r, d)
	}
	// A name one source alone has needs no source.
	if r := run("pause", "webhooks"); r.Code != 0 || !strings.Contains(r.Stdout, "paused web/webhooks") {
		t.Errorf("pause webhooks: %+v", r)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "crm"}, `sources app, web each have a destination "crm": give SOURCE/crm or --source`},
		{[]string{"pause", "nope"}, `no destination "nope" in any source`},
		{[]string{"pause", "web/nope"}, "no destination nope in source web"},
		{[]string{"pause", "web/"}, `"web/": want SOURCE/NAME`},
		{[]string{"resume"}, "accepts 1 arg"},
	} {
		if r := run(tc.args...); r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.Code, r.Stderr, tc.want)
		}
	}

	r = run("reload")
	if r.Code != 0 || !strings.Contains(r.Stdout, "added    web/audit") {
		t.Errorf("reload: %+v", r)
	}
	if got := listJSON(); len(got) != 4 {
		t.Errorf("after reload: %v", got)
	}
	r = run("reload", "-o", "json")
	var rl admin.Reloaded
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &rl) != nil || len(rl.Added)+len(rl.Changed)+len(rl.Removed) != 0 {
		t.Errorf("reload again -o json: %+v (%+v)", r, rl)
	}
}

// TestDestinationsAdminErrors: no token is a usage error; a wrong one
// exits 1 and says which setting to check.
func TestDestinationsAdminErrors(t *testing.T) {
	url := startDestinationsServe(t)
	r := execute(t, testFactory(t, "", false, map[string]string{"EVFWD_ENDPOINT": url}), "destinations", "list")
	if r.Code != 2 || !strings.Contains(r.Stderr, "an admin token is required") {
		t.Errorf("no token: %+v", r)
	}
	r = execute(t, testFactory(t, "", false, map[string]string{"EVFWD_ENDPOINT": url, "EVFWD_ADMIN_TOKEN": "adm_wrong_0123456789"}), "destinations", "reload")
	if r.Code != 1 || !strings.Contains(r.Stderr, "refused the token") {
		t.Errorf("wrong token: %+v", r)
	}
}
