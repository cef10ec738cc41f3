package store

import (
	"context"
	"errors"
)

// ErrFull is a write the store could not make for lack of capacity: the
// disk is full (SQLite: SQLITE_FULL; PostgreSQL: disk_full), or the
// database server is out of memory or connections. Nothing of the call was
// stored. It is the operator's to fix and the client's to retry: the
// collector answers 503 with Retry-After (DESIGN §2, "the store cannot
// write"). Stores wrap it around the driver's error, so errors.Is(err,
// ErrFull) holds and the driver's text stays in the message.
var ErrFull = errors.New("store: full")

// ErrUnavailable is a call the store could not make because the database
// could not be reached: the connection was refused or reset, the server is
// shutting down or starting (a restart, a failover), or the call's deadline
// passed with no answer (a cut link). Whether a write was committed may be
// unknown; a retry is safe, since Ingest skips a (Source, MessageID) it
// already has. The collector answers 503 with Retry-After, and serve's
// /healthz reports the store unreachable until a probe reaches it again.
// Stores wrap it around the driver's error, as they do ErrFull.
var ErrUnavailable = errors.New("store: unavailable")

// Pinger is a store that can check, cheaply, that its database answers:
// nil, or an error wrapping ErrUnavailable when it cannot be reached.
// Both engines implement it; serve's health probe uses it.
type Pinger interface {
	Ping(ctx context.Context) error
}
