package serve_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/storeurl"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// readyStore opens a store as a program embedding serve would, and closes
// it when the test ends.
func readyStore(t *testing.T) storeurl.Store {
	t.Helper()
	st, err := storeurl.Open(context.Background(), filepath.Join(t.TempDir(), "evfwd.db"), storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A store handed to New stays its caller's: serve delivers from it, locks
// its SQLite file only while it runs, and leaves it open when it stops.
func TestReadyStoreStaysOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := readyStore(t)
	hk := newHook(t)
	h := run(t, serve.Config{Addr: "127.0.0.1:0", Sources: []serve.Source{{Name: "web", WriteKey: "wk_web",
		Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{Endpoints: []webhook.Endpoint{{URL: hk.URL}}}}}}},
		serve.Options{Store: st})
	if h.srv.Store() != store.Store(st) {
		t.Error("Server.Store is not the store handed to New")
	}
	if code, body := h.post(t, "/v1/track", "wk_web", `{"userId":"u1","event":"A"}`); code != 200 {
		t.Fatalf("track: %d %s", code, body)
	}
	waitFor(t, "the delivery", func() bool { return len(hk.Requests()) == 1 })
	// serve frees the file's leases on start, so it holds the file's lock
	// while it serves: a second serve on the file would send twice.
	if _, err := sqlite.Lock(st.Path()); !errors.Is(err, sqlite.ErrLocked) {
		t.Errorf("locking the ready SQLite file while serve runs: %v, want ErrLocked", err)
	}
	h.stop()
	unlock, err := sqlite.Lock(st.Path())
	if err != nil {
		t.Errorf("the lock outlives serve: %v", err)
	} else {
		unlock()
	}
	ds, err := st.List(ctx, store.Filter{})
	if err != nil || len(ds) != 1 || ds[0].Status != store.Delivered {
		t.Errorf("after serve stopped, the store lists %+v, %v; want it open, with the delivery", ds, err)
	}
}

func TestReadyStoreAndStoreURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := serve.New(ctx, serve.Config{Addr: "127.0.0.1:0", Store: "postgres://u:pw@db/evfwd", Sources: []serve.Source{{Name: "web", WriteKey: "wk"}}},
		serve.Options{Store: readyStore(t)})
	if err == nil || !strings.Contains(err.Error(), "both set") || strings.Contains(err.Error(), "pw@") {
		t.Errorf("New with both: %v, want an error saying so, without the password", err)
	}
}
