package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/storeurl"
)

// Who owns the store: New opens the store Config.Store names unless
// Options.Store hands it a ready one. A store serve opened, serve closes
// (Close, or Run once drained). A ready store stays its caller's: serve
// never closes it; the caller closes it after Run returns. A SQLite file,
// opened or ready, serve locks for as long as it serves, since serve frees
// the file's leases on start and a second process leasing from it would
// send deliveries twice (the caller does not lock it too).

// openLocked opens the store for serve. A SQLite file is locked first, as
// one process at a time may lease from it; a PostgreSQL database needs no
// lock, since leases there are exclusive across processes. release closes
// the store and then drops the lock.
func openLocked(ctx context.Context, url string, now func() time.Time, log *slog.Logger) (st store.Store, release func() error, err error) {
	loc, err := storeurl.Parse(url)
	if err != nil {
		return nil, nil, err
	}
	unlock := func() {}
	if loc.Engine == storeurl.SQLite {
		unlock, err = sqlite.Lock(loc.Path)
		if errors.Is(err, os.ErrNotExist) {
			if err = os.MkdirAll(filepath.Dir(loc.Path), 0o700); err == nil {
				unlock, err = sqlite.Lock(loc.Path)
			}
		}
		if err != nil {
			return nil, nil, err
		}
	}
	st, err = loc.Open(ctx, storeurl.Options{Now: now, Logger: log})
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return st, func() error {
		err := st.Close()
		unlock()
		return err
	}, nil
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

// lockReady locks the file of a ready SQLite store; release drops the
// lock and leaves the store open.
func lockReady(st store.Store) (release func() error, err error) {
	sq, ok := st.(*sqlite.Store)
	if !ok {
		return func() error { return nil }, nil
	}
	unlock, err := sqlite.Lock(sq.Path())
	if err != nil {
		return nil, err
	}
	return func() error { unlock(); return nil }, nil
}

// storeName is how the logs name st: its Path when it has one (both
// engines do), else its type.
func storeName(st store.Store) string {
	if p, ok := st.(interface{ Path() string }); ok {
		return p.Path()
	}
	return fmt.Sprintf("%T", st)
}
