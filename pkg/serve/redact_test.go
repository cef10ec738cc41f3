package serve_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// strongToken is an admin token long enough for Validate.
const strongToken = "tok_0123456789abcdef0123456789"

// A token in an endpoint URL's query is a secret (issue 29, finding 3):
// the endpoint gets it, and nothing serve shows does: not /metrics, not
// the logs at debug level, not the inspector's session, deliveries, stats
// and event stream, not the store's attempt records.
func TestURLCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	const sentinel = "SENTINEL7f3a"
	var mu sync.Mutex
	var queries []string
	refuse := newHook(t, 400) // final: the next URL is tried
	named := newHook(t, 400)
	wrap := func(h *webhooktest.Receiver) {
		next := h.Config.Handler
		h.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			queries = append(queries, r.URL.RawQuery)
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
	wrap(refuse)
	wrap(named)
	logs := &syncbuf.Buffer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := webhooktest.NewClock(t0)
	cfg := serve.Config{
		Addr:       "127.0.0.1:0",
		Store:      "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		AdminToken: strongToken,
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{
			SharedSecret: secret,
			Endpoints: []webhook.Endpoint{
				{URL: refuse.URL + "/in?token=" + sentinel + "&v=2"},
				{URL: named.URL + "/hook/" + "?key=" + sentinel, Name: "crm"},
			},
		}}}},
	}
	h := run(t, cfg, serve.Options{
		Now: c.Now, Poll: 5 * time.Millisecond, Policy: adminPolicy, UIListener: ln,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	ui := strings.TrimSuffix(h.srv.UIURL(), "/")
	get := func(url string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+strongToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
		}
		return string(b)
	}

	// The event stream, open before anything is sent.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ui+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+strongToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events := &syncbuf.Buffer{}
	streamed := make(chan struct{})
	go func() { defer close(streamed); io.Copy(events, stream.Body) }()

	if code, out := h.post(t, "/v1/track", "wk_web", `{"userId":"u","event":"E","messageId":"m1"}`); code != 200 {
		t.Fatalf("track: %d %s", code, out)
	}
	waitFor(t, "one failed", func() bool { return len(deliveries(t, h, store.Filter{Status: store.Failed})) == 1 })
	waitFor(t, "the attempts streamed", func() bool { return strings.Count(events.String(), "event: attempt") >= 2 })
	cancel()
	<-streamed

	mu.Lock()
	if len(queries) < 2 || !strings.Contains(queries[0], "token="+sentinel) || !strings.Contains(queries[1], "key="+sentinel) {
		t.Errorf("the endpoints got %q: the URL itself is what is sent", queries)
	}
	mu.Unlock()

	d := deliveries(t, h, store.Filter{Status: store.Failed})[0]
	detail, err := h.srv.Store().Get(context.Background(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, a := range detail.Records {
		recorded = append(recorded, a.URL)
	}
	seen := map[string]string{
		"metrics":           get(h.url + "/metrics"),
		"logs":              logs.String(),
		"inspector session": get(ui + "/api/session"),
		"inspector list":    get(ui + "/api/deliveries?status=failed"),
		"inspector detail":  get(ui + fmt.Sprintf("/api/deliveries/%d", d.ID)),
		"inspector stats":   get(ui + "/api/stats"),
		"inspector events":  events.String(),
		"store attempts":    strings.Join(recorded, "\n") + "\n" + detail.LastError,
		"store endpoint state": func() string {
			eps, err := h.srv.Store().Endpoints(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(eps)
		}(),
	}
	for where, text := range seen {
		if strings.Contains(text, sentinel) {
			t.Errorf("%s shows the URL's token:\n%s", where, text)
		}
	}
	want := refuse.URL + "/in?token=****" // then &v=****, escaped in JSON
	for _, where := range []string{"metrics", "inspector session", "inspector detail", "inspector stats", "store attempts"} {
		if !strings.Contains(seen[where], want) || !strings.Contains(seen[where], "crm") {
			t.Errorf("%s does not name the endpoints as %s and crm:\n%.2000s", where, want, seen[where])
		}
	}
}
