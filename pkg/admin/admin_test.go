package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/google/go-cmp/cmp"
)

// The handler alone, on a real SQLite store: what it answers, what it
// commits and which hooks it calls. pkg/serve's tests follow deletions and
// syncs on to the webhooks.

const token = "adm_t0ken"

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// sources are "web" and "app" with webhooks, "quiet" without.
var sources = []admin.Source{{Name: "web", Webhooks: true}, {Name: "app", Webhooks: true}, {Name: "quiet"}}

type api struct {
	h      *admin.Handler
	url    string
	store  *sqlite.Store
	mu     sync.Mutex
	queued []string // "source:n", as Queued heard them
}

// newAPI serves the admin API over a fresh store; tok "" turns it off.
func newAPI(t *testing.T, tok string) (*api, *admin.Client) {
	t.Helper()
	now := func() time.Time { return t0 }
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "evfwd.db"), sqlite.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := &api{store: st}
	a.h, err = admin.New(admin.Config{Token: tok, Store: st, Sources: sources, Now: now, Queued: func(source string, n int) {
		a.mu.Lock()
		a.queued = append(a.queued, source+":"+strings.Repeat("|", n))
		a.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.h)
	t.Cleanup(srv.Close)
	a.url = srv.URL
	return a, &admin.Client{Endpoint: srv.URL, Token: tok}
}

// heard returns what Queued heard since the last call, sorted.
func (a *api) heard() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := slices.Sorted(slices.Values(a.queued))
	a.queued = nil
	return out
}

func (a *api) deliveries(t *testing.T) []store.Delivery {
	t.Helper()
	ds, err := a.store.List(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func status(err error) int {
	var ae *admin.Error
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// post sends body with the token and returns the status and the answer.
func (a *api) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", a.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestNewNeedsAStore(t *testing.T) {
	if _, err := admin.New(admin.Config{Token: token}); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Errorf("New without a store: %v, want an error naming Store", err)
	}
}

func TestDisabledWithoutToken(t *testing.T) {
	a, _ := newAPI(t, "")
	for _, tok := range []string{"", "anything"} {
		c := &admin.Client{Endpoint: a.url, Token: tok}
		_, err := c.CreateDeletion(context.Background(), "u1", nil)
		var ae *admin.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || !strings.Contains(ae.Message, "admin API is disabled") ||
			!strings.Contains(ae.Message, admin.TokenEnv) {
			t.Errorf("token %q: %v, want 404 saying the admin API is disabled", tok, err)
		}
	}
}

// queueOnly is a store without the admin methods.
type queueOnly struct{ store.Store }

func TestOffOnStoreWithoutAdmin(t *testing.T) {
	h, err := admin.New(admin.Config{Token: token, Store: queueOnly{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, err = (&admin.Client{Endpoint: srv.URL, Token: token}).Deletion(context.Background(), "x")
	var ae *admin.Error
	if want := "admin API needs a store that supports it; this store (admin_test.queueOnly) does not"; !errors.As(err, &ae) ||
		ae.Status != http.StatusNotImplemented || ae.Message != want {
		t.Errorf("%v, want 501 %q", err, want)
	}
}

func TestAuth(t *testing.T) {
	a, good := newAPI(t, token)
	ctx := context.Background()
	for _, tt := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong", http.StatusForbidden}, {token + "x", http.StatusForbidden}} {
		c := &admin.Client{Endpoint: a.url, Token: tt.token}
		if _, err := c.CreateDeletion(ctx, "u1", nil); status(err) != tt.want {
			t.Errorf("deletion with token %q: %v, want %d", tt.token, err, tt.want)
		}
		if _, err := c.Sync(ctx, "audience", "VIP", nil, strings.NewReader(`"u1"`)); status(err) != tt.want {
			t.Errorf("sync with token %q: %v, want %d", tt.token, err, tt.want)
		}
	}
	// A bare request shows the challenge and a JSON error.
	resp, err := http.Post(a.url+"/admin/v1/deletions", "application/json", strings.NewReader(`{"userId":"u1"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" || !json.Valid(b) {
		t.Errorf("bare request: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), b)
	}
	if ds := a.deliveries(t); len(ds) != 0 || len(a.heard()) != 0 {
		t.Errorf("refused requests queued %d deliveries", len(ds))
	}
	if _, err := good.CreateDeletion(ctx, "u1", nil); err != nil {
		t.Errorf("right token: %v", err)
	}
	if _, err := good.Deletion(ctx, "nope"); status(err) != http.StatusNotFound {
		t.Errorf("unknown deletion: %v, want 404", err)
	}
	if code, body := a.post(t, "/admin/v1/nothing", ""); code != 404 || body != `{"error":"no admin endpoint POST /admin/v1/nothing"}`+"\n" {
		t.Errorf("unknown endpoint: %d %s", code, body)
	}
}

func TestDrainAnswers503(t *testing.T) {
	a, c := newAPI(t, token)
	a.h.Drain()
	if _, err := c.CreateDeletion(context.Background(), "u1", nil); status(err) != http.StatusServiceUnavailable {
		t.Errorf("after Drain: %v, want 503", err)
	}
}

func TestDeletionNarrowedAndInvalid(t *testing.T) {
	a, c := newAPI(t, token)
	ctx := context.Background()
	d, err := c.CreateDeletion(ctx, "u9", []string{"app", "quiet", "app"})
	if err != nil {
		t.Fatal(err)
	}
	want := &admin.Deletion{ID: d.ID, UserID: "u9", CreatedAt: "2024-05-01T12:00:00.000Z", Done: true, Sources: []admin.DeletionSource{
		{Source: "app", Notified: true, MessageID: d.ID, Delivery: d.Sources[0].Delivery, Status: store.Pending},
		{Source: "quiet"},
	}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("deletion mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"app:|"}, a.heard()); diff != "" {
		t.Errorf("queued mismatch (-want +got):\n%s", diff)
	}
	ds := a.deliveries(t)
	if len(ds) != 1 || ds[0].Source != "app" || ds[0].Type != "delete" || ds[0].MessageID != d.ID {
		t.Errorf("deliveries = %+v, want app's delete notification", ds)
	}
	got, err := c.Deletion(ctx, d.ID)
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("GET the deletion: %v, mismatch (-want +got):\n%s", err, diff)
	}
	for _, tt := range []struct{ body, want string }{
		{`{"sources":["web"]}`, "userId is required"},
		{`{"userId":"u","sources":["nope"]}`, `unknown source`},
		{`{"user":"u"}`, "unknown field"},
		{`[`, "invalid request body"},
	} {
		if code, body := a.post(t, "/admin/v1/deletions", tt.body); code != 400 || !strings.Contains(body, tt.want) {
			t.Errorf("%s: %d %s, want 400 %q", tt.body, code, body, tt.want)
		}
	}
}

// A delete message the server cannot build is its own failure: 500, not
// 400, and nothing is stored.
func TestDeletionMessageFailureIs500(t *testing.T) {
	a, _ := newAPI(t, token)
	// Past year 9999 the timestamp has no wire form, so queued.New fails.
	late := func() time.Time { return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }
	h, err := admin.New(admin.Config{Token: token, Store: a.store, Sources: sources, Now: late})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, err = (&admin.Client{Endpoint: srv.URL, Token: token}).CreateDeletion(context.Background(), "u1", nil)
	if want := "create deletion failed"; status(err) != http.StatusInternalServerError || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want 500 %q", err, want)
	}
	if ds := a.deliveries(t); len(ds) > 0 {
		t.Errorf("stored %+v, want nothing", ds)
	}
}

func TestAudienceSyncReports(t *testing.T) {
	a, c := newAPI(t, token)
	ctx := context.Background()
	const name = "High Value Users"
	for i, st := range []struct {
		list  string
		want  admin.SyncReport
		heard []string
	}{
		{"\"a\"\n\"b\"\n{\"userId\":\"c\"}\n", admin.SyncReport{First: true, Added: 3, Messages: 6}, []string{"app:|||", "web:|||"}},
		{`["b","c","d"]`, admin.SyncReport{Added: 1, Removed: 1, Unchanged: 2, Messages: 4}, []string{"app:||", "web:||"}},
		{`["d","c","b"]`, admin.SyncReport{Unchanged: 3}, nil},
	} {
		rep, err := c.Sync(ctx, "audience", name, nil, strings.NewReader(st.list))
		if err != nil {
			t.Fatalf("sync %d: %v", i, err)
		}
		st.want.Kind, st.want.Name, st.want.Trait, st.want.Sources = store.KindAudience, name, "high_value_users", []string{"web", "app"}
		rep.Millis = 0
		if diff := cmp.Diff(&st.want, rep); diff != "" {
			t.Errorf("sync %d report mismatch (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(st.heard, a.heard()); diff != "" {
			t.Errorf("sync %d queued mismatch (-want +got):\n%s", i, diff)
		}
	}
	if n := len(a.deliveries(t)); n != 10 {
		t.Errorf("%d deliveries, want 10", n)
	}
}

func TestSyncRefusals(t *testing.T) {
	a, c := newAPI(t, token)
	ctx := context.Background()
	for _, tt := range []struct {
		kind    store.SyncKind
		name    string
		sources []string
		list    string
		want    string
	}{
		{"audience", "VIP", []string{"quiet"}, `"a"`, `source "quiet" does not have webhooks enabled`},
		{"audience", "VIP", []string{"nope"}, `"a"`, `unknown source "nope"`},
		{"audience", "!!!", nil, `"a"`, "no letter or digit"},
		{"audience", "VIP", nil, "\"a\"\n\"\"\n", "line 2: userId is empty; nothing was changed"},
		{"trait", "Score", nil, `{"userId":"a"}`, "line 1: value is required"},
	} {
		_, err := c.Sync(ctx, tt.kind, tt.name, tt.sources, strings.NewReader(tt.list))
		var ae *admin.Error
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tt.want) {
			t.Errorf("%s %q %v: %v, want 400 %q", tt.kind, tt.name, tt.sources, err, tt.want)
		}
	}
	if n := len(a.deliveries(t)); n != 0 || len(a.heard()) != 0 {
		t.Errorf("refused syncs queued %d deliveries", n)
	}
	// A kind the API does not have is refused before any request.
	for _, kind := range []store.SyncKind{"traits", "Audience", ""} {
		noCall := &admin.Client{Endpoint: "http://127.0.0.1:1", Token: token, HTTPClient: &http.Client{Transport: refuse{t}}}
		if rep, err := noCall.Sync(ctx, kind, "VIP", nil, strings.NewReader(`"a"`)); rep != nil || err == nil || !strings.Contains(err.Error(), "unknown sync kind") {
			t.Errorf("kind %q: %v, %v; want an unknown sync kind error", kind, rep, err)
		}
	}
	// A name with a slash survives the path.
	rep, err := c.Sync(ctx, "audience", "EU/VIP", nil, strings.NewReader(`"a"`))
	if err != nil || rep.Name != "EU/VIP" || rep.Trait != "eu_vip" || !rep.First {
		t.Errorf("EU/VIP: %+v, %v", rep, err)
	}
}

// refuse is a transport that fails the test if a request is made.
type refuse struct{ t *testing.T }

func (r refuse) RoundTrip(req *http.Request) (*http.Response, error) {
	r.t.Errorf("unexpected request %s %s", req.Method, req.URL)
	return nil, errors.New("refused")
}
