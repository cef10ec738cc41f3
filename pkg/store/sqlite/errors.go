package sqlite

import (
	"errors"
	"fmt"

	"github.com/evfwd/evfwd/pkg/store"
	sqlite3 "modernc.org/sqlite/lib"
)

// coder is the driver's error (*sqlite.Error of modernc.org/sqlite): the
// SQLite result code, primary or extended.
type coder interface{ Code() int }

// classify wraps store.ErrFull around err when SQLite could not write for
// lack of space: SQLITE_FULL, "database or disk is full", which SQLite
// returns when a write to the database file or its WAL fails with ENOSPC
// (and when the file reaches max_page_count). Every other error, and nil,
// is returned as it is.
func classify(err error) error {
	var c coder
	if errors.As(err, &c) && c.Code()&0xff == sqlite3.SQLITE_FULL {
		return fmt.Errorf("%w: %w", store.ErrFull, err)
	}
	return err
}
