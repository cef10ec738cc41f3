package store

import (
	"context"
	"errors"
	"time"
)

// ErrFull is a write the store could not make for lack of capacity: the
// disk is full (SQLite: SQLITE_FULL; PostgreSQL: disk_full), or the
// database server is out of memory or connections. Nothing of the call was
// stored. It is the operator's to fix and the client's to retry: the
// collector answers 503 with Retry-After (DESIGN §2, "the store cannot
// write"). Stores wrap it around the driver's error, so errors.Is(err,
// ErrFull) holds and the driver's text stays in the message.
var ErrFull = errors.New("store: full")

// CallTimeout is how long a caller waits for one call to the store by
// default: a request for its commit (collector.Config.IngestTimeout), the
// forwarder for a Lease or a probe (forwarder.Config.StoreTimeout). A
// healthy commit takes milliseconds, and a slow one (a busy server, a
// reconnect after a failover) a second or two; a database cut off answers
// nothing, and without a deadline a request would hang until the client
// gave up, with no status, even after a commit. It is well under the
// libraries' own request timeouts (10 s and more) and load balancers' (60
// s), so the client sees a 503 and retries, on this node or another.
const CallTimeout = 5 * time.Second

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
