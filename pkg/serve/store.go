package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/storeurl"
)

// Who owns the store: New opens the store Config.Store names unless
// Options.Store hands it a ready one. A store serve opened, serve closes
// (Close, or Run once drained). A ready store stays its caller's: serve
// never closes it; the caller closes it after Run returns. A SQLite file
// is locked by the Store that opened it (sqlite.Open), for as long as it
// is open, since serve frees the file's leases on start and a second
// process leasing from it would send deliveries twice.

// openLocked opens the store for serve, a SQLite file locked by its Store
// (sqlite.Open); release closes it, and so frees the lock. A SQLite file
// another serve holds is refused (sqlite.ErrLocked); a PostgreSQL database
// needs no lock, since leases there are exclusive across processes.
func openLocked(ctx context.Context, url string, now func() time.Time, log *slog.Logger) (st store.Store, release func() error, err error) {
	st, err = storeurl.Open(ctx, url, storeurl.Options{Now: now, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return st, st.Close, nil
}

// storePathError makes a store path that cannot be the store's file (a
// directory, no permission: *sqlite.PathError) a *ConfigError, the
// user's to fix.
func storePathError(err error) error {
	if pe := (*sqlite.PathError)(nil); errors.As(err, &pe) {
		return &ConfigError{err}
	}
	return err
}

// checkReady refuses a ready SQLite store that does not hold its file's
// lock (one opened as a tool, with NoRecover): serve leases from it.
// release does nothing, as the store stays its caller's.
func checkReady(st store.Store) (release func() error, err error) {
	if sq, ok := st.(*sqlite.Store); ok && !sq.Locked() {
		return nil, fmt.Errorf("store %s was opened with NoRecover, without the file's lock: serve needs it opened without NoRecover", sq.Path())
	}
	return func() error { return nil }, nil
}

// storeName is how the logs name st: its Path when it has one (both
// engines do), else its type.
func storeName(st store.Store) string {
	if p, ok := st.(interface{ Path() string }); ok {
		return p.Path()
	}
	return fmt.Sprintf("%T", st)
}
