package serve

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// pathStore is a store that can name itself for the logs.
type pathStore interface {
	store.Store
	Path() string
}

// OpenStore opens the store a setting names: a postgres:// (or
// postgresql://) URL is the PostgreSQL store that many serve processes
// share; anything else is a SQLite file (see StorePath). It takes no lock:
// `evfwd deliveries` reads a store beside a running serve.
// It leaves what a stopped serve left unfinished to the next serve.
func OpenStore(ctx context.Context, dsn string, now func() time.Time) (store.Store, error) {
	if postgres.IsURL(dsn) {
		return postgres.Open(ctx, dsn, postgres.Options{Now: now, NoRecover: true})
	}
	path, err := StorePath(dsn)
	if err != nil {
		return nil, err
	}
	return sqlite.Open(ctx, path, sqlite.Options{Now: now, NoRecover: true})
}

// openLocked opens the store for serve. A SQLite file is locked first, as
// one process at a time may lease from it; a PostgreSQL database needs no
// lock, since leases there are exclusive across processes.
func openLocked(ctx context.Context, dsn string, now func() time.Time) (pathStore, func(), error) {
	if postgres.IsURL(dsn) {
		st, err := postgres.Open(ctx, dsn, postgres.Options{Now: now})
		return st, func() {}, err
	}
	path, err := StorePath(dsn)
	if err != nil {
		return nil, nil, err
	}
	unlock, err := sqlite.Lock(path)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(dirOf(path), 0o700); err == nil {
			unlock, err = sqlite.Lock(path)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlite.Open(ctx, path, sqlite.Options{Now: now})
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return st, unlock, nil
}
