// Package sharedsql builds the statements both engines run alike, the
// delivery filter of List, Retry and Resend, List, Get, the start of Retry
// and Resend and the breaker rows' upsert, so that they are written once. They differ only in how a parameter is
// written (Placeholder); what an engine runs its own way (its indexes, its
// collation, its locking) stays in the engine.
package sharedsql

import (
	"strconv"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
)

// Placeholder returns the next parameter's placeholder: "?" in SQLite,
// "$1", "$2", … in PostgreSQL.
type Placeholder func() string

// Question is SQLite's Placeholder.
func Question() string { return "?" }

// Numbered is PostgreSQL's Placeholder, numbering from n.
func Numbered(n int) Placeholder {
	return func() string { n++; return "$" + strconv.Itoa(n-1) }
}

// Where is the WHERE clause of f on deliveries d, and its parameters.
func Where(f store.Filter, p Placeholder) (string, []any) {
	clause, args := " WHERE d.id > "+p(), []any{f.After}
	switch {
	case f.Status.Valid():
		// A literal, not a parameter, so that the planner knows that the
		// partial index of that status (deliveries_due,
		// deliveries_settled) holds every row the filter selects.
		clause += " AND d.status = '" + string(f.Status) + "'"
	case f.Status != "":
		clause += " AND false" // no delivery has an unknown status
	}
	if f.Source != "" {
		clause += " AND d.source = " + p()
		args = append(args, f.Source)
	}
	if f.Destination != "" {
		clause += " AND d.destination = " + p()
		args = append(args, f.Destination)
	}
	if f.Before > 0 {
		clause += " AND d.id < " + p()
		args = append(args, f.Before)
	}
	if !f.Since.IsZero() {
		clause += " AND d.created_at >= " + p()
		args = append(args, store.Millis(f.Since))
	}
	if f.Endpoint != "" {
		// A semi-join probing attempts_delivery per delivery, in the
		// order the deliveries are walked: no index on attempts.url
		// (it would cost every attempt's insert), and a page stops at
		// Limit matches.
		clause += " AND EXISTS (SELECT 1 FROM attempts a WHERE a.delivery = d.id AND a.url = " + p() + ")"
		args = append(args, f.Endpoint)
	}
	return clause, args
}

// List is store.Store.List's statement for f, and its parameters: rows of
// rowscan.DeliveryColumns.
func List(f store.Filter, p Placeholder) (string, []any) {
	clause, args := Where(f, p)
	q := `SELECT ` + rowscan.DeliveryColumns + ` FROM deliveries d JOIN messages m ON m.id = d.message` + clause
	if f.Desc {
		q += " ORDER BY d.id DESC"
	} else {
		q += " ORDER BY d.id"
	}
	if f.Limit > 0 {
		q += " LIMIT " + p()
		args = append(args, f.Limit)
	}
	return q, args
}

// Delivery is the statement of one delivery with its body, by id (one
// parameter): a row of rowscan.DeliveryColumns and rowscan.BodyColumns.
func Delivery(p Placeholder) string {
	return `SELECT ` + rowscan.DeliveryColumns + `, ` + rowscan.BodyColumns + ` FROM deliveries d
		JOIN messages m ON m.id = d.message WHERE d.id = ` + p()
}

// Attempts is the statement of one delivery's attempts, by its id (one
// parameter), in order: rows of rowscan.AttemptColumns.
func Attempts(p Placeholder) string {
	return `SELECT ` + rowscan.AttemptColumns + ` FROM attempts WHERE delivery = ` + p() + ` ORDER BY id`
}

// SaveEndpoint is store.Store.SaveEndpoint's statement (the last writer
// wins), and its parameters.
func SaveEndpoint(st store.EndpointState, p Placeholder) (string, []any) {
	q := `INSERT INTO endpoint_states (source, url, state, failures, since, next_probe_at, node, last_error, updated_at)
		VALUES (` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `, ` + p() + `)
		ON CONFLICT (source, url) DO UPDATE SET state = excluded.state, failures = excluded.failures,
		since = excluded.since, next_probe_at = excluded.next_probe_at, node = excluded.node,
		last_error = excluded.last_error, updated_at = excluded.updated_at`
	return q, []any{st.Source, st.URL, string(st.State), st.Failures, store.Millis(st.Since), store.Millis(st.NextProbe),
		st.Node, st.LastError, store.Millis(st.UpdatedAt)}
}
