package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/deletion"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
)

// A deletion request runs in bounded steps, so that a user with a hundred
// thousand messages does not hold the writer for seconds (issue 13):
//
//  1. record: one transaction stores the request (deletions, with upto, the
//     newest message id at that moment, and done_at 0), its delete
//     notifications, and a deletion_sources row per source with zero
//     counts.
//  2. purge: a page of the user's messages in the affected sources with
//     ids up to upto is read from the read pool (no writer held), then one
//     transaction cancels their pending deliveries, empties their bodies
//     and adds what it changed to deletion_sources. Repeated until no
//     page is left. Every step is idempotent (it changes only pending
//     deliveries and non-empty bodies) and its counts commit with its
//     changes, so a step done twice counts nothing twice.
//  3. scrub: the WAL is checkpointed into the database file and truncated
//     to zero bytes. secure_delete (see Open) has zeroed the freed bytes
//     of every emptied body, in its row's page and its overflow pages, so
//     after this no file of the store holds the bodies: not the database
//     file, not the WAL, and the -shm file never holds content.
//  4. done: deletions.done_at is set.
//
// A deletion whose done_at is 0 is unfinished: the process stopped between
// its steps. Open finishes every such deletion in the background, its
// messages held out of leases meanwhile (recover.go), and so does every
// CreateDeletion (the caller's retry), after them.

// deletionPageSize is the number of messages one purge step changes: about
// ten milliseconds of writer time for small bodies, a few tens when every
// body spills into overflow pages. Tests make a deletion take many steps
// with a smaller Store.deletionStep.
const deletionPageSize = 1000

// CreateDeletion implements store.Admin. Once its request is recorded the
// deletion runs to the end even if ctx ends, and an unfinished one left by
// an earlier process or call is finished too.
func (s *Store) CreateDeletion(ctx context.Context, r store.DeletionRequest) (*store.Deletion, error) {
	return deletion.Create(ctx, deletions{s}, r)
}

// Deletion implements store.Admin.
func (s *Store) Deletion(ctx context.Context, id string) (*store.Deletion, error) {
	return deletion.Read(ctx, deletions{s}, id)
}

// recordDeletion is step 1. Once it is on disk, the request's messages are
// held out of leases until it is done (recover.go); a lease in between
// the commit and the hold may still take one, as before holds existed.
func (s *Store) recordDeletion(ctx context.Context, r store.DeletionRequest) error {
	now := store.Millis(s.opts.Now())
	if err := s.do(ctx, len(r.Messages), func(ctx context.Context, tx *wtx) error {
		return deletion.Record(ctx, recordTx{tx, now}, r)
	}); err != nil {
		return err
	}
	if err := s.heldDeletion(context.WithoutCancel(ctx), r); err != nil {
		return fmt.Errorf("deletion %s is recorded, its messages not held out of leases: %w", r.ID, err)
	}
	return nil
}

// deletions is the store as package deletion's Engine: Record and Finish
// are steps 1 and 2 to 4, Request and Sources the read.
type deletions struct{ s *Store }

func (d deletions) Record(ctx context.Context, r store.DeletionRequest) error {
	return d.s.recordDeletion(ctx, r)
}

// Finish waits for the deletions' turn: the ones a stopped process left
// are finished in the background (recover.go), and a request recorded
// meanwhile is purged after them.
func (d deletions) Finish(ctx context.Context) error {
	select {
	case d.s.deletionTurn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.s.deletionTurn }()
	return d.s.finishDeletions(ctx)
}

func (d deletions) Request(ctx context.Context, id string) (user string, created int64, done, found bool, err error) {
	err = d.s.read.QueryRowContext(ctx, `SELECT user_id, created_at, done_at != 0 FROM deletions WHERE id = ?`, id).Scan(&user, &created, &done)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, false, false, nil
	}
	return user, created, done, err == nil, err
}

func (d deletions) Sources(ctx context.Context, id string) ([]store.DeletionSource, error) {
	rows, err := d.s.read.QueryContext(ctx, deletion.SourcesQuery("?", ""), id)
	if err != nil {
		return nil, err
	}
	return collect(rows, rowscan.DeletionSource)
}

// recordTx is step 1's statements in the writer's transaction.
type recordTx struct {
	tx  *wtx
	now int64
}

// Insert implements deletion.Tx. upto, the newest message id at this
// moment, bounds the purge's pages.
func (t recordTx) Insert(ctx context.Context, r store.DeletionRequest) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO deletions (id, user_id, created_at, upto, done_at)
		VALUES (?, ?, ?, (SELECT coalesce(max(id), 0) FROM messages), 0)`,
		r.ID, r.UserID, store.Millis(r.CreatedAt))
	return err
}

// Purge implements deletion.Tx: nothing, the purge comes after in steps.
func (recordTx) Purge(context.Context, store.DeletionRequest, string) (deletion.Counts, error) {
	return deletion.Counts{}, nil
}

// Notify implements deletion.Tx.
func (t recordTx) Notify(ctx context.Context, msgs []store.Message) error {
	_, err := insertMessages(ctx, t.tx, msgs, t.now, store.IngestLease{})
	return err
}

// MessageRow implements deletion.Tx.
func (t recordTx) MessageRow(ctx context.Context, source, messageID string) (int64, error) {
	var id int64
	err := t.tx.QueryRowContext(ctx, `SELECT id FROM messages WHERE source = ? AND message_id = ?`, source, messageID).Scan(&id)
	return id, err
}

// AddSource implements deletion.Tx.
func (t recordTx) AddSource(ctx context.Context, request, source string, message *int64, c deletion.Counts) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO deletion_sources (deletion, source, message, cancelled, purged)
		VALUES (?, ?, ?, ?, ?)`, request, source, message, c.Cancelled, c.Purged)
	return err
}

// finishDeletions runs steps 2 to 4 of every unfinished deletion, oldest
// first, with one scrub for all of them, and drops their holds; the caller
// holds the deletions' turn.
func (s *Store) finishDeletions(ctx context.Context) error {
	rows, err := s.read.QueryContext(ctx, `SELECT id FROM deletions WHERE done_at = 0 ORDER BY created_at, id`)
	if err != nil {
		return err
	}
	ids, err := collect(rows, func(sc rowscan.Scanner) (id string, err error) { return id, sc.Scan(&id) })
	if err != nil || len(ids) == 0 {
		return err
	}
	for _, id := range ids {
		if err := s.purgeDeletion(ctx, id); err != nil {
			return fmt.Errorf("deletion %s: %w", id, err)
		}
	}
	if err := s.Checkpoint(ctx); err != nil {
		return err
	}
	done := store.Millis(s.opts.Now())
	if err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `UPDATE deletions SET done_at = ? WHERE id = ?`, done, id); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	s.held.drop(ids)
	return nil
}

// purgeDeletion is step 2 of deletion id: page after page until none is
// left. Delete notifications are left as they are (see deletion.Tx.Purge).
func (s *Store) purgeDeletion(ctx context.Context, id string) error {
	var user string
	var upto int64
	if err := s.read.QueryRowContext(ctx, `SELECT user_id, upto FROM deletions WHERE id = ?`, id).Scan(&user, &upto); err != nil {
		return err
	}
	for after := int64(0); ; {
		page, err := s.deletionPage(ctx, id, user, after, upto)
		if err != nil || len(page) == 0 {
			return err
		}
		if err := s.purgeStep(ctx, id, page); err != nil {
			return err
		}
		after = page[len(page)-1].id
	}
}

// doomed is one message a deletion empties.
type doomed struct {
	id     int64
	source string
}

// deletionPage reads, without the writer, the next page of the user's
// messages (ids after after, up to upto) in the deletion's sources.
// Messages are not indexed by user (migration 2): the pages walk the table
// in id order, so the whole deletion reads it once.
func (s *Store) deletionPage(ctx context.Context, id, user string, after, upto int64) ([]doomed, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT id, source FROM messages
		WHERE id > ? AND id <= ? AND user_id = ? AND type != 'delete'
			AND source IN (SELECT source FROM deletion_sources WHERE deletion = ?)
		ORDER BY id LIMIT ?`, after, upto, user, id, s.deletionStep)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(sc rowscan.Scanner) (d doomed, err error) { return d, sc.Scan(&d.id, &d.source) })
}

// purgeStep cancels the pending deliveries of page and empties its bodies
// in one transaction, and adds what it changed to the deletion's counts.
func (s *Store) purgeStep(ctx context.Context, id string, page []doomed) error {
	now := store.Millis(s.opts.Now())
	bySource := map[string][]any{}
	var order []string
	for _, d := range page {
		if _, ok := bySource[d.source]; !ok {
			order = append(order, d.source)
		}
		bySource[d.source] = append(bySource[d.source], d.id)
	}
	return s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		for _, src := range order {
			ids := bySource[src]
			in := "(" + strings.Repeat("?,", len(ids)-1) + "?)"
			res, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = 'cancelled', lease_owner = NULL,
				lease_expires_at = 0, last_error = ?, updated_at = ? WHERE status = 'pending' AND message IN `+in,
				append([]any{deletion.Reason(id), now}, ids...)...)
			if err != nil {
				return err
			}
			c, _ := res.RowsAffected()
			res, err = tx.ExecContext(ctx, `UPDATE messages SET body = X'' WHERE length(body) > 0 AND id IN `+in, ids...)
			if err != nil {
				return err
			}
			p, _ := res.RowsAffected()
			if c == 0 && p == 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE deletion_sources SET cancelled = cancelled + ?, purged = purged + ?
				WHERE deletion = ? AND source = ?`, c, p, id, src); err != nil {
				return err
			}
		}
		return nil
	})
}
