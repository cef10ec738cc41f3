// Package store is evfwd's durable queue: collected messages, one delivery
// per message and destination, and every attempt made. One interface, several
// implementations (store/sqlite embedded; PostgreSQL for many nodes), all
// held to the same behaviour by the conformance suite in store/storetest.
//
// Times are kept in milliseconds since the Unix epoch, UTC, so every engine
// stores and compares them the same way.
package store

import (
	"context"
	"errors"
	"time"
)

// Status is where a delivery stands.
type Status string

const (
	Pending   Status = "pending"   // waiting for its next attempt (or in flight under a lease)
	Delivered Status = "delivered" // an endpoint answered 2xx
	Failed    Status = "failed"    // a final failure (4xx, 3xx, TLS, unusable message)
	Dead      Status = "dead"      // the retry window closed without success
	Cancelled Status = "cancelled" // a deletion request withdrew it; never retried
)

// Statuses lists every status, in lifecycle order.
var Statuses = []Status{Pending, Delivered, Failed, Dead, Cancelled}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, v := range Statuses {
		if s == v {
			return true
		}
	}
	return false
}

// DestinationWebhooks is the name of a source's `webhooks:` destination,
// the spec's one destination; a source's `destinations:` have their own.
const DestinationWebhooks = "webhooks"

var (
	// ErrBusy is back-pressure: the store has more waiting than it takes;
	// the collector answers 429 and the client retries.
	ErrBusy = errors.New("store: busy")
	// ErrClosed is returned by calls after Close.
	ErrClosed = errors.New("store: closed")
	// ErrNotFound is returned for an unknown delivery id.
	ErrNotFound = errors.New("store: not found")
)

// Form says what a stored Body holds.
type Form uint8

const (
	// FormCollected is the collected message (context and integrations
	// merged, receivedAt added), which the forwarder turns into a webhook
	// body at every attempt. Stores written before the wire form hold it,
	// and their rows keep it: the zero value, as their column's default.
	FormCollected Form = iota
	// FormWire is the exact webhook body, built once on ingest
	// (queued.New) and sent as it is.
	FormWire
)

// Message is one message to store. Body is in Form: the webhook body for
// every message evfwd stores now.
type Message struct {
	Source     string
	MessageID  string
	Type       string
	UserID     string
	ReceivedAt time.Time
	Body       []byte
	Form       Form
	// Destinations get one pending delivery each, due at ReceivedAt; none
	// means the message is stored but not forwarded.
	Destinations []string
}

// Delivery is one message on its way to one destination.
type Delivery struct {
	ID          int64
	Source      string
	Destination string
	MessageID   string
	Type        string
	UserID      string
	Status      Status
	// Attempts is the number of deliveries made (each tries the
	// destination's endpoints in order), what webhook.Policy counts.
	Attempts     int
	FirstAttempt time.Time // zero before the first
	NextAttempt  time.Time
	LastError    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Body is the stored message, in Form; set by Lease and Get, nil
	// from List. Lease sets only what an attempt needs: ID, Source,
	// Destination, MessageID, Status, Attempts, FirstAttempt,
	// NextAttempt, LastError, Body and Form.
	Body []byte
	Form Form
	// LeaseEnd is set by Lease and IngestLeased, and only by them: the
	// end of the lease on the caller's clock, r.Now+r.TTL (lease.Until).
	// The store keeps the lease at least that long, measured from when
	// the caller read its clock, however slow the call; its holder starts
	// no attempt it cannot finish by then (pkg/forwarder).
	LeaseEnd time.Time
}

// Attempt is one POST to one URL, as recorded.
type Attempt struct {
	Delivery int // 1-based delivery number it belonged to
	Endpoint int // index of the endpoint
	URL      string
	Start    time.Time
	Latency  time.Duration
	Status   int    // HTTP status, 0 when none
	Class    string // webhook.Class
	Error    string // transport error text
	Excerpt  []byte // start of the response body
	Outcome  string // webhook.Outcome
}

// Completion is the end of one leased delivery: the attempts it made and
// what follows. It applies only while Owner still holds the lease; the
// attempts are recorded either way.
type Completion struct {
	ID           int64
	Owner        string
	Status       Status
	Attempts     int
	FirstAttempt time.Time
	NextAttempt  time.Time // when Status is Pending
	LastError    string
	Records      []Attempt
}

// LeaseRequest asks for up to Limit due deliveries of one source. Leases
// are per source so that each source's deliveries move at their own pace.
//
// Now is the caller's clock, read just before the call: what is due is
// judged by it on every engine. TTL is how long the lease lasts unless
// completed, and whose clock measures it is the engine's. SQLite's, whose
// file one process uses, is that process's: the lease ends at Now+TTL.
// PostgreSQL's is the database's, shared by every node: the lease ends
// TTL after the statement runs by the server's clock, so a slow round
// trip makes it last longer in the database than on the caller's clock,
// never shorter, and another node does not take it while its holder may
// still use it (until Now+TTL, Delivery.LeaseEnd).
type LeaseRequest struct {
	Owner  string
	Source string
	// Destination, when set, leases only that destination's deliveries
	// (each destination of a source has its own lane and pace); empty
	// leases every destination's.
	Destination string
	Limit       int
	Now         time.Time
	TTL         time.Duration
}

// IngestLease says which deliveries IngestLeased leases and to whom. Until
// is the lease's end on the caller's clock; on PostgreSQL the database
// keeps it for as long from when the statement runs by its own clock (see
// LeaseRequest).
type IngestLease struct {
	Owner string
	Until time.Time
	Limit int
}

// Filter selects deliveries to list, retry or resend; zero fields select
// all.
type Filter struct {
	Status      Status
	Source      string
	Destination string
	// Endpoint, when set, selects the deliveries with at least one
	// attempt to this URL (exactly as configured).
	Endpoint string
	Limit    int   // 0: no limit
	After    int64 // only ids greater than this (paging oldest first)
	Before   int64 // only ids less than this (paging newest first); 0: no bound
	// Since, when set, selects the deliveries created at or after it.
	Since time.Time
	// Desc lists newest first (by id, descending) instead of oldest
	// first; with Limit and Before it pages back from the newest. Retry
	// ignores it.
	Desc bool
}

// Resent is what Resend did: N deliveries made pending, and which of the
// ids it was given it left alone, by reason (empty when it selected by
// Filter).
type Resent struct {
	N int
	// Pending are still on their way (waiting, or in flight): they are
	// sent anyway.
	Pending []int64
	// Purged belong to a message a deletion request withdrew: cancelled,
	// or delivered before and its body emptied since.
	Purged []int64
	// Unknown are in no delivery of the store: never were, or pruned.
	Unknown []int64
	// Skipped, by Filter with a Limit, are the deliveries the filter
	// still selects after it: left as they were, for another run.
	Skipped int
}

// Count is the number of deliveries of one source in one status.
type Count struct {
	Source string
	Status Status
	N      int64
}

// Detail is a delivery with its message and every attempt, oldest first.
type Detail struct {
	Delivery
	Records []Attempt
}

// Store is the durable queue. Implementations are safe for concurrent use.
type Store interface {
	// Ingest stores msgs and their deliveries atomically and durably: when
	// it returns nil they survive a crash. A message whose (Source,
	// MessageID) is already stored is skipped: a client retrying a batch
	// whose answer it lost does not cause a second delivery.
	Ingest(ctx context.Context, msgs []Message) error
	// IngestLeased is Ingest, except that up to lease.Limit of the new
	// deliveries, in msgs' order, are created leased to lease.Owner until
	// lease.Until and returned with their bodies, as Lease returns them:
	// the caller sends them at once, without a Lease round trip. The
	// others are pending as Ingest makes them.
	IngestLeased(ctx context.Context, msgs []Message, lease IngestLease) ([]Delivery, error)
	// Lease takes up to r.Limit pending deliveries of r.Source that are
	// due and not leased (or whose lease expired), oldest due first, and
	// leases them to r.Owner for r.TTL (see LeaseRequest for whose clock):
	// should its holder never complete it, it is due again then (and
	// Reclaim frees it at once).
	// How a lease is kept is the engine's: in memory on SQLite, whose file
	// one process uses; in the row on PostgreSQL (its owner and end).
	Lease(ctx context.Context, r LeaseRequest) ([]Delivery, error)
	// Complete records each completion (see Completion).
	Complete(ctx context.Context, cs []Completion) error
	// Reclaim makes the leases of processes that are gone available now
	// and reports how many it released. A store used by one process at a
	// time (SQLite) releases every lease; a shared one only expired leases.
	Reclaim(ctx context.Context, now time.Time) (int, error)
	// List returns deliveries by id (ascending, or descending with
	// f.Desc), without bodies.
	List(ctx context.Context, f Filter) ([]Delivery, error)
	// Get returns one delivery with its message and attempts.
	Get(ctx context.Context, id int64) (*Detail, error)
	// Retry makes the selected deliveries (ids, or every one f selects
	// when ids is empty) pending and due at now, keeping their history and
	// starting a new retry window. Delivered ones are left alone. It
	// reports how many changed.
	Retry(ctx context.Context, ids []int64, f Filter, now time.Time) (int, error)
	// Resend sends the selected finished deliveries (ids, or every one f
	// selects when ids is empty) again, as a new attempt to the same
	// destination: delivered, failed and dead ones become pending and due
	// at now, with a new retry window; their recorded attempts are kept.
	// Pending ones are left alone, and so are those whose message a
	// deletion request withdrew (cancelled, or its body purged): there is
	// nothing left to send. Of the ids given, Resent says which it left
	// alone and why. By filter, it resends at most f.Limit (0: every one),
	// those finished longest ago first (by when they finished, then by
	// id: another run goes on with the rest before taking again one it
	// resent that failed again), and says how many it left (Skipped).
	Resend(ctx context.Context, ids []int64, f Filter, now time.Time) (Resent, error)
	// Counts returns the number of deliveries per source and status.
	Counts(ctx context.Context) ([]Count, error)
	// Stats returns the pending deliveries per source and the store's size
	// (see Stats), reading pending rows only, however long the history.
	Stats(ctx context.Context) (Stats, error)
	// Prune removes the messages received before before whose deliveries
	// are all finished (none pending), with their deliveries and attempts,
	// in short steps of at most PruneStep messages each, oldest first.
	// Delete notifications are kept: with their deletion requests they are
	// the audit trail. It stops early when ctx ends, reporting what it
	// removed so far.
	Prune(ctx context.Context, before time.Time) (Pruned, error)
	// SaveEndpoint records st as the circuit-breaker state of its
	// endpoint (Source, URL), replacing the one recorded before.
	SaveEndpoint(ctx context.Context, st EndpointState) error
	// Endpoints returns the recorded endpoint states by source and URL.
	Endpoints(ctx context.Context) ([]EndpointState, error)
	// Release makes the pending deliveries of source that are scheduled
	// after now and whose last error starts with one of prefixes due at
	// now (an endpoint recovered: what waited on it goes at once), in
	// steps of at most ReleaseStep, and reports how many it changed.
	Release(ctx context.Context, source string, prefixes []string, now time.Time) (int, error)
	// CancelPending cancels every pending delivery of source's destination
	// (leased ones too: their holder's Complete records its attempts and
	// leaves them cancelled), with reason as their last error, in steps
	// of at most ReleaseStep, and reports how many it cancelled: the
	// destination was removed from the configuration.
	CancelPending(ctx context.Context, source, destination, reason string, now time.Time) (int, error)
	Close() error
}

// Pacer is a store that several processes share (PostgreSQL) pacing a
// destination across all of them: each reservation is one of a single
// schedule kept in the store, so that together the nodes never exceed the
// rate. A store one process uses (SQLite) is not one: that process paces
// in memory.
type Pacer interface {
	// Reserve reserves n requests on key's schedule, one every `every`
	// with up to burst at once, and returns how long the caller waits
	// before it sends them (0: now). A reservation is never refused: a
	// caller that waits longer than it would like still has its turn.
	Reserve(ctx context.Context, key string, every time.Duration, burst, n int) (time.Duration, error)
}

// Millis converts t to the stored form; the zero time is 0.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMillis converts a stored time back; 0 is the zero time.
func FromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
