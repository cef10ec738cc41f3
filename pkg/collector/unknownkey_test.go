package collector_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/google/go-cmp/cmp"
)

func TestMaskWriteKey(t *testing.T) {
	for in, want := range map[string]string{"": "", "wk_live_123": "****", "0123456789abcdef": "0123…ef", "wk_live_4f9a1c2e8b7d23": "wk_l…23"} {
		if got := collector.MaskWriteKey(in); got != want {
			t.Errorf("MaskWriteKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnknownWriteKeyReported: a write key no source has is reported to
// OnError, masked, with the page's origin and the client's address, from
// the settings request, Basic auth and a body's writeKey alike, at most
// once a minute per key on the handler's clock (issue 41: a page with a
// wrong key, and serve said nothing).
func TestUnknownWriteKeyReported(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var reported []string
	h, err := collector.New(collector.Config{
		Sources: []collector.Source{{Name: "site", WriteKey: siteKey, Kind: collector.KindWeb}},
		Store:   &memStore{},
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		},
		OnError: func(status int, err error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, fmt.Sprint(status, " ", err))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	const oldKey, otherKey = "wk_old_4f9a1c2e8b7d23", "wk_typo_0000000000ab"
	settings := func(key string) call {
		return call{method: http.MethodGet, path: "/v1/projects/" + key + "/settings", header: http.Header{"Origin": {pageFrom}}}
	}
	post := call{path: "/v1/t", body: `{"userId":"u","event":"E"}`, header: http.Header{"Origin": {pageFrom}, "Authorization": {basic(oldKey)}}}
	inBody := call{path: "/v1/batch", body: `{"writeKey":"` + oldKey + `","batch":[{"type":"track","userId":"u","event":"E"}]}`}
	for _, step := range []struct {
		c      call
		status int
		after  time.Duration
	}{
		{settings(oldKey), 404, 0},
		{post, 401, 10 * time.Second},
		{inBody, 401, 49 * time.Second}, // 59 s after the first: still quiet
		{settings(otherKey), 404, 0},    // another key is its own
		{post, 401, 2 * time.Second},    // a minute on: reported again
	} {
		advance(step.after)
		if resp, body := step.c.send(t, srv.URL); resp.StatusCode != step.status {
			t.Errorf("%s %s: %d %s, want %d", step.c.method, step.c.path, resp.StatusCode, body, step.status)
		}
	}
	const tail = " (reported once a minute per key)"
	want := []string{
		`404 unknown write key wk_o…23 from origin "https://www.example.com", client 127.0.0.1` + tail,
		`404 unknown write key wk_t…ab from origin "https://www.example.com", client 127.0.0.1` + tail,
		`401 unknown write key wk_o…23 from origin "https://www.example.com", client 127.0.0.1` + tail,
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, reported); diff != "" {
		t.Errorf("reported (-want +got)\n%s", diff)
	}
	for _, r := range reported {
		if strings.Contains(r, oldKey) || strings.Contains(r, otherKey) {
			t.Errorf("a key reported whole: %s", r)
		}
	}
}
