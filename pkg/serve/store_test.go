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

// A store handed to New stays its caller's: serve delivers from it and
// leaves it open, with its SQLite file's lock, when it stops.
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
	h.stop()
	// serve frees the file's leases on start, so the store holds the
	// file's lock as long as it is open: a second serve would send twice.
	if _, err := sqlite.Open(ctx, st.Path(), sqlite.Options{}); !errors.Is(err, sqlite.ErrLocked) {
		t.Errorf("opening the ready SQLite file after serve stopped: %v, want ErrLocked", err)
	}
	ds, err := st.List(ctx, store.Filter{})
	if err != nil || len(ds) != 1 || ds[0].Status != store.Delivered {
		t.Errorf("after serve stopped, the store lists %+v, %v; want it open, with the delivery", ds, err)
	}
}

// A ready SQLite store opened as a tool (NoRecover) holds no lock: serve,
// which leases from it, refuses it.
func TestReadyStoreWithoutLock(t *testing.T) {
	t.Parallel()
	st, err := storeurl.Open(context.Background(), filepath.Join(t.TempDir(), "evfwd.db"), storeurl.Options{NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = serve.New(context.Background(), serve.Config{Addr: "127.0.0.1:0", Sources: []serve.Source{{Name: "web", WriteKey: "wk"}}},
		serve.Options{Store: st})
	if err == nil || !strings.Contains(err.Error(), "without the file's lock") {
		t.Errorf("New with a NoRecover SQLite store: %v, want it refused", err)
	}
}

// Two serves on one SQLite file: the second is refused at once, in words
// that name the file.
func TestSecondServeRefused(t *testing.T) {
	t.Parallel()
	url := "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db")
	cfg := serve.Config{Addr: "127.0.0.1:0", Store: url, Sources: []serve.Source{{Name: "web", WriteKey: "wk"}}}
	run(t, cfg, serve.Options{})
	_, err := serve.New(context.Background(), cfg, serve.Options{})
	if !errors.Is(err, sqlite.ErrLocked) || !strings.Contains(err.Error(), strings.TrimPrefix(url, "sqlite://")) {
		t.Errorf("a second serve on the file: %v, want ErrLocked naming it", err)
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
