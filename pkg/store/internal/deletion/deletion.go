// Package deletion is the lifecycle of a deletion request (issue 13) that
// both engines share: the request is recorded in one transaction (Record),
// every unfinished request is then finished, and the request is read back
// (Read); Create is the three in a row. An engine supplies the statements
// (Tx, Reader) and Finish, which is its own: making purged bodies
// unreadable is where the engines differ most (SQLite purges in pages
// through its writer and checkpoints the WAL; PostgreSQL purges while it
// records and then rewrites the tables), so only the order of the steps is
// shared, not their insides.
package deletion

import (
	"context"
	"fmt"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
)

// Engine is one engine's part of a request's lifecycle.
type Engine interface {
	Reader
	// Record runs Record with r in one write transaction.
	Record(ctx context.Context, r store.DeletionRequest) error
	// Finish runs every unfinished request to its end: done_at is set
	// once no file of the store holds the bodies it purged.
	Finish(ctx context.Context) error
}

// Create records r, finishes it (and any other unfinished request) even if
// ctx ends once r is recorded, and reads it back.
func Create(ctx context.Context, e Engine, r store.DeletionRequest) (*store.Deletion, error) {
	if err := e.Record(ctx, r); err != nil {
		return nil, err
	}
	if err := e.Finish(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("deletion %s is recorded but not finished (the next request or start finishes it): %w", r.ID, err)
	}
	return Read(ctx, e, r.ID)
}

// Counts are what a request did to one source's messages.
type Counts struct{ Cancelled, Purged int64 }

// Tx is one engine's statements of a request's record, all in one
// transaction.
type Tx interface {
	// Insert stores r, unfinished (done_at 0).
	Insert(ctx context.Context, r store.DeletionRequest) error
	// Purge cancels the user's pending deliveries of source and empties
	// the bodies of the user's messages in it, where the engine does so
	// while it records (PostgreSQL; SQLite purges after, in pages, and
	// counts nothing here). Earlier delete notifications are the
	// customer's clean-up signal: they are neither withdrawn nor emptied.
	Purge(ctx context.Context, r store.DeletionRequest, source string) (Counts, error)
	// Notify stores the delete notifications, with their deliveries.
	Notify(ctx context.Context, msgs []store.Message) error
	// MessageRow is the row id of source's message messageID.
	MessageRow(ctx context.Context, source, messageID string) (int64, error)
	// AddSource records what request deletion did to source: message is
	// the row of its delete notification, nil when it got none.
	AddSource(ctx context.Context, deletion, source string, message *int64, c Counts) error
}

// Record is a request's first step, in tx: the request, the purge where
// the engine purges at once, the delete notifications, and a row per
// source with its counts.
func Record(ctx context.Context, tx Tx, r store.DeletionRequest) error {
	if err := tx.Insert(ctx, r); err != nil {
		return err
	}
	counts := make(map[string]Counts, len(r.Sources))
	for _, src := range r.Sources {
		c, err := tx.Purge(ctx, r, src)
		if err != nil {
			return err
		}
		counts[src] = c
	}
	if len(r.Messages) > 0 {
		if err := tx.Notify(ctx, r.Messages); err != nil {
			return err
		}
	}
	notified := map[string]string{}
	for _, m := range r.Messages {
		notified[m.Source] = m.MessageID
	}
	for _, src := range r.Sources {
		var msg *int64 // NULL when the source got no notification
		if id, ok := notified[src]; ok {
			row, err := tx.MessageRow(ctx, src, id)
			if err != nil {
				return fmt.Errorf("delete message of %s: %w", src, err)
			}
			msg = &row
		}
		if err := tx.AddSource(ctx, r.ID, src, msg, counts[src]); err != nil {
			return err
		}
	}
	return nil
}

// Reason is the last error of a delivery request id cancelled.
func Reason(id string) string { return "cancelled by deletion request " + id }

// Reader is one engine's statements of a request's read.
type Reader interface {
	// Request reads the user, the creation time (Unix milliseconds) and
	// whether it is done of request id; found is false when there is none.
	Request(ctx context.Context, id string) (user string, created int64, done, found bool, err error)
	// Sources reads the rows of SourcesQuery for request id.
	Sources(ctx context.Context, id string) ([]store.DeletionSource, error)
}

// Read reads request id, or fails with store.ErrNotFound.
func Read(ctx context.Context, r Reader, id string) (*store.Deletion, error) {
	user, created, done, found, err := r.Request(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("deletion %s: %w", id, store.ErrNotFound)
	}
	d := &store.Deletion{ID: id, UserID: user, CreatedAt: store.FromMillis(created), Done: done}
	if d.Sources, err = r.Sources(ctx, id); err != nil {
		return nil, err
	}
	return d, nil
}

// SourcesQuery selects rowscan.DeletionSourceColumns of the request whose
// id is param, ordered by the bytes of the source's name: bytewise is the
// collation that does ("" on SQLite, whose default does; ` COLLATE "C"` on
// PostgreSQL).
func SourcesQuery(param, bytewise string) string {
	return `SELECT ` + rowscan.DeletionSourceColumns + `
		FROM deletion_sources ds LEFT JOIN messages m ON m.id = ds.message LEFT JOIN deliveries dl ON dl.message = ds.message
		WHERE ds.deletion = ` + param + ` ORDER BY ds.source` + bytewise
}
