package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// The rate limit of wrong tokens, on an injected clock: the handler is
// called directly, so that each request can come from the address the
// test names.

// syncLog is a log that handlers write to concurrently.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type limited struct {
	h     *admin.Handler
	clock *webhooktest.Clock
	log   syncLog
	mu    sync.Mutex
	heard map[string]int // AuthFailure's reasons
}

func newLimited(t *testing.T) *limited {
	t.Helper()
	l := &limited{clock: webhooktest.NewClock(t0), heard: map[string]int{}}
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "evfwd.db"), sqlite.Options{Now: l.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l.h, err = admin.New(admin.Config{
		Token: token, Store: st, Sources: sources, Now: l.clock.Now,
		Logger:      slog.New(slog.NewTextHandler(&l.log, nil)),
		AuthFailure: func(reason string) { l.mu.Lock(); l.heard[reason]++; l.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// get asks for a deletion that does not exist from remote with tok: 404
// says the token was taken.
func (l *limited) get(t *testing.T, remote, tok string) (code int, retry string) {
	t.Helper()
	r := httptest.NewRequest("GET", "/admin/v1/deletions/nope", nil)
	r.RemoteAddr = remote
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	w := httptest.NewRecorder()
	l.h.ServeHTTP(w, r)
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("%d answer is not a JSON error: %q (%v)", w.Code, w.Body, err)
	}
	if want := "too many wrong admin tokens from this address: try again in " + w.Header().Get("Retry-After") + "s"; w.Code == http.StatusTooManyRequests && e.Error != want {
		t.Errorf("429 says %q, want %q", e.Error, want)
	}
	return w.Code, w.Header().Get("Retry-After")
}

func (l *limited) reasons() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return map[string]int{admin.AuthWrongToken: l.heard[admin.AuthWrongToken], admin.AuthRateLimited: l.heard[admin.AuthRateLimited]}
}

func TestRateLimitLocksAfterFiveWrongTokens(t *testing.T) {
	l := newLimited(t)
	const a, other = "192.0.2.1:4000", "192.0.2.2:5000"
	n := 0
	wrong := func(addr string) (int, string) { n++; return l.get(t, addr, fmt.Sprintf("GUESS-%d-sentinel", n)) }
	expect := func(what string, code int, retry string, want int, wantRetry string) {
		t.Helper()
		if code != want || retry != wantRetry {
			t.Errorf("%s: %d, Retry-After %q; want %d, %q", what, code, retry, want, wantRetry)
		}
	}
	for i := 1; i <= 5; i++ {
		code, retry := wrong(a)
		expect(fmt.Sprintf("wrong token %d", i), code, retry, 403, "")
	}
	code, retry := wrong(a)
	expect("a 6th wrong token at once", code, retry, 429, "1")
	code, retry = l.get(t, a, token)
	expect("the right token while locked out", code, retry, 429, "1")
	code, retry = l.get(t, "192.0.2.1:4001", token)
	expect("the right token from another port of the address", code, retry, 429, "1")
	code, retry = l.get(t, a, "")
	expect("no token while locked out", code, retry, 401, "")
	code, retry = l.get(t, other, token)
	expect("the right token from another address", code, retry, 404, "")
	code, retry = wrong(other)
	expect("a wrong token from another address", code, retry, 403, "")

	// Growing delays: each failure after the lock-out doubles it.
	l.clock.Add(time.Second)
	code, retry = wrong(a)
	expect("a wrong token once the lock-out is over", code, retry, 403, "")
	code, retry = wrong(a)
	expect("at once after the 6th failure", code, retry, 429, "2")
	l.clock.Add(1500 * time.Millisecond)
	code, retry = l.get(t, a, token)
	expect("the right token 1.5 s later", code, retry, 429, "1") // rounded up
	l.clock.Add(500 * time.Millisecond)
	for i, want := range []string{"4", "8", "16", "32", "64", "128", "256", "300", "300"} {
		wrong(a)
		code, retry = wrong(a)
		expect(fmt.Sprintf("after failure %d", 7+i), code, retry, 429, want)
		l.clock.Add(5 * time.Minute)
	}

	// A success forgives: 5 more wrong tokens before the next lock-out.
	code, retry = l.get(t, a, token)
	expect("the right token after the lock-out", code, retry, 404, "")
	for i := 1; i <= 5; i++ {
		code, retry = wrong(a)
		expect(fmt.Sprintf("after a success, wrong token %d", i), code, retry, 403, "")
	}
	code, retry = wrong(a)
	expect("after a success, a 6th", code, retry, 429, "1")

	// A day without failures forgets them.
	l.clock.Add(24 * time.Hour)
	for i := 1; i <= 5; i++ {
		code, retry = wrong(a)
		expect(fmt.Sprintf("a day later, wrong token %d", i), code, retry, 403, "")
	}

	// Failures are counted and logged, never with the token.
	got := l.reasons()
	if want := map[string]int{admin.AuthWrongToken: 5 + 1 + 1 + 9 + 5 + 5, admin.AuthRateLimited: 1 + 2 + 1 + 1 + 9 + 1}; got[admin.AuthWrongToken] != want[admin.AuthWrongToken] ||
		got[admin.AuthRateLimited] != want[admin.AuthRateLimited] {
		t.Errorf("AuthFailure heard %v, want %v", got, want)
	}
	out := l.log.String()
	if c := strings.Count(out, `msg="admin API: wrong admin token" remote=`); c != got[admin.AuthWrongToken] {
		t.Errorf("%d log lines of a wrong token, want %d:\n%s", c, got[admin.AuthWrongToken], out)
	}
	if c := strings.Count(out, "too many wrong admin tokens from this address"); c != 12 {
		// Once per lock-out that refused a request: the first, its
		// successor, the 9 of the schedule, the one after a success.
		t.Errorf("%d log lines of a refused address, want 12 (one per lock-out):\n%s", c, out)
	}
	if strings.Contains(out, "GUESS-") || strings.Contains(out, token) {
		t.Errorf("a token in the log:\n%s", out)
	}
	if !strings.Contains(out, "failures=5 lockedFor=1s") || !strings.Contains(out, "lockedFor=5m0s") {
		t.Errorf("the log does not say how long an address is locked out:\n%s", out)
	}
}

// The Client reports a 429 as an error that says how long to wait, after
// a single request: it does not retry.
func TestClientRateLimited(t *testing.T) {
	l := newLimited(t)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		l.h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	bad := &admin.Client{Endpoint: srv.URL, Token: "not-the-token"}
	for range 5 {
		if _, err := bad.CreateDeletion(ctx, "u1", nil); status(err) != http.StatusForbidden {
			t.Fatalf("wrong token: %v, want 403", err)
		}
	}
	requests.Store(0)
	good := &admin.Client{Endpoint: srv.URL, Token: token}
	for _, call := range []func() error{
		func() error { _, err := good.CreateDeletion(ctx, "u1", nil); return err },
		func() error { _, err := good.Deletion(ctx, "x"); return err },
		func() error { _, err := good.Sync(ctx, "audience", "VIP", nil, strings.NewReader(`"u1"`)); return err },
	} {
		err := call()
		var ae *admin.Error
		if !errors.As(err, &ae) || !ae.RateLimited() || ae.Auth() || ae.RetryAfter != time.Second ||
			err.Error() != "too many wrong admin tokens from this address: try again in 1s" {
			t.Errorf("locked out: %#v (%v); want a 429 saying to try again in 1s", ae, err)
		}
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests for 3 calls: a 429 was retried", n)
	}
	l.clock.Add(time.Second)
	if _, err := good.Deletion(ctx, "x"); status(err) != http.StatusNotFound {
		t.Errorf("after the lock-out: %v, want 404", err)
	}
}
