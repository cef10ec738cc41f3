package sharedsql

import (
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
)

// Resendable narrows a Where clause on deliveries d joined to messages m
// to what Resend sends again: finished, not cancelled, and with its
// message's body (a deletion request empties it).
const Resendable = ` AND d.status IN ('delivered', 'failed', 'dead') AND length(m.body) > 0`

// Resend is the start of Resend's statement, up to the WHERE of the
// deliveries d (joined to their messages m) it selects, and its
// parameters: the caller appends a clause, Resendable and ")". The
// delivery starts afresh as Retry starts one, its lease gone too; its
// attempt rows are not touched.
func Resend(now int64, p Placeholder) (string, []any) {
	return restart(now, p, `, lease_owner = NULL, lease_expires_at = 0`, ` JOIN messages m ON m.id = d.message`)
}

// Retry is the start of Retry's statement, up to the WHERE of the
// deliveries d it selects, and its parameters: the caller appends a
// clause, Retryable, its engine's test that a delivery is not under a live
// lease (SQLite's leases are in its memory, PostgreSQL's in the row) and
// ")". The delivery starts afresh: no attempts, a new retry window, due
// at now.
func Retry(now int64, p Placeholder) (string, []any) {
	return restart(now, p, "", "")
}

// Retryable narrows a Where clause on deliveries d to what Retry may
// start again: not delivered, not cancelled.
const Retryable = ` AND d.status NOT IN ('delivered', 'cancelled')`

// restart is Retry's and Resend's start, set adding to what it sets and
// join to the deliveries d it selects from.
func restart(now int64, p Placeholder, set, join string) (string, []any) {
	return `UPDATE deliveries SET status = 'pending', attempts = 0, first_attempt_at = 0, next_attempt_at = ` + p() + `,
		last_error = ''` + set + `, updated_at = ` + p() + `
		WHERE id IN (SELECT d.id FROM deliveries d` + join, []any{now, now}
}

// ResendSelected is Resend's statement by f, and its parameters: at most
// f.Limit of the deliveries f selects (every one when 0), those finished
// longest ago first (updated_at is when a delivery finished), then by id.
func ResendSelected(f store.Filter, now int64, p Placeholder) (string, []any) {
	q, args := Resend(now, p)
	clause, more := Where(f, p)
	q += clause + Resendable
	args = append(args, more...)
	if f.Limit > 0 {
		q += " ORDER BY d.updated_at, d.id LIMIT " + p()
		args = append(args, f.Limit)
	}
	return q + ")", args
}

// ResendLeft is the statement of how many deliveries f selects for
// Resend, one row of one count, and its parameters: after a Resend by f
// with a limit, what it skipped.
func ResendLeft(f store.Filter, p Placeholder) (string, []any) {
	clause, args := Where(f, p)
	return `SELECT count(*) FROM deliveries d JOIN messages m ON m.id = d.message` + clause + Resendable, args
}

// ResendState is the statement of the state of the deliveries a clause
// selects (on deliveries d joined to messages m): rows of id, status and
// whether the message's body was purged.
func ResendState(clause string) string {
	return `SELECT d.id, d.status, length(m.body) = 0 FROM deliveries d JOIN messages m ON m.id = d.message` + clause
}

// Found is one row of ResendState.
type Found struct {
	ID     int64
	Status store.Status
	Purged bool
}

// FoundRow scans a row of ResendState.
func FoundRow(s rowscan.Scanner) (Found, error) {
	var f Found
	err := s.Scan(&f.ID, &f.Status, &f.Purged)
	return f, err
}

// IDRow scans a row of one id (Resend's RETURNING id).
func IDRow(s rowscan.Scanner) (int64, error) {
	var id int64
	err := s.Scan(&id)
	return id, err
}

// Report files the ids given to Resend that it did not make pending
// (those not in resent) by why, in the order given, from their state
// after it (found).
func Report(ids, resent []int64, rows []Found) store.Resent {
	r := store.Resent{N: len(resent)}
	found := make(map[int64]Found, len(rows))
	for _, f := range rows {
		found[f.ID] = f
	}
	done := make(map[int64]bool, len(resent))
	for _, id := range resent {
		done[id] = true
	}
	for _, id := range ids {
		f, ok := found[id]
		switch {
		case done[id]:
			continue
		case !ok:
			r.Unknown = append(r.Unknown, id)
		case f.Status == store.Cancelled || f.Purged:
			r.Purged = append(r.Purged, id)
		default:
			// Pending now: waiting, in flight, or resent meanwhile.
			r.Pending = append(r.Pending, id)
		}
		done[id] = true // an id given twice is reported once
	}
	return r
}
