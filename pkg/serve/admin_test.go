package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/go-cmp/cmp"
)

const adminToken = "adm_t0ken_0123456789"

// adminPolicy is the retry schedule of the admin tests' service: a failed
// delivery waits an hour, on the test's clock, for its retry, so none is
// due before the test moves the clock past it.
var adminPolicy = webhook.Policy{Initial: time.Hour, Max: time.Hour, Jitter: -1}

// The admin API's own tests are in pkg/admin; these follow its deletions
// and syncs through the service to the webhooks.

// startAdmin runs a service with the admin API on (unless token is ""):
// sources "web" and "app" forward to their own hooks, "quiet" has no
// webhooks. Its clock is c, its retry policy adminPolicy.
func startAdmin(t *testing.T, c *webhooktest.Clock, token string, web, app *webhooktest.Receiver) (*harness, *admin.Client) {
	t.Helper()
	return startAdminOpts(t, serve.Options{Now: c.Now}, token, web, app)
}

// startAdminOpts is startAdmin with options (Now is required); a Policy
// without Initial is adminPolicy, and a zero Poll is 5ms.
func startAdminOpts(t *testing.T, opts serve.Options, token string, web, app *webhooktest.Receiver) (*harness, *admin.Client) {
	t.Helper()
	dest := func(h *webhooktest.Receiver) serve.Webhooks {
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
	return h, &admin.Client{Endpoint: h.url, Token: token}
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
	t.Parallel()
	c := webhooktest.NewClock(t0)
	web, app := newHook(t, 500), newHook(t) // web's first delivery fails and waits for a retry
	// One delivery at a time per source, the earliest due first: see the end.
	h, adm := startAdminOpts(t, serve.Options{Now: c.Now, PerSource: 1}, adminToken, web, app)
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

	c.Add(time.Minute)
	d, err := adm.CreateDeletion(ctx, "u1", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the delete notifications delivered", func() bool {
		return len(deliveries(t, h, store.Filter{Status: store.Delivered})) == 3 // a1 and the two deletes
	})
	want := `{"type":"delete","userId":"u1","timestamp":"2024-05-01T12:01:00.000Z"}`
	if got := web.Requests(); len(got) != 2 || string(got[1].Body) != want {
		t.Errorf("web got %d requests, the last %s; want w1's failed attempt, then %s", len(got), got[len(got)-1].Body, want)
	}
	if got := app.Requests(); len(got) != 2 || string(got[1].Body) != want || got[1].Header.Get("X-Signature") != sign(got[1].Body) {
		t.Errorf("app got %d requests, the last %s (sig %s); want a1, then %s signed", len(got), got[len(got)-1].Body, got[len(got)-1].Header.Get("X-Signature"), want)
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
	wantD := &admin.Deletion{ID: d.ID, UserID: "u1", CreatedAt: "2024-05-01T12:01:00.000Z", Done: true, Sources: []admin.DeletionSource{
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
	c.Set(t0.Add(2 * time.Hour))
	if code, body := h.post(t, "/v1/track", "wk_web", `{"userId":"u3","event":"D","messageId":"w2"}`); code != 200 {
		t.Fatalf("track: %d %s", code, body)
	}
	waitFor(t, "w2 delivered", func() bool {
		return len(deliveries(t, h, store.Filter{Source: "web", Status: store.Delivered})) == 2 // the delete and w2
	})
	if got := web.Requests(); len(got) != 3 || !strings.Contains(string(got[2].Body), `"messageId":"w2"`) {
		t.Errorf("web got %d requests; want 3: w1's failed attempt, the delete, w2", len(got))
	}
	if got, err := h.srv.Store().Get(ctx, w1.ID); err != nil || got.Status != store.Cancelled || got.Attempts != 1 {
		t.Errorf("w1 = %+v, %v; want cancelled after its one attempt", got, err)
	}
}

// identifies parses the identify bodies h received since n into
// "user=value" of trait, checking the fixed fields of each.
func identifies(t *testing.T, h *webhooktest.Receiver, n int, trait, class string) []string {
	t.Helper()
	var out []string
	for _, r := range h.Requests()[n:] {
		var m struct {
			Type, UserID, MessageID, Timestamp string
			Version                            int
			Traits                             map[string]json.RawMessage
			Context                            struct{ Personas map[string]string }
		}
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("%s: %v", r.Body, err)
		}
		if m.Type != "identify" || m.Version != 1 || m.MessageID == "" || m.Timestamp != "2024-05-01T12:00:00.000Z" ||
			len(m.Traits) != 1 || m.Context.Personas["computation_key"] != trait || m.Context.Personas["computation_class"] != class ||
			r.Header.Get("X-Signature") != sign(r.Body) {
			t.Errorf("unexpected identify %s", r.Body)
		}
		out = append(out, m.UserID+"="+string(m.Traits[trait]))
	}
	slices.Sort(out)
	return out
}

func TestAudienceSyncFirstDiffUnchanged(t *testing.T) {
	t.Parallel()
	web, app := newHook(t), newHook(t)
	h, adm := startAdmin(t, webhooktest.NewClock(t0), adminToken, web, app)
	ctx := context.Background()
	const name = "High Value Users"
	// pkg/admin checks the reports; here, what reaches the webhooks.
	steps := []struct {
		list string
		sent []string
	}{
		{"\"a\"\n\"b\"\n{\"userId\":\"c\"}\n", []string{"a=true", "b=true", "c=true"}},
		{`["b","c","d"]`, []string{"a=false", "d=true"}},
		{`["d","c","b"]`, nil},
	}
	seen := 0
	for i, st := range steps {
		rep, err := adm.Sync(ctx, "audience", name, nil, strings.NewReader(st.list))
		if err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		if rep.Messages != 2*len(st.sent) {
			t.Errorf("sync %d: %d messages, want %d for each of web and app", i, rep.Messages, len(st.sent))
		}
		total := seen + len(st.sent)
		waitFor(t, "identifies", func() bool { return len(web.Requests()) == total && len(app.Requests()) == total })
		for _, hk := range []*webhooktest.Receiver{web, app} {
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
	t.Parallel()
	web, app := newHook(t), newHook(t)
	_, adm := startAdmin(t, webhooktest.NewClock(t0), adminToken, web, app)
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
		waitFor(t, "identifies", func() bool { return len(web.Requests()) == total })
		if diff := cmp.Diff(st.sent, identifies(t, web, seen, "lifetime_value", "computed_trait")); diff != "" {
			t.Errorf("sync %d identifies mismatch (-want +got):\n%s", i, diff)
		}
		seen = total
	}
	if n := len(app.Requests()); n != 0 {
		t.Errorf("app got %d requests; --source web should leave it out", n)
	}
}

// Wrong admin tokens at the admin API are counted in /metrics, by reason,
// and logged without the token; after 5, the address is refused (429)
// until the lock-out ends on the service's clock.
func TestAdminAuthFailuresInMetrics(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	var logs syncbuf.Buffer
	h, good := startAdminOpts(t, serve.Options{Now: c.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, adminToken, newHook(t), newHook(t))
	failures := func() (wrong, limited float64) {
		t.Helper()
		mf := scrape(t, h.url)["evfwd_admin_auth_failures_total"]
		if mf == nil {
			t.Fatal("no evfwd_admin_auth_failures_total in /metrics")
		}
		for _, m := range mf.GetMetric() {
			switch m.GetLabel()[0].GetValue() {
			case admin.AuthWrongToken:
				wrong = m.GetCounter().GetValue()
			case admin.AuthRateLimited:
				limited = m.GetCounter().GetValue()
			}
		}
		return wrong, limited
	}
	if w, l := failures(); w != 0 || l != 0 {
		t.Errorf("before any request: %v wrong, %v refused; want both series at 0", w, l)
	}
	ctx := context.Background()
	const guess = "not-the-token-SENTINEL"
	bad := &admin.Client{Endpoint: h.url, Token: guess}
	for i := 1; i <= 6; i++ {
		_, err := bad.Deletion(ctx, "x")
		var ae *admin.Error
		if want := map[bool]int{true: 403, false: 429}[i <= 5]; !errors.As(err, &ae) || ae.Status != want {
			t.Errorf("request %d with a wrong token: %v, want %d", i, err, want)
		}
	}
	_, err := good.Deletion(ctx, "x")
	var ae *admin.Error
	if !errors.As(err, &ae) || !ae.RateLimited() || ae.RetryAfter != time.Second {
		t.Errorf("the right token while locked out: %v, want 429 with Retry-After 1", err)
	}
	if w, l := failures(); w != 5 || l != 2 {
		t.Errorf("after 5 wrong tokens and two 429s: %v wrong, %v refused", w, l)
	}
	c.Add(time.Second)
	if _, err := good.Deletion(ctx, "x"); !errors.As(err, &ae) || ae.Status != 404 {
		t.Errorf("the right token after the lock-out: %v, want 404", err)
	}
	out := logs.String()
	if strings.Count(out, `msg="admin API: wrong admin token"`) != 5 || strings.Count(out, "too many wrong admin tokens") != 1 ||
		strings.Contains(out, guess) || strings.Contains(out, adminToken) {
		t.Errorf("log of the refused tokens (5 lines, one lock-out, no token):\n%s", out)
	}
}
