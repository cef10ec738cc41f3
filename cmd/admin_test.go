package cmd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/broadcast"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
)

const testAdminToken = "adm_secret_0123456789"

// startAdminServe runs serve in-process with the admin API on: source
// "web" forwards to a receiver that records the bodies, "quiet" has no
// webhooks. It returns serve's URL and the receiver.
func startAdminServe(t *testing.T) (string, *hookRecorder) {
	t.Helper()
	rcv := &hookRecorder{}
	hook := httptest.NewServer(rcv)
	t.Cleanup(hook.Close)
	cfg := serve.Config{
		Addr: "127.0.0.1:0", Store: "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"), AdminToken: testAdminToken,
		Sources: []serve.Source{
			{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{Endpoints: []webhook.Endpoint{{URL: hook.URL}}}}},
			{Name: "quiet", WriteKey: "wk_quiet"},
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := serve.New(ctx, cfg, serve.Options{Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv.URL(), rcv
}

// hookRecorder is a webhook endpoint that records the bodies it gets.
type hookRecorder struct {
	mu   sync.Mutex
	got  []string
	more broadcast.Signal // fires after each body
}

func (rc *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, string(b))
	rc.mu.Unlock()
	rc.more.Fire()
}

func (rc *hookRecorder) bodies() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.got...)
}

// wait returns once n bodies have come, woken by each one.
func (rc *hookRecorder) wait(t *testing.T, what string, n int) {
	t.Helper()
	limit := time.NewTimer(10 * time.Second)
	defer limit.Stop()
	for {
		next := rc.more.Next() // before the check: a body during it is not missed
		if len(rc.bodies()) == n {
			return
		}
		select {
		case <-next:
		case <-limit.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestDeleteCommand(t *testing.T) {
	url, rcv := startAdminServe(t)
	env := map[string]string{"EVFWD_ENDPOINT": url, "EVFWD_ADMIN_TOKEN": testAdminToken}

	r := execute(t, testFactory(t, "", false, env), "delete", "--user-id", "u_42")
	if r.Code != 0 || !strings.Contains(r.Stdout, "user u_42") || !strings.Contains(r.Stdout, "none (webhooks off)") {
		t.Fatalf("delete: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "SOURCE") || !strings.HasPrefix(lines[2], "quiet") || !strings.HasPrefix(lines[3], "web") {
		t.Errorf("table:\n%s", r.Stdout)
	}
	rcv.wait(t, "the delete webhook", 1)
	if got := rcv.bodies()[0]; !strings.HasPrefix(got, `{"type":"delete","userId":"u_42","timestamp":"`) {
		t.Errorf("webhook body %s", got)
	}

	r = execute(t, testFactory(t, "", false, env), "delete", "--user-id", "u_7", "--source", "quiet", "-o", "json")
	var d admin.Deletion
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &d) != nil || d.UserID != "u_7" || len(d.Sources) != 1 || d.Sources[0].Notified {
		t.Errorf("delete -o json: %+v (%+v)", r, d)
	}
}

func TestAdminCommandErrors(t *testing.T) {
	url, _ := startAdminServe(t)
	list := writeFile(t, "members.txt", "a\n")
	for _, tt := range []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stderr string
	}{
		{"no token", map[string]string{"EVFWD_ENDPOINT": url}, []string{"delete", "--user-id", "u"}, 2, "an admin token is required"},
		{"wrong token", map[string]string{"EVFWD_ENDPOINT": url, "EVFWD_ADMIN_TOKEN": "nope"}, []string{"delete", "--user-id", "u"}, 1,
			"the admin API refused the token (403 Forbidden: wrong admin token)"},
		{"wrong token flag", map[string]string{}, []string{"audience", "sync", "VIP", list, "--endpoint", url, "--admin-token", "x"}, 1, "refused the token"},
		{"no user", map[string]string{"EVFWD_ENDPOINT": url, "EVFWD_ADMIN_TOKEN": testAdminToken}, []string{"delete"}, 2, "--user-id is required"},
		{"unknown source", map[string]string{"EVFWD_ENDPOINT": url, "EVFWD_ADMIN_TOKEN": testAdminToken}, []string{"delete", "--user-id", "u", "--source", "nope"}, 2, `unknown source "nope"`},
		{"args", map[string]string{}, []string{"audience", "sync", "VIP"}, 2, "accepts 2 arg(s)"},
		{"missing file", map[string]string{"EVFWD_ADMIN_TOKEN": "x"}, []string{"trait", "sync", "X", "/nonexistent/f"}, 2, "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := execute(t, testFactory(t, "", false, tt.env), tt.args...)
			if r.Code != tt.code || !strings.Contains(r.Stderr, tt.stderr) || r.Stdout != "" {
				t.Errorf("got %+v, want exit %d and %q", r, tt.code, tt.stderr)
			}
		})
	}
}

// A 429 (too many wrong admin tokens from this address) is an error that
// says how long to wait, after one request: the commands do not retry it.
func TestAdminCommandsRateLimited(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"too many wrong admin tokens from this address: try again in 7s"}`+"\n")
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"EVFWD_ENDPOINT": srv.URL, "EVFWD_ADMIN_TOKEN": testAdminToken}
	list := writeFile(t, "members.txt", "a\n")
	scores := writeFile(t, "scores.ndjson", `{"userId":"a","value":1}`+"\n")
	for _, args := range [][]string{{"delete", "--user-id", "u"}, {"audience", "sync", "VIP", list}, {"trait", "sync", "Score", scores}} {
		requests.Store(0)
		r := execute(t, testFactory(t, "", false, env), args...)
		want := "admin API: too many wrong admin tokens from this address: try again in 7s; check --admin-token or EVFWD_ADMIN_TOKEN"
		if r.Code != 1 || !strings.Contains(r.Stderr, want) || r.Stdout != "" {
			t.Errorf("%v: %+v, want exit 1 and %q", args, r, want)
		}
		if n := requests.Load(); n != 1 {
			t.Errorf("%v: %d requests, want 1 (a 429 is not retried)", args, n)
		}
	}
}

func TestAudienceAndTraitSyncCommands(t *testing.T) {
	url, rcv := startAdminServe(t)
	env := map[string]string{"EVFWD_ENDPOINT": url, "EVFWD_ADMIN_TOKEN": testAdminToken}
	members := writeFile(t, "members.txt", "u1\n\"u2\"\n{\"userId\":\"u3\",\"plan\":\"pro\"}\n\n")
	r := execute(t, testFactory(t, "", false, env), "audience", "sync", "VIP-Users (EU)", members)
	want := "audience \"VIP-Users (EU)\" → trait vip_users_eu (first sync)\nadded 3, removed 0, unchanged 0; 3 identify messages queued for web\n"
	if r.Code != 0 || r.Stdout != want {
		t.Fatalf("first sync: %+v\nwant stdout %q", r, want)
	}
	rcv.wait(t, "3 identifies", 3)

	// From stdin, as JSON output: u1 left, u4 joined.
	r = execute(t, testFactory(t, "u2\nu3\nu4\n", false, env), "audience", "sync", "VIP-Users (EU)", "-", "-o", "json")
	var rep admin.SyncReport
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &rep) != nil || rep.Added != 1 || rep.Removed != 1 || rep.Unchanged != 2 || rep.First {
		t.Fatalf("second sync: %+v", r)
	}
	rcv.wait(t, "2 more identifies", 5)
	changed := strings.Join(rcv.bodies()[3:], "\n")
	if !strings.Contains(changed, `"userId":"u1","traits":{"vip_users_eu":false}`) || !strings.Contains(changed, `"userId":"u4","traits":{"vip_users_eu":true}`) {
		t.Errorf("identifies of the second sync:\n%s", changed)
	}

	bad := writeFile(t, "bad.txt", "u1\n{\"userId\":\"\"}\n")
	r = execute(t, testFactory(t, "", false, env), "audience", "sync", "VIP-Users (EU)", bad)
	if r.Code != 2 || !strings.Contains(r.Stderr, bad+": invalid list: line 2: userId is empty; nothing was changed") {
		t.Errorf("bad list: %+v", r)
	}

	scores := writeFile(t, "scores.ndjson", `{"userId":"u1","value":0.5}`+"\n"+`{"userId":"u2","value":0.9}`+"\n")
	r = execute(t, testFactory(t, "", false, env), "trait", "sync", "Churn Risk", scores)
	if r.Code != 0 || !strings.Contains(r.Stdout, "added 2, removed 0, changed 0, unchanged 0; 2 identify messages") {
		t.Fatalf("trait sync: %+v", r)
	}
	scores = writeFile(t, "scores2.ndjson", `{"userId":"u1","value":0.7}`+"\n"+`{"userId":"u2","value":0.9}`+"\n")
	r = execute(t, testFactory(t, "", false, env), "trait", "sync", "Churn Risk", scores)
	if r.Code != 0 || !strings.Contains(r.Stdout, "added 0, removed 0, changed 1, unchanged 1; 1 identify messages") {
		t.Fatalf("trait sync 2: %+v", r)
	}
	rcv.wait(t, "trait identifies", 8)
	// Deliveries run side by side, so the three identifies may arrive in any order.
	traits := strings.Join(rcv.bodies()[5:], "\n")
	for _, want := range []string{`"userId":"u1","traits":{"churn_risk":0.5}`, `"userId":"u2","traits":{"churn_risk":0.9}`, `"userId":"u1","traits":{"churn_risk":0.7}`} {
		if !strings.Contains(traits, want) {
			t.Errorf("identifies of the trait syncs lack %s:\n%s", want, traits)
		}
	}
}
