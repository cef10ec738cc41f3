package cmd

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/google/go-cmp/cmp"
)

// Analytics.js in Chromium through a source with three destinations (the
// issue's end-to-end test): A takes one event by its subscription, B gets
// every message mapped, C gets every message in batches. It needs
// Segment's subscription and mapping engines (pkg/fql, pkg/mapping) and
// stores that lease by destination.

// rawHook is a webhook endpoint that keeps every request as it came, and
// when.
type rawHook struct {
	*httptest.Server
	mu  sync.Mutex
	got []rawRequest
}

type rawRequest struct {
	header http.Header
	body   []byte
	at     time.Time
}

func startRawHook(t *testing.T) *rawHook {
	t.Helper()
	h := &rawHook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.got = append(h.got, rawRequest{header: r.Header.Clone(), body: body, at: time.Now()})
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *rawHook) requests() []rawRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// signedBy says whether r's X-Signature is the HMAC-SHA1 of its body
// with secret.
func (r rawRequest) signedBy(secret string) bool {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(r.body)
	got, err := hex.DecodeString(r.header.Get("X-Signature"))
	return err == nil && hmac.Equal(got, mac.Sum(nil))
}

// ajsMapping is destination B's mapping (Segment's mapping-kit).
const ajsMapping = `{"event_name": {"@path": "$.event"}, "user": {"@path": "$.anonymousId"}, "props": {"@path": "$.properties"}}`

// ajsThreeCalls is the page's script: load Analytics.js with its settings
// from serve, then page, two tracks and an identify, each in turn.
const ajsThreeCalls = `(async () => {
	const [analytics] = await AnalyticsNext.AnalyticsBrowser.load({writeKey: %s, cdnURL: %s});
	const out = [];
	const call = async (name, p) => { const ctx = await p; out.push({name, messageId: ctx.event.messageId}); };
	await call('page', analytics.page());
	await call('order', analytics.track('Order Completed', {total: 129.95}));
	await call('viewed', analytics.track('Viewed'));
	await call('identify', analytics.identify('u_1042', {plan: 'pro'}));
	return out;
})()`

func TestBrowserAnalyticsJSThreeDestinations(t *testing.T) {
	t.Parallel()
	pkg, _ := analyticsNext(t)
	a, b, c := startRawHook(t), startRawHook(t), startRawHook(t)
	to := func(h *rawHook) []webhook.Endpoint { return []webhook.Endpoint{{URL: h.URL}} }
	s := startAJSServeWith(t, []serve.Source{{
		Name: "shop", WriteKey: ajsWriteKey, Kind: "web",
		Destinations: []destination.Config{
			{Name: "orders", Endpoints: to(a), SharedSecret: ajsSecret, Subscribe: `type = "track" and event = "Order Completed"`},
			{Name: "mapped", Endpoints: to(b), SharedSecret: ajsSecret, Mapping: []byte(ajsMapping)},
			{Name: "batched", Endpoints: to(c), SharedSecret: ajsSecret, Batch: destination.BatchConfig{Size: 10}},
		},
	}})
	ps := startPageServer(t, pkg)
	p := newPage(t)
	p.do("open the shop page", chromedp.Navigate(ps.URL+ajsPagePath))
	p.waitFor("Analytics.js to load", `window.AnalyticsNext && AnalyticsNext.AnalyticsBrowser`)
	calls := eval[[]ajsCall](p, fmt.Sprintf(ajsThreeCalls, jsString(ajsWriteKey), jsString(s.url)))
	ids := map[string]string{} // call → messageId
	var order []string         // messageIds, as called
	for _, c := range calls {
		ids[c.Name] = c.MessageID
		order = append(order, c.MessageID)
	}
	if len(calls) != 4 || len(ids) != 4 {
		t.Fatalf("the page made the calls %+v, want 4 with their own names", calls)
	}

	// What the library sent, by messageId, and when serve answered the
	// last of it (stored, then answered).
	p.waitForWithin("Analytics.js's posts answered", `window.evfwdSent.filter(r => r.method === 'POST' && (r.status || r.error)).length >= 4`, stepTimeout)
	sent := map[string]map[string]any{}
	var lastStored time.Time
	for _, r := range eval[[]sentRecord](p, `window.evfwdSent`) {
		if r.Method != "POST" {
			continue
		}
		if r.Status != http.StatusOK {
			t.Fatalf("POST %s: %d %s %s", r.URL, r.Status, r.Error, r.Response)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
			t.Fatalf("POST %s: %v: %s", r.URL, err, r.Body)
		}
		sent[fmt.Sprint(m["messageId"])] = m
		if at := time.UnixMilli(int64(r.AnsweredAt)); at.After(lastStored) {
			lastStored = at
		}
	}
	for name, id := range ids {
		if sent[id] == nil {
			t.Fatalf("the %s call's message %s is in no request the page made", name, id)
		}
	}

	defer func() {
		if t.Failed() {
			for name, h := range map[string]*rawHook{"A": a, "B": b, "C": c} {
				for _, r := range h.requests() {
					t.Logf("%s got %s", name, r.body)
				}
			}
		}
	}()
	within(t, 15*time.Second, "A's track, B's four, C's four", func() bool {
		n := 0
		for _, r := range c.requests() {
			var batch []json.RawMessage
			json.Unmarshal(r.body, &batch)
			n += len(batch)
		}
		return len(a.requests()) >= 1 && len(b.requests()) >= 4 && n >= 4
	})
	// Every delivery is on record (A has nothing else coming), then what
	// each got is all it gets.
	within(t, 10*time.Second, "every delivery delivered", func() bool {
		ds, err := s.srv.Store().List(context.Background(), store.Filter{Source: "shop"})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Status != store.Delivered {
				return false
			}
		}
		return len(ds) == 1+4+4
	})

	// A: the Order Completed track alone, signed, as the webhook body.
	var order0 map[string]any
	if got := a.requests(); len(got) != 1 {
		for _, r := range got {
			t.Logf("A got: %s", r.body)
		}
		t.Errorf("A (subscribed to Order Completed) got %d requests, want 1", len(got))
	} else {
		r := got[0]
		if !r.signedBy(ajsSecret) {
			t.Errorf("A: X-Signature %q does not verify with the shared secret", r.header.Get("X-Signature"))
		}
		if err := json.Unmarshal(r.body, &order0); err != nil {
			t.Fatalf("A: %v: %s", err, r.body)
		}
		props, _ := order0["properties"].(map[string]any)
		if order0["messageId"] != ids["order"] || order0["type"] != "track" || order0["event"] != "Order Completed" || props["total"] != 129.95 {
			t.Errorf("A got %s, want the Order Completed track %s with total 129.95", r.body, ids["order"])
		}
		if !strings.HasPrefix(string(r.body), `{"type":"track","version":1,`) {
			t.Errorf("A's body does not start with its type and version 1: %.60s", r.body)
		}
	}

	// B: one mapped body per message, exactly the mapping's shape: a
	// path that the message lacks (a page's or an identify's event, an
	// identify's properties) leaves its key out.
	var gotB []map[string]any
	for _, r := range b.requests() {
		if !r.signedBy(ajsSecret) {
			t.Errorf("B: X-Signature %q does not verify: %s", r.header.Get("X-Signature"), r.body)
		}
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Errorf("B: %v: %s", err, r.body)
			continue
		}
		gotB = append(gotB, m)
	}
	var wantB []map[string]any
	for _, id := range order {
		m := sent[id]
		w := map[string]any{"user": m["anonymousId"]}
		if ev, ok := m["event"]; ok {
			w["event_name"] = ev
		}
		if props, ok := m["properties"]; ok {
			w["props"] = props
		}
		wantB = append(wantB, w)
	}
	byEvent := func(a, b map[string]any) int {
		return strings.Compare(fmt.Sprint(a["event_name"], a["props"]), fmt.Sprint(b["event_name"], b["props"]))
	}
	slices.SortFunc(wantB, byEvent)
	slices.SortFunc(gotB, byEvent)
	if diff := cmp.Diff(wantB, gotB); diff != "" {
		t.Errorf("B's mapped bodies mismatch (-want +got):\n%s", diff)
	}

	// C: JSON arrays whose elements are all the messages, each once, each
	// the webhook body; the last batch within about a second of the last
	// message.
	var gotC []string
	var last time.Time
	for _, r := range c.requests() {
		if !r.signedBy(ajsSecret) {
			t.Errorf("C: X-Signature %q does not verify", r.header.Get("X-Signature"))
		}
		var batch []map[string]any
		if err := json.Unmarshal(r.body, &batch); err != nil {
			t.Errorf("C got a body that is not a JSON array of objects: %v: %s", err, r.body)
			continue
		}
		for _, m := range batch {
			id := fmt.Sprint(m["messageId"])
			gotC = append(gotC, id)
			if id == ids["order"] && order0 != nil {
				if diff := cmp.Diff(order0, m); diff != "" {
					t.Errorf("C's Order Completed is not the webhook body A got (-A +C):\n%s", diff)
				}
			}
			if m["version"] != 1.0 || m["type"] != sent[id]["type"] {
				t.Errorf("C's element %s: type %v, version %v; want %v, 1", id, m["type"], m["version"], sent[id]["type"])
			}
		}
		last = r.at
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(order)), slices.Sorted(slices.Values(gotC))); diff != "" {
		t.Errorf("C's batches hold the messages (-want +got):\n%s", diff)
	}
	took := last.Sub(lastStored)
	t.Logf("C: %d request(s); the last %v after serve answered the last message", len(c.requests()), took.Round(time.Millisecond))
	if took > 1500*time.Millisecond {
		t.Errorf("C's last batch came %v after the last message was stored, want about a second at most", took)
	}
	p.assertQuiet()
}
