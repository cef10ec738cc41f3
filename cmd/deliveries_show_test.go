package cmd

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// TestDeliveriesShowLabelsRounds: show numbers each round of attempts
// once, across a retry, which starts the store's count again at 1 (issue
// 41: two attempts labelled 1.1).
func TestDeliveriesShowLabelsRounds(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "evfwd.db")
	ctx := context.Background()
	st := openStoreAt(t, path, now)
	if err := st.Ingest(ctx, []store.Message{storetest.Msg("web", "m1", 0, true)}); err != nil {
		t.Fatal(err)
	}
	attempt := func(endpoint, status int) store.Attempt {
		return store.Attempt{Delivery: 1, Endpoint: endpoint, URL: "http://x/" + string(rune('a'+endpoint)), Start: now, Status: status, Class: "http_5xx", Outcome: "retryable"}
	}
	// Both endpoints fail, the delivery fails; a retry; the first takes it.
	for _, c := range []store.Completion{
		{Status: store.Failed, Attempts: 1, Records: []store.Attempt{attempt(0, 500), attempt(1, 503)}},
		{Status: store.Delivered, Attempts: 1, Records: []store.Attempt{attempt(0, 200)}},
	} {
		ds, err := st.Lease(ctx, store.LeaseRequest{Owner: "o", Source: "web", Limit: 1, Now: now, TTL: time.Minute})
		if err != nil || len(ds) != 1 {
			t.Fatalf("Lease: %v, %d", err, len(ds))
		}
		c.ID, c.Owner, c.FirstAttempt = ds[0].ID, "o", now
		if err := st.Complete(ctx, []store.Completion{c}); err != nil {
			t.Fatal(err)
		}
		if c.Status == store.Failed {
			if _, err := st.Retry(ctx, []int64{c.ID}, store.Filter{}, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.Close()

	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	res := execute(t, testFactory(t, "", false, env), "deliveries", "show", "1")
	if res.Code != 0 {
		t.Fatalf("show: code %d, stderr %q", res.Code, res.Stderr)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^(\d+\.\d+)  `).FindAllStringSubmatch(res.Stdout, -1) {
		got = append(got, m[1])
	}
	if want := []string{"1.1", "1.2", "2.1"}; !slices.Equal(got, want) {
		t.Errorf("attempt labels %v, want %v:\n%s", got, want, res.Stdout)
	}
}
