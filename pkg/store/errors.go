package store

import "errors"

// ErrFull is a write the store could not make for lack of capacity: the
// disk is full (SQLite: SQLITE_FULL; PostgreSQL: disk_full), or the
// database server is out of memory or connections. Nothing of the call was
// stored. It is the operator's to fix and the client's to retry: the
// collector answers 503 with Retry-After (DESIGN §2, "the store cannot
// write"). Stores wrap it around the driver's error, so errors.Is(err,
// ErrFull) holds and the driver's text stays in the message.
var ErrFull = errors.New("store: full")
