package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// TestDeletionLeavesNoByteInStore is the marker test of a deletion through
// the whole service: events of one user carrying a marker (small ones and
// ones over 4 KB, hundreds of them) go through the collection API into
// three sources beside other users' events, some are delivered and the
// rest wait for a retry, and once POST /admin/v1/deletions answers no file
// in the store's directory holds the marker, while the other users' marker
// is still there. A userId sent with bytes that are not UTF-8 is deleted
// by its U+FFFD form, the only one a JSON request can name.
func TestDeletionLeavesNoByteInStore(t *testing.T) {
	t.Parallel()
	c := webhooktest.NewClock(t0)
	// web delivers its first 40 messages, then every attempt fails and
	// waits for a retry that the stopped clock never makes due.
	web := newHook(t, append(repeat(200, 40), repeat(500, 10_000)...)...)
	app := newHook(t, repeat(500, 10_000)...)
	dir := t.TempDir()
	dest := func(h *webhooktest.Receiver) serve.Webhooks {
		return serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: h.URL}}}}
	}
	h := run(t, serve.Config{
		Addr:  "127.0.0.1:0",
		Store: "sqlite://" + filepath.Join(dir, "evfwd.db"),
		Sources: []serve.Source{
			{Name: "web", WriteKey: "wk_web", Webhooks: dest(web)},
			{Name: "app", WriteKey: "wk_app", Webhooks: dest(app)},
			{Name: "quiet", WriteKey: "wk_quiet"},
		},
		AdminToken: adminToken,
	}, serve.Options{Now: c.Now, Poll: 5 * time.Millisecond,
		// Every message to a failing endpoint makes its first attempt, so
		// that each waits for a retry rather than for a probe.
		Breaker: forwarder.BreakerConfig{Disabled: true}})
	adm := &admin.Client{Endpoint: h.url, Token: adminToken}
	ctx := context.Background()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	gone := fmt.Sprintf("GONEMARK%08x", rng.Uint32())
	kept := fmt.Sprintf("KEPTMARK%08x", rng.Uint32())
	bad := fmt.Sprintf("BADUMARK%08x", rng.Uint32())
	// note is random text of n bytes (nothing compresses it away) with
	// marker every 700 bytes.
	note := func(marker string, n int) string {
		const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		var b strings.Builder
		for i := range n {
			if i%700 == 0 {
				b.WriteString(marker)
			}
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	keys := []string{"wk_web", "wk_app", "wk_quiet"}
	sent := map[string]int{}
	var batches [3][]string
	flush := func(i int) {
		if len(batches[i]) == 0 {
			return
		}
		if code, body := h.post(t, "/v1/batch", keys[i], `{"batch":[`+strings.Join(batches[i], ",")+`]}`); code != 200 {
			t.Fatalf("batch: %d %s", code, body)
		}
		batches[i] = batches[i][:0]
	}
	for i := range 450 {
		size := 150 + rng.IntN(300)
		if i%9 == 0 {
			size = 4500 + rng.IntN(6000)
		}
		src := i % 3
		batches[src] = append(batches[src], fmt.Sprintf(`{"type":"track","userId":"doomed","event":"E","messageId":"d%d","properties":{"note":%q}}`, i, note(gone, size)))
		sent[[]string{"web", "app", "quiet"}[src]]++
		batches[(i+1)%3] = append(batches[(i+1)%3], fmt.Sprintf(`{"type":"track","userId":"keeper%d","event":"E","messageId":"k%d","properties":{"note":%q}}`, i%5, i, note(kept, size)))
		if i%20 == 19 {
			flush(0)
			flush(1)
			flush(2)
		}
	}
	flush(0)
	flush(1)
	flush(2)
	if code, body := h.post(t, "/v1/track", "wk_web", "{\"userId\":\"bad\xff\",\"event\":\"E\",\"properties\":{\"note\":\""+note(bad, 5000)+"\"}}"); code != 200 {
		t.Fatalf("track with invalid UTF-8: %d %s", code, body)
	}
	waitFor(t, "every delivery's first attempt", func() bool {
		for _, d := range deliveries(t, h, store.Filter{Status: store.Pending}) {
			if d.Attempts == 0 {
				return false
			}
		}
		return true
	})
	if n := len(deliveries(t, h, store.Filter{Status: store.Delivered})); n != 40 {
		t.Fatalf("%d delivered, want 40", n)
	}
	scan := storetest.ScanDir(dir)
	if n := scan(t, []byte(gone)); len(n) == 0 {
		t.Fatal("the marker is in no file before the deletion: the scan does not see the bodies")
	}

	d, err := adm.CreateDeletion(ctx, "doomed", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range d.Sources {
		if src.Purged != sent[src.Source] {
			t.Errorf("%s: purged %d, want %d", src.Source, src.Purged, sent[src.Source])
		}
	}
	if found := scan(t, []byte(gone)); len(found) != 0 {
		t.Errorf("after the deletion answered the marker is still in %v", found)
	}
	if found := scan(t, []byte(kept)); len(found) == 0 {
		t.Error("the other users' marker is gone too")
	}

	d, err = adm.CreateDeletion(ctx, "bad\uFFFD", []string{"web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Sources) != 1 || d.Sources[0].Purged != 1 {
		t.Errorf("deletion of the U+FFFD form: %+v, want 1 purged", d.Sources)
	}
	if found := scan(t, []byte(bad)); len(found) != 0 {
		t.Errorf("the invalid-UTF-8 user's marker is still in %v", found)
	}
	if found := scan(t, []byte("bad\xff")); len(found) != 0 {
		t.Errorf("the raw invalid userId was stored: %v", found)
	}
	if !bytes.Contains([]byte(d.UserID), []byte("\uFFFD")) {
		t.Errorf("deletion userId %q", d.UserID)
	}
}
