// Package storeurl opens an evfwd store from its URL, whichever engine it
// names. It is the one reader of store URLs: pkg/store cannot be, since
// its engines import it, so this package imports both engines instead.
//
//	sqlite:///abs/path, sqlite://rel/path, sqlite:path, file:path, path  → SQLite file
//	postgres://..., postgresql://...                                    → PostgreSQL
//
// Any other scheme is refused by name.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
)

// Engine is the implementation a store URL names.
type Engine string

const (
	SQLite     Engine = "sqlite"
	PostgreSQL Engine = "postgres"
)

// Location is what a store URL names.
type Location struct {
	Engine Engine
	// Path is the SQLite file; URL is the PostgreSQL connection URL as
	// given. The other one is empty.
	Path, URL string
}

// Parse classifies url without touching the file or the database. It
// checks the form of a SQLite location only; Check also asks the
// PostgreSQL driver whether it can read the URL.
func Parse(url string) (Location, error) {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return Location{Engine: PostgreSQL, URL: url}, nil
	}
	path := url
	switch {
	case strings.HasPrefix(path, "sqlite://"):
		path = strings.TrimPrefix(path, "sqlite://")
	case strings.HasPrefix(path, "sqlite:"):
		path = strings.TrimPrefix(path, "sqlite:")
	case strings.HasPrefix(path, "file:"):
		path = strings.TrimPrefix(path, "file:")
	case strings.Contains(path, "://"):
		return Location{}, fmt.Errorf("store %q: unknown scheme (want sqlite:///path or postgres://...)", url)
	}
	if path == "" {
		return Location{}, errors.New("store: empty path")
	}
	return Location{Engine: SQLite, Path: path}, nil
}

// Check reports whether url is a store Open can open as far as can be told
// without opening it (`evfwd serve --check`): Parse, and a PostgreSQL URL
// that its driver reads.
func Check(url string) error {
	loc, err := Parse(url)
	if err != nil || loc.Engine != PostgreSQL {
		return err
	}
	return postgres.CheckURL(loc.URL)
}

// Options are what every engine takes; zero values are the defaults.
type Options struct {
	// Now is the store's clock (default time.Now).
	Now func() time.Time
	// NoRecover leaves the work a stopped process left unfinished to the
	// service, and a SQLite file's lock to it: tools that open the store
	// beside a running serve set it (see sqlite.Options.NoRecover).
	NoRecover bool
	// MustExist refuses a SQLite file that is not there (an error matching
	// fs.ErrNotExist) instead of creating an empty store: tools that read
	// the service's store set it. A PostgreSQL database is never created
	// by Open, so it is unaffected.
	MustExist bool
	// Logger receives what the store does on its own (see
	// sqlite.Options.Logger); default: discarded.
	Logger *slog.Logger
}

// Store is an open store of either engine.
type Store interface {
	store.Store
	// Path names the file or the database, without credentials, for logs.
	Path() string
}

// Open opens the store url names (see Parse). A missing SQLite file is
// created unless opts.MustExist.
func Open(ctx context.Context, url string, opts Options) (Store, error) {
	loc, err := Parse(url)
	if err != nil {
		return nil, err
	}
	return loc.Open(ctx, opts)
}

// Open opens the store at l. A SQLite Store holds its file's lock until
// Close unless opts.NoRecover (see sqlite.Open): a second one fails with
// sqlite.ErrLocked.
func (l Location) Open(ctx context.Context, opts Options) (Store, error) {
	var st Store
	var err error
	switch l.Engine {
	case SQLite:
		st, err = sqlite.Open(ctx, l.Path, sqlite.Options{Now: opts.Now, NoRecover: opts.NoRecover, MustExist: opts.MustExist, Logger: opts.Logger})
	case PostgreSQL:
		st, err = postgres.Open(ctx, l.URL, postgres.Options{Now: opts.Now, NoRecover: opts.NoRecover, Logger: opts.Logger})
	default:
		err = fmt.Errorf("store: unknown engine %q", l.Engine)
	}
	if err != nil {
		// Not a nil *sqlite.Store in a non-nil interface.
		return nil, err
	}
	return st, nil
}
