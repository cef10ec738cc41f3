package store

import (
	"context"
	"iter"
	"time"
)

// Admin is the persistence of the admin API (deletion requests, audience and
// computed-trait syncs). It is separate from Store so that an engine can
// offer the queue without it; `serve` turns the admin API off with a clear
// message when its store does not implement Admin. Every method is atomic:
// what it records and the messages it queues commit together (Sync and
// CreateDeletion in bounded steps; see there).
type Admin interface {
	// CreateDeletion applies a deletion request: it cancels the pending
	// deliveries of r.UserID's messages in r.Sources, empties those
	// messages' bodies, ingests r.Messages (the delete notifications, whose
	// own deliveries are left alone) and records the request. Earlier
	// delete notifications are neither cancelled nor purged. It covers the
	// user's messages stored when the request is recorded.
	//
	// The request and its notifications commit first, together; the purge
	// may then go in bounded steps, each committing its changes with its
	// counts, so that a user with many messages never holds up ingest; last,
	// the engine clears what its files still keep of the emptied bodies
	// (SQLite truncates its WAL, PostgreSQL rewrites the table). When it
	// returns nil, no file of the store holds a byte of them (PostgreSQL's
	// WAL apart: see store/postgres). A recorded request is carried out even
	// if ctx ends; one that a stopped process left unfinished is finished by
	// the next CreateDeletion or the next Open of the store.
	CreateDeletion(ctx context.Context, r DeletionRequest) (*Deletion, error)
	// Deletion returns a recorded request with each source's current
	// notification status; ErrNotFound when id is unknown.
	Deletion(ctx context.Context, id string) (*Deletion, error)
	// Sync replaces the stored values of one audience or computed trait by
	// the full list in values and queues s.Messages for every user whose
	// value changed (added, changed or removed). values is read once and
	// never held whole: an engine stages it (in the database) and diffs
	// there. The error of values, if any, is returned and nothing is
	// changed. A user listed twice takes the last value.
	//
	// A sync is atomic without being one transaction, so that a list of
	// millions never holds up ingest: it runs in steps of a few thousand
	// rows each (stage the list, diff it into an outbox no reader or
	// forwarder sees), then one small commit switches to the new list,
	// then the outbox moves into the queue a chunk at a time. Readers see
	// the old list until the switch and the new one after it. A crash
	// before the switch changes nothing; after it, the sync is finished
	// when the store is next opened (on a shared store, by any node),
	// queueing exactly the messages it had made. Syncs of one key take
	// turns. When Sync returns nil its messages are in the queue; an error
	// after the switch says so, and the key's next sync or the store's
	// next Open queues them.
	Sync(ctx context.Context, s Sync, values iter.Seq2[Value, error]) (*SyncResult, error)
}

// DeletionRequest is what CreateDeletion applies.
type DeletionRequest struct {
	ID        string
	UserID    string
	CreatedAt time.Time
	// Sources are the affected sources: their pending deliveries of the
	// user are cancelled and the user's message bodies purged.
	Sources []string
	// Messages are the delete notifications, one per affected source with
	// webhooks enabled (MessageID is the request's ID).
	Messages []Message
}

// Deletion is a recorded deletion request.
type Deletion struct {
	ID        string
	UserID    string
	CreatedAt time.Time
	// Done is false while the request is still purging (a restart finishes
	// one a stopped process left): its counts are then partial.
	Done    bool
	Sources []DeletionSource // by source name
}

// DeletionSource is what a deletion request did in one source.
type DeletionSource struct {
	Source string
	// Notified is true when a delete message was queued for the source's
	// webhook destination; Delivery and its fields then say how it fares.
	Notified  bool
	MessageID string
	Delivery  int64
	Status    Status
	Attempts  int
	LastError string
	// Cancelled counts the user's pending deliveries withdrawn, Purged the
	// user's stored messages whose bodies were emptied.
	Cancelled int
	Purged    int
}

// SyncKind says what a sync keeps: audience membership or trait values.
type SyncKind string

const (
	KindAudience SyncKind = "audience"
	KindTrait    SyncKind = "trait"
)

// Sync describes one sync of one audience or computed trait.
type Sync struct {
	Kind SyncKind
	// Key identifies the audience or trait (its snake_case name: two
	// names with one key write the same trait, so they share state).
	Key  string
	Name string // as the caller gave it, kept for display
	Now  time.Time
	// Removed is the value sent for a user no longer listed: false for an
	// audience, null for a trait.
	Removed []byte
	// Messages returns the messages to queue for one user whose value
	// changed to value (the stored JSON bytes, or Removed).
	Messages func(userID string, value []byte) []Message
}

// Value is one user of a sync list and their value as compact JSON
// ("true" for an audience member).
type Value struct {
	UserID string
	Value  []byte
}

// SyncResult is what a sync did. Changed counts users listed before and
// now with a different value (traits only).
type SyncResult struct {
	First     bool // nothing was stored for Key before
	Added     int
	Removed   int
	Changed   int
	Unchanged int
	Messages  int // messages queued
}
