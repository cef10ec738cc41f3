// Package rowscan reads the rows both stores' queries return into
// pkg/store's types: the SQLite store (database/sql) and the PostgreSQL
// store (pgx) select the same columns, and their rows both Scan.
package rowscan

import (
	"errors"
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// Scanner is a row: *sql.Row, *sql.Rows, pgx.Row or pgx.CollectableRow.
type Scanner interface {
	Scan(dest ...any) error
}

// DeliveryColumns are the columns Delivery reads, from deliveries d joined
// with messages m.
const DeliveryColumns = `d.id, d.source, d.destination, m.message_id, m.type, m.user_id, d.status, d.attempts,
	d.first_attempt_at, d.next_attempt_at, d.last_error, d.created_at, d.updated_at`

// Delivery scans DeliveryColumns, then extra, into d.
func Delivery(sc Scanner, d *store.Delivery, extra ...any) error {
	var first, next, created, updated int64
	var status string
	dst := append([]any{&d.ID, &d.Source, &d.Destination, &d.MessageID, &d.Type, &d.UserID, &status, &d.Attempts,
		&first, &next, &d.LastError, &created, &updated}, extra...)
	if err := sc.Scan(dst...); err != nil {
		return err
	}
	d.Status = store.Status(status)
	d.FirstAttempt, d.NextAttempt = store.FromMillis(first), store.FromMillis(next)
	d.CreatedAt, d.UpdatedAt = store.FromMillis(created), store.FromMillis(updated)
	return nil
}

// DeliveryRow scans a row of DeliveryColumns.
func DeliveryRow(sc Scanner) (store.Delivery, error) {
	var d store.Delivery
	err := Delivery(sc, &d)
	return d, err
}

// BodyColumns are the columns of a delivery's message that DeliveryBody
// reads after DeliveryColumns: the body and its store.Form.
const BodyColumns = `m.body, m.body_form`

// DeliveryBody scans DeliveryColumns and BodyColumns into d.
func DeliveryBody(sc Scanner, d *store.Delivery) error {
	var form int16
	err := Delivery(sc, d, &d.Body, &form)
	d.Form = store.Form(form)
	return err
}

// DeliveryWithBody scans a row of DeliveryColumns and BodyColumns.
func DeliveryWithBody(sc Scanner) (store.Delivery, error) {
	var d store.Delivery
	err := DeliveryBody(sc, &d)
	return d, err
}

// LeasedColumns are the columns Leased reads, from deliveries d joined
// with messages m: what the forwarder needs of a leased delivery. Fewer
// columns than DeliveryColumns and BodyColumns is what makes a lease
// cheap: reading a column costs about as much as finding its row.
const LeasedColumns = `d.id, d.destination, m.message_id, d.attempts, d.first_attempt_at, d.next_attempt_at, d.last_error,
	m.body, m.body_form`

// Leased returns a scanner of LeasedColumns into a pending delivery of
// source, as store.Store.Lease returns it.
func Leased(source string) func(Scanner) (store.Delivery, error) {
	return func(sc Scanner) (store.Delivery, error) {
		d := store.Delivery{Source: source, Status: store.Pending}
		var first, next int64
		var form int16
		err := sc.Scan(&d.ID, &d.Destination, &d.MessageID, &d.Attempts, &first, &next, &d.LastError, &d.Body, &form)
		d.FirstAttempt, d.NextAttempt, d.Form = store.FromMillis(first), store.FromMillis(next), store.Form(form)
		return d, err
	}
}

// AttemptColumns are the columns Attempt reads, from attempts.
const AttemptColumns = `delivery_no, endpoint, url, started_at, latency_us, status, class, error, excerpt, outcome`

// Attempt scans AttemptColumns.
func Attempt(sc Scanner) (store.Attempt, error) {
	var a store.Attempt
	var start, lat int64
	err := sc.Scan(&a.Delivery, &a.Endpoint, &a.URL, &start, &lat, &a.Status, &a.Class, &a.Error, &a.Excerpt, &a.Outcome)
	a.Start, a.Latency = store.FromMillis(start), time.Duration(lat)*time.Microsecond
	return a, err
}

// CountColumns are the columns Count reads, from deliveries grouped by
// source and status.
const CountColumns = `source, status, count(*)`

// Count scans CountColumns.
func Count(sc Scanner) (store.Count, error) {
	var c store.Count
	var status string
	err := sc.Scan(&c.Source, &status, &c.N)
	c.Status = store.Status(status)
	return c, err
}

// DeletionSourceColumns are the columns DeletionSource reads, from
// deletion_sources ds left-joined with messages m and deliveries dl: the
// message and delivery are absent when nothing was sent to the source.
const DeletionSourceColumns = `ds.source, ds.cancelled, ds.purged, m.message_id, dl.id, dl.status, dl.attempts, dl.last_error`

// DeletionSource scans DeletionSourceColumns.
func DeletionSource(sc Scanner) (store.DeletionSource, error) {
	var ds store.DeletionSource
	var msgID, status, lastErr *string
	var delivery *int64
	var attempts *int
	if err := sc.Scan(&ds.Source, &ds.Cancelled, &ds.Purged, &msgID, &delivery, &status, &attempts, &lastErr); err != nil {
		return ds, err
	}
	ds.Notified = msgID != nil
	if msgID != nil {
		ds.MessageID = *msgID
	}
	if delivery != nil {
		ds.Delivery, ds.Status, ds.Attempts, ds.LastError = *delivery, store.Status(*status), *attempts, *lastErr
	}
	return ds, nil
}

// EndpointColumns are the columns Endpoint reads, from endpoint_states.
const EndpointColumns = `source, url, state, failures, since, next_probe_at, node, last_error, updated_at`

// Endpoint scans EndpointColumns.
func Endpoint(sc Scanner) (store.EndpointState, error) {
	var st store.EndpointState
	var state string
	var since, next, updated int64
	err := sc.Scan(&st.Source, &st.URL, &state, &st.Failures, &since, &next, &st.Node, &st.LastError, &updated)
	st.State, st.Since, st.NextProbe, st.UpdatedAt = store.Health(state), store.FromMillis(since), store.FromMillis(next), store.FromMillis(updated)
	return st, err
}

// Values yields each (user_id, value) row to yield, then the rows' error
// if any, stopping when yield does.
func Values(rows Rows, yield func(store.Value, error) bool) {
	for rows.Next() {
		var v store.Value
		if err := rows.Scan(&v.UserID, &v.Value); err != nil {
			yield(store.Value{}, err)
			return
		}
		if !yield(v, nil) {
			return
		}
	}
	if err := rows.Err(); err != nil {
		yield(store.Value{}, err)
	}
}

// Pending scans a row of (source, pending deliveries, created_at of the
// oldest), the rows of both engines' statsSQL.
func Pending(sc Scanner) (store.SourcePending, error) {
	var p store.SourcePending
	var created int64
	err := sc.Scan(&p.Source, &p.N, &created)
	p.Oldest = store.FromMillis(created)
	return p, err
}

// Detail reads store.Store.Get's answer for delivery id: row is the
// delivery's row of DeliveryColumns and BodyColumns (noRows the driver's
// error when there is none: store.ErrNotFound), attempts reads its
// attempts once the row is read.
func Detail(id int64, row Scanner, noRows error, attempts func() ([]store.Attempt, error)) (*store.Detail, error) {
	var d store.Detail
	if err := DeliveryBody(row, &d.Delivery); err != nil {
		if errors.Is(err, noRows) {
			return nil, fmt.Errorf("delivery %d: %w", id, store.ErrNotFound)
		}
		return nil, err
	}
	var err error
	if d.Records, err = attempts(); err != nil {
		return nil, err
	}
	return &d, nil
}
