package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/go-cmp/cmp"
)

const adminToken = "adm_t0ken"

// adminPolicy is the retry schedule of the admin tests' service: a failed
// delivery waits an hour, on the test's clock, for its retry, so none is
// due before the test moves the clock past it.
var adminPolicy = webhook.Policy{Initial: time.Hour, Max: time.Hour, Jitter: -1}

// startAdmin runs a service with the admin API on (unless token is ""):
// sources "web" and "app" forward to their own hooks, "quiet" has no
// webhooks. Its clock is c, its retry policy adminPolicy.
func startAdmin(t *testing.T, c *clock, token string, web, app *hook) (*harness, *serve.AdminClient) {
	t.Helper()
	return startAdminOpts(t, serve.Options{Now: c.now}, token, web, app)
}

// startAdminOpts is startAdmin with options (Now is required); a Policy
// without Initial is adminPolicy, and a zero Poll is 5ms.
func startAdminOpts(t *testing.T, opts serve.Options, token string, web, app *hook) (*harness, *serve.AdminClient) {
	t.Helper()
	dest := func(h *hook) serve.Webhooks {
		return serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: h.URL}}}}
	}
	cfg := serve.Config{
		Addr:  "127.0.0.1:0",
		Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Sources: []serve.Source{
			{Name: "web", WriteKey: "wk_web", Webhooks: dest(web)},
			{Name: "app", WriteKey: "wk_app", Webhooks: dest(app)},
			{Name: "quiet", WriteKey: "wk_quiet"},
		},
		AdminToken: token,
	}
	if opts.Policy.Initial == 0 {
		opts.Policy = adminPolicy
	}
	if opts.Poll == 0 {
		opts.Poll = 5 * time.Millisecond
	}
	h := run(t, cfg, opts)
	return h, &serve.AdminClient{Endpoint: h.url, Token: token}
}

// bodies returns what h received, sorted.
func bodies(h *hook) []string {
	var out []string
	for _, r := range h.received() {
		out = append(out, string(r.body))
	}
	slices.Sort(out)
	return out
}

func adminStatus(err error) int {
	var ae *serve.AdminError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

func TestAdminDisabledWithoutToken(t *testing.T) {
	h, _ := startAdmin(t, newClock(t0), "", newHook(t), newHook(t))
	for _, tok := range []string{"", "anything"} {
		c := &serve.AdminClient{Endpoint: h.url, Token: tok}
		_, err := c.CreateDeletion(context.Background(), "u1", nil)
		var ae *serve.AdminError
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || !strings.Contains(ae.Message, "admin API is disabled") ||
			!strings.Contains(ae.Message, serve.AdminEnv) {
			t.Errorf("token %q: %v, want 404 saying the admin API is disabled", tok, err)
		}
	}
}

func TestAdminAuth(t *testing.T) {
	h, good := startAdmin(t, newClock(t0), adminToken, newHook(t), newHook(t))
	ctx := context.Background()
	for _, tt := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong", http.StatusForbidden}, {adminToken + "x", http.StatusForbidden}} {
		c := &serve.AdminClient{Endpoint: h.url, Token: tt.token}
		if _, err := c.CreateDeletion(ctx, "u1", nil); adminStatus(err) != tt.want {
			t.Errorf("deletion with token %q: %v, want %d", tt.token, err, tt.want)
		}
		if _, err := c.Sync(ctx, "audience", "VIP", nil, strings.NewReader(`"u1"`)); adminStatus(err) != tt.want {
			t.Errorf("sync with token %q: %v, want %d", tt.token, err, tt.want)
		}
	}
	// A bare request shows the challenge and a JSON error.
	resp, err := http.Post(h.url+"/admin/v1/deletions", "application/json", strings.NewReader(`{"userId":"u1"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" || !json.Valid(b) {
		t.Errorf("bare request: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
	}
	if ds := deliveries(t, h, store.Filter{}); len(ds) != 0 {
		t.Errorf("refused requests queued %d deliveries", len(ds))
	}
	if _, err := good.CreateDeletion(ctx, "u1", nil); err != nil {
		t.Errorf("right token: %v", err)
	}
	if _, err := good.Deletion(ctx, "nope"); adminStatus(err) != http.StatusNotFound {
		t.Errorf("unknown deletion: %v, want 404", err)
	}
}

// A deletion request cancels the user's pending deliveries and purges their
// bodies in every source, and queues one delete notification for each
// source with webhooks.
//
// The order of events is fixed by construction, not by timing: w1's failed
// first attempt puts its retry an hour later on the test's clock
// (adminPolicy), and the clock moves only when nothing is in flight: a
// minute on before the deletion (w1 still not due, so it is pending when
// the deletion cancels it), and past w1's retry only once the delete
// notifications are on record (no lease left that the jump could expire
// and hand out again).
func TestDeletionFanOutCancelsAndPurges(t *testing.T) {
	c := newClock(t0)
	web, app := newHook(t, 500), newHook(t) // web's first delivery fails and waits for a retry
	// One delivery at a time per source, the earliest due first: see the end.
	h, adm := startAdminOpts(t, serve.Options{Now: c.now, PerSource: 1}, adminToken, web, app)
	ctx := context.Background()
	for _, m := range []struct{ key, body string }{
		{"wk_web", `{"userId":"u1","event":"A","messageId":"w1"}`},
		{"wk_app", `{"userId":"u2","event":"B","messageId":"a1"}`},
		{"wk_quiet", `{"userId":"u1","event":"C","messageId":"q1"}`},
	} {
		if code, body := h.post(t, "/v1/track", m.key, m.body); code != 200 {
			t.Fatalf("track: %d %s", code, body)
		}
	}
	waitFor(t, "w1 to wait for its retry and a1 delivered", func() bool {
		ds := deliveries(t, h, store.Filter{Source: "web"})
		return len(ds) == 1 && ds[0].Attempts == 1 && len(deliveries(t, h, store.Filter{Source: "app", Status: store.Delivered})) == 1
	})
	if w1 := deliveries(t, h, store.Filter{Source: "web"})[0]; w1.Status != store.Pending || !w1.NextAttempt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("w1 after its failed attempt: %s, next at %v; want pending, due at t0+1h", w1.Status, w1.NextAttempt)
	}

	c.add(time.Minute)
	d, err := adm.CreateDeletion(ctx, "u1", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delete notifications delivered", func() bool {
		return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 3 // a1 and the two deletes
	})
	want := `{"type":"delete","userId":"u1","timestamp":"2024-05-01T12:01:00.000Z"}`
	if got := web.received(); len(got) != 2 || string(got[1].body) != want {
		t.Errorf("web got %d requests, the last %s; want w1's failed attempt, then %s", len(got), got[len(got)-1].body, want)
	}
	if got := app.received(); len(got) != 2 || string(got[1].body) != want || got[1].sig != sign(got[1].body) {
		t.Errorf("app got %d requests, the last %s (sig %s); want a1, then %s signed", len(got), got[len(got)-1].body, got[len(got)-1].sig, want)
	}
	ds := deliveries(t, h, store.Filter{Source: "web"})
	if len(ds) != 2 || ds[0].Status != store.Cancelled {
		t.Fatalf("web deliveries = %+v, want w1 cancelled", ds)
	}
	w1 := ds[0]
	if got, err := h.srv.Store().Get(ctx, w1.ID); err != nil || len(got.Body) != 0 {
		t.Errorf("w1 body = %q, %v; want purged", got.Body, err)
	}
	got, err := adm.Deletion(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Sources {
		got.Sources[i].Delivery = 0
	}
	wantD := &serve.Deletion{ID: d.ID, UserID: "u1", CreatedAt: "2024-05-01T12:01:00.000Z", Sources: []serve.DeletionSource{
		{Source: "app", Notified: true, MessageID: d.ID, Status: store.Delivered, Attempts: 1},
		{Source: "quiet", Purged: 1},
		{Source: "web", Notified: true, MessageID: d.ID, Status: store.Delivered, Attempts: 1, Cancelled: 1, Purged: 1},
	}}
	if diff := cmp.Diff(wantD, got); diff != "" {
		t.Errorf("deletion mismatch (-want +got):\n%s", diff)
	}

	// The cancelled w1 is not retried, even once its retry is due. With
	// the clock past it, a new message goes through web's lane, which
	// leases one delivery at a time, the earliest due first: were w1
	// leasable, it would go out, and be on record, before w2.
	c.set(t0.Add(2 * time.Hour))
	if code, body := h.post(t, "/v1/track", "wk_web", `{"userId":"u3","event":"D","messageId":"w2"}`); code != 200 {
		t.Fatalf("track: %d %s", code, body)
	}
	waitFor(t, "w2 delivered", func() bool {
		return len(deliveries(t, h, store.Filter{Source: "web", Status: store.Delivered})) == 2 // the delete and w2
	})
	if got := web.received(); len(got) != 3 || !strings.Contains(string(got[2].body), `"messageId":"w2"`) {
		t.Errorf("web got %d requests; want 3: w1's failed attempt, the delete, w2", len(got))
	}
	if got, err := h.srv.Store().Get(ctx, w1.ID); err != nil || got.Status != store.Cancelled || got.Attempts != 1 {
		t.Errorf("w1 = %+v, %v; want cancelled after its one attempt", got, err)
	}
}

func TestDeletionNarrowedAndInvalid(t *testing.T) {
	web, app := newHook(t), newHook(t)
	h, adm := startAdmin(t, newClock(t0), adminToken, web, app)
	ctx := context.Background()
	d, err := adm.CreateDeletion(ctx, "u9", []string{"app", "quiet", "app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Sources) != 2 || d.Sources[0].Source != "app" || !d.Sources[0].Notified || d.Sources[1].Notified {
		t.Errorf("sources = %+v", d.Sources)
	}
	waitFor(t, "app notification", func() bool { return len(app.received()) == 1 })
	if n := len(deliveries(t, h, store.Filter{Source: "web"})); n != 0 {
		t.Errorf("web got %d deliveries, want none", n)
	}
	for _, tt := range []struct{ body, want string }{
		{`{"sources":["web"]}`, "userId is required"},
		{`{"userId":"u","sources":["nope"]}`, `unknown source`},
		{`{"user":"u"}`, "unknown field"},
		{`[`, "invalid request body"},
	} {
		req, _ := http.NewRequest("POST", h.url+"/admin/v1/deletions", strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s, want 400 %q", tt.body, resp.StatusCode, b, tt.want)
		}
	}
}

// identifies parses the identify bodies h received since n into
// "user=value" of trait, checking the fixed fields of each.
func identifies(t *testing.T, h *hook, n int, trait, class string) []string {
	t.Helper()
	var out []string
	for _, r := range h.received()[n:] {
		var m struct {
			Type, UserID, MessageID, Timestamp string
			Version                            int
			Traits                             map[string]json.RawMessage
			Context                            struct{ Personas map[string]string }
		}
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
		if m.Type != "identify" || m.Version != 1 || m.MessageID == "" || m.Timestamp != "2024-05-01T12:00:00.000Z" ||
			len(m.Traits) != 1 || m.Context.Personas["computation_key"] != trait || m.Context.Personas["computation_class"] != class ||
			r.sig != sign(r.body) {
			t.Errorf("unexpected identify %s", r.body)
		}
		out = append(out, m.UserID+"="+string(m.Traits[trait]))
	}
	slices.Sort(out)
	return out
}

func TestAudienceSyncFirstDiffUnchanged(t *testing.T) {
	web, app := newHook(t), newHook(t)
	h, adm := startAdmin(t, newClock(t0), adminToken, web, app)
	ctx := context.Background()
	const name = "High Value Users"
	steps := []struct {
		list string
		want serve.SyncReport
		sent []string
	}{
		{"\"a\"\n\"b\"\n{\"userId\":\"c\"}\n", serve.SyncReport{First: true, Added: 3, Messages: 6},
			[]string{"a=true", "b=true", "c=true"}},
		{`["b","c","d"]`, serve.SyncReport{Added: 1, Removed: 1, Unchanged: 2, Messages: 4},
			[]string{"a=false", "d=true"}},
		{`["d","c","b"]`, serve.SyncReport{Unchanged: 3}, nil},
	}
	seen := 0
	for i, st := range steps {
		rep, err := adm.Sync(ctx, "audience", name, nil, strings.NewReader(st.list))
		if err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		st.want.Kind, st.want.Name, st.want.Trait, st.want.Sources = store.KindAudience, name, "high_value_users", []string{"web", "app"}
		rep.Millis = 0
		if diff := cmp.Diff(&st.want, rep); diff != "" {
			t.Errorf("sync %d report mismatch (-want +got):\n%s", i, diff)
		}
		total := seen + len(st.sent)
		waitFor(t, "identifies", func() bool { return len(web.received()) == total && len(app.received()) == total })
		for _, hk := range []*hook{web, app} {
			if diff := cmp.Diff(st.sent, identifies(t, hk, seen, "high_value_users", "audience")); diff != "" {
				t.Errorf("sync %d identifies mismatch (-want +got):\n%s", i, diff)
			}
		}
		seen = total
	}
	// The unchanged sync queued nothing: every delivery belongs to the first two.
	if n := len(deliveries(t, h, store.Filter{})); n != 10 {
		t.Errorf("%d deliveries, want 10", n)
	}
}

func TestTraitSyncValueChange(t *testing.T) {
	web, app := newHook(t), newHook(t)
	_, adm := startAdmin(t, newClock(t0), adminToken, web, app)
	ctx := context.Background()
	steps := []struct {
		list string
		sent []string
	}{
		{`{"userId":"a","value":100}` + "\n" + `{"userId":"b","value":"gold"}`, []string{"a=100", `b="gold"`}},
		{`{"userId":"a","value":250.5}` + "\n" + `{"userId":"b","value":"gold"}`, []string{"a=250.5"}},
		{`{"userId":"a","value":250.5}`, []string{"b=null"}},
	}
	seen := 0
	for i, st := range steps {
		rep, err := adm.Sync(ctx, "trait", "Lifetime Value", []string{"web"}, strings.NewReader(st.list))
		if err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		if rep.Trait != "lifetime_value" || rep.Messages != len(st.sent) {
			t.Errorf("sync %d: %+v", i, rep)
		}
		total := seen + len(st.sent)
		waitFor(t, "identifies", func() bool { return len(web.received()) == total })
		if diff := cmp.Diff(st.sent, identifies(t, web, seen, "lifetime_value", "computed_trait")); diff != "" {
			t.Errorf("sync %d identifies mismatch (-want +got):\n%s", i, diff)
		}
		seen = total
	}
	if n := len(app.received()); n != 0 {
		t.Errorf("app got %d requests; --source web should leave it out", n)
	}
}

func TestSyncRefusals(t *testing.T) {
	h, adm := startAdmin(t, newClock(t0), adminToken, newHook(t), newHook(t))
	ctx := context.Background()
	for _, tt := range []struct {
		kind, name string
		sources    []string
		list       string
		want       string
	}{
		{"audience", "VIP", []string{"quiet"}, `"a"`, `source "quiet" does not have webhooks enabled`},
		{"audience", "VIP", []string{"nope"}, `"a"`, `unknown source "nope"`},
		{"audience", "!!!", nil, `"a"`, "no letter or digit"},
		{"audience", "VIP", nil, "\"a\"\n\"\"\n", "line 2: userId is empty; nothing was changed"},
		{"trait", "Score", nil, `{"userId":"a"}`, "line 1: value is required"},
	} {
		_, err := adm.Sync(ctx, tt.kind, tt.name, tt.sources, strings.NewReader(tt.list))
		var ae *serve.AdminError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tt.want) {
			t.Errorf("%s %q %v: %v, want 400 %q", tt.kind, tt.name, tt.sources, err, tt.want)
		}
	}
	if n := len(deliveries(t, h, store.Filter{})); n != 0 {
		t.Errorf("refused syncs queued %d deliveries", n)
	}
	// A name with a slash survives the path.
	rep, err := adm.Sync(ctx, "audience", "EU/VIP", nil, strings.NewReader(`"a"`))
	if err != nil || rep.Name != "EU/VIP" || rep.Trait != "eu_vip" || !rep.First {
		t.Errorf("EU/VIP: %+v, %v", rep, err)
	}
}
