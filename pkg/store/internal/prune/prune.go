// Package prune is the prune pass both engines run (store.Store.Prune):
// messages are examined in id order, which is the order they arrived in,
// store.PruneStep at a time, each step in a transaction of its own, and a
// pass ends at the first message inside the window. An engine supplies a
// step's statements (Tx) and its transaction (Pass's run); what differs
// stays with it: SQLite gives free pages back after a pass, PostgreSQL
// locks what a step examines against other nodes.
package prune

import (
	"context"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
)

// Tx is one engine's statements of a step, all in the step's transaction.
type Tx interface {
	// Candidates reads (Scan) the messages after id after and returns the
	// ones received before cutoff that may go: no pending delivery, not a
	// delete notification. It returns too the last id examined and whether
	// the pass is over.
	Candidates(ctx context.Context, after, cutoff int64) (ids []int64, last int64, done bool, err error)
	// Remove runs stmt, one of the removals below, with its %s replaced by
	// the engine's test of an id against ids (IN (?, ...) on SQLite, =
	// ANY($1) on PostgreSQL), and returns the rows it removed.
	Remove(ctx context.Context, stmt string, ids []int64) (int64, error)
}

// The removals of a step's messages, children first.
const (
	removeAttempts   = `DELETE FROM attempts WHERE delivery IN (SELECT id FROM deliveries WHERE message %s)`
	removeDeliveries = `DELETE FROM deliveries WHERE message %s`
	removeMessages   = `DELETE FROM messages WHERE id %s`
)

// Pass prunes every message received before cutoff (Unix milliseconds)
// that may go, a step at a time. run runs one step in a transaction of its
// own (and again, as the engine retries: the step starts afresh each
// time); a step that fails ends the pass with what the earlier ones
// removed.
func Pass(cutoff int64, run func(step func(context.Context, Tx) error) error) (store.Pruned, error) {
	var total store.Pruned
	var after int64
	for {
		var n store.Pruned
		var last int64
		var done bool
		err := run(func(ctx context.Context, tx Tx) error {
			var err error
			n, last, done, err = step(ctx, tx, after, cutoff)
			return err
		})
		if err != nil {
			return total, err
		}
		total.Add(n)
		if done {
			return total, nil
		}
		after = last
	}
}

// step examines up to store.PruneStep messages after id after and removes
// the prunable ones.
func step(ctx context.Context, tx Tx, after, cutoff int64) (n store.Pruned, last int64, done bool, err error) {
	ids, last, done, err := tx.Candidates(ctx, after, cutoff)
	if err != nil || len(ids) == 0 {
		return n, last, done, err
	}
	for _, r := range [...]struct {
		stmt  string
		count *int64
	}{{removeAttempts, &n.Attempts}, {removeDeliveries, &n.Deliveries}, {removeMessages, &n.Messages}} {
		k, err := tx.Remove(ctx, r.stmt, ids)
		if err != nil {
			return n, last, false, err
		}
		*r.count += k
	}
	return n, last, done, nil
}

// Scan reads the rows of a step's scan: (id, candidate, old) of up to
// store.PruneStep messages after id after, in id order. It returns the
// candidates among the old ones, the last id examined, and whether the
// pass is over: it stops at the first message inside the window (ids
// follow arrival), or when fewer rows came than a step asks. The caller
// closes rows.
func Scan(rows rowscan.Rows, after int64) (ids []int64, last int64, done bool, err error) {
	last, examined := after, 0
	for rows.Next() {
		var id int64
		var candidate, old bool
		if err := rows.Scan(&id, &candidate, &old); err != nil {
			return nil, after, false, err
		}
		if !old {
			return ids, last, true, rows.Err()
		}
		examined++
		last = id
		if candidate {
			ids = append(ids, id)
		}
	}
	return ids, last, examined < store.PruneStep, rows.Err()
}
