package sqlite

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
)

// Ingest implements store.Store.
func (s *Store) Ingest(ctx context.Context, msgs []store.Message) error {
	_, err := s.IngestLeased(ctx, msgs, store.IngestLease{})
	return err
}

// IngestLeased implements store.Store.
func (s *Store) IngestLeased(ctx context.Context, msgs []store.Message, lease store.IngestLease) ([]store.Delivery, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	now := store.Millis(s.opts.Now())
	var leased []store.Delivery
	err := s.doReplayable(ctx, len(msgs), func(ctx context.Context, tx *wtx) error {
		var err error
		if leased, err = insertMessages(ctx, tx, msgs, now, lease); err != nil {
			return err
		}
		until := store.Millis(lease.Until)
		for i, d := range leased {
			s.leases.take(d.ID, leaseOf{source: d.Source, owner: lease.Owner, until: until})
			leased[i].LeaseEnd = lease.Until
		}
		return nil
	})
	if err != nil {
		return nil, classify(err)
	}
	return leased, nil
}

// insertMessages stores msgs and their deliveries, leasing the first
// lease.Limit deliveries (see IngestLeased), and returns those.
func insertMessages(ctx context.Context, tx *wtx, msgs []store.Message, now int64, lease store.IngestLease) ([]store.Delivery, error) {
	in := ingestion{now: now, limit: lease.Limit, room: lease.Limit}
	for len(msgs) > 0 {
		n := min(len(msgs), insertChunk)
		if err := in.chunk(ctx, tx, msgs[:n]); err != nil {
			return nil, err
		}
		msgs = msgs[n:]
	}
	return in.leased, nil
}

// insertChunk bounds the rows of one multi-row INSERT (7 parameters each,
// far below SQLite's limit). One statement per chunk, not per row, is what
// makes ingest fast.
const insertChunk = 100

// ingestion is one IngestLeased call's progress through its chunks.
type ingestion struct {
	now    int64
	limit  int // deliveries to lease at most
	room   int // deliveries still to lease
	leased []store.Delivery
}

func (in *ingestion) chunk(ctx context.Context, tx *wtx, msgs []store.Message) error {
	args := make([]any, 0, len(msgs)*7)
	for i := range msgs {
		m := &msgs[i]
		args = append(args, m.Source, m.MessageID, m.Type, m.UserID, store.Millis(m.ReceivedAt), m.Body, m.Form)
	}
	// Rows already stored (a client's retry) are skipped.
	res, err := tx.ExecContext(ctx, insertMessagesSQL[len(msgs)], args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return err
	}
	// The rows this statement inserted are the n past the largest id
	// before it: the writer is the only one, and a rowid table gives each
	// new row the largest id plus one, so they are consecutive and end at
	// the last one inserted (a row skipped as known takes no id). Read
	// from the statement's result, not by a SELECT max(id) before it: that
	// was a second statement for every ingest, the half of its cost for a
	// request of one message.
	last, err := res.LastInsertId()
	if err != nil {
		return err
	}
	before := last - n
	if dest, ok := oneDestination(msgs); ok {
		return in.deliverAll(ctx, tx, msgs, before, int(n), dest)
	}
	if in.room == 0 && int(n) == len(msgs) {
		return in.deliverListed(ctx, tx, msgs, before)
	}
	return in.deliverEach(ctx, tx, msgs, before)
}

// deliverListedSQL makes the deliveries of messages stored with the
// consecutive ids past ?3 from ?2, a JSON array of each one's
// destinations: one statement of the same text for any chunk, prepared
// once, where a VALUES list of six parameters a delivery was a new
// statement to parse each time (the cost of a source whose destinations
// subscribe to different messages). Their ids follow the messages,
// then each one's destinations in its order, as on PostgreSQL.
//
// OR FAIL, here and in ingest's other INSERTs: a statement that may
// abort half way keeps a statement journal of every page it changes,
// to undo its own part alone; an op that fails is undone whole by the
// writer (its savepoint, or the group's transaction), so none is needed.
const deliverListedSQL = `INSERT OR FAIL INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
	SELECT m.id, m.source, d.value, 'pending', m.received_at, ?1, ?1
	FROM json_each(?2) AS e, json_each(e.value) AS d, messages AS m
	WHERE m.id = ?3 + e.key + 1
	ORDER BY e.key, d.key`

// deliverOneEachSQL is deliverListedSQL for messages with one
// destination or none each: ?2 holds each one's, or null, and is read
// with one json_each rather than one for each message. Ordered by
// json_each's rowid, which counts its rows in the array's order: json_each
// yields them in that order and says so to the planner, so this ORDER BY
// costs nothing, where one by key sorted the rows in a temporary B-tree.
const deliverOneEachSQL = `INSERT OR FAIL INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
	SELECT m.id, m.source, e.value, 'pending', m.received_at, ?1, ?1
	FROM json_each(?2) AS e, messages AS m
	WHERE e.type = 'text' AND m.id = ?3 + e.key + 1
	ORDER BY e.rowid`

// deliverListed creates each message's deliveries, to its own
// destinations, when every message of msgs was stored (none known) with
// the ids past before, in msgs' order, and none is leased.
func (in *ingestion) deliverListed(ctx context.Context, tx *wtx, msgs []store.Message, before int64) error {
	oneEach := true
	some := false
	for i := range msgs {
		oneEach = oneEach && len(msgs[i].Destinations) <= 1
		some = some || len(msgs[i].Destinations) > 0
	}
	if !some {
		return nil
	}
	list := make([]byte, 0, 16*len(msgs))
	list = append(list, '[')
	for i := range msgs {
		if i > 0 {
			list = append(list, ',')
		}
		ds := msgs[i].Destinations
		switch {
		case oneEach && len(ds) == 0:
			list = append(list, "null"...)
		case oneEach:
			list = rawjson.AppendString(list, ds[0])
		default:
			list = append(list, '[')
			for j, d := range ds {
				if j > 0 {
					list = append(list, ',')
				}
				list = rawjson.AppendString(list, d)
			}
			list = append(list, ']')
		}
	}
	list = append(list, ']')
	q := deliverListedSQL
	if oneEach {
		q = deliverOneEachSQL
	}
	_, err := tx.ExecContext(ctx, q, in.now, string(list), before)
	return err
}

// insertMessagesSQL[n] inserts n messages.
var insertMessagesSQL = func() (qs [insertChunk + 1]string) {
	for n := 1; n <= insertChunk; n++ {
		qs[n] = `INSERT OR FAIL INTO messages (source, message_id, type, user_id, received_at, body, body_form) VALUES ` +
			strings.Repeat("(?,?,?,?,?,?,?),", n-1) + `(?,?,?,?,?,?,?) ON CONFLICT (source, message_id) DO NOTHING`
	}
	return qs
}()

// oneDestination reports the one destination every message has ("" for
// none), as the messages of a request share their source's.
func oneDestination(msgs []store.Message) (string, bool) {
	dest := ""
	for i, m := range msgs {
		if len(m.Destinations) > 1 {
			return "", false
		}
		d := ""
		if len(m.Destinations) == 1 {
			d = m.Destinations[0]
		}
		if i > 0 && d != dest {
			return "", false
		}
		dest = d
	}
	return dest, true
}

// deliverAll creates a delivery to dest for each of the n messages stored
// past id before, with one statement: no parameters per row, and nothing
// read back but when some are leased.
func (in *ingestion) deliverAll(ctx context.Context, tx *wtx, msgs []store.Message, before int64, n int, dest string) error {
	if dest == "" {
		return nil
	}
	res, err := tx.ExecContext(ctx, `INSERT OR FAIL INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at)
		SELECT id, source, ?, 'pending', received_at, ?, ? FROM messages WHERE id > ? ORDER BY id`, dest, in.now, in.now, before)
	if err != nil || in.room == 0 {
		return err
	}
	last, err := res.LastInsertId()
	if err != nil {
		return err
	}
	first := last - int64(n) + 1 // consecutive, in message order
	// The stored messages in id order: all of msgs, or those a SELECT
	// names when some were known already.
	stored := make([]*store.Message, 0, n)
	if n == len(msgs) {
		for i := range msgs {
			stored = append(stored, &msgs[i])
		}
	} else {
		type key struct{ source, id string }
		byKey := make(map[key]*store.Message, len(msgs))
		for i := range msgs {
			k := key{msgs[i].Source, msgs[i].MessageID}
			if _, dup := byKey[k]; !dup {
				byKey[k] = &msgs[i]
			}
		}
		rows, err := tx.QueryContext(ctx, `SELECT source, message_id FROM messages WHERE id > ? ORDER BY id`, before)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.source, &k.id); err != nil {
				rows.Close()
				return err
			}
			stored = append(stored, byKey[k])
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	for j, m := range stored {
		if in.room == 0 {
			break
		}
		in.room--
		in.leased = append(in.leased, in.delivery(first+int64(j), dest, m))
	}
	return nil
}

// delivery is the new delivery id of m to dest, as Lease returns it.
func (in *ingestion) delivery(id int64, dest string, m *store.Message) store.Delivery {
	return store.Delivery{
		ID: id, Source: m.Source, Destination: dest, MessageID: m.MessageID, Type: m.Type, UserID: m.UserID,
		Status: store.Pending, NextAttempt: store.FromMillis(store.Millis(m.ReceivedAt)),
		CreatedAt: store.FromMillis(in.now), UpdatedAt: store.FromMillis(in.now), Body: m.Body, Form: m.Form,
	}
}

// deliverEach creates the deliveries of the messages stored past id
// before, each to its own destinations.
func (in *ingestion) deliverEach(ctx context.Context, tx *wtx, msgs []store.Message, before int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, source, message_id FROM messages WHERE id > ?`, before)
	if err != nil {
		return err
	}
	type key struct{ source, id string }
	inserted := map[key]int64{}
	for rows.Next() {
		var k key
		var id int64
		if err := rows.Scan(&id, &k.source, &k.id); err != nil {
			rows.Close()
			return err
		}
		inserted[k] = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var q strings.Builder
	var args []any
	q.WriteString(`INSERT OR FAIL INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at) VALUES `)
	// The deliveries to lease: their messages by row id and destination.
	type leaseKey struct {
		msg  int64
		dest string
	}
	var lease map[leaseKey]*store.Message
	for i := range msgs {
		m := &msgs[i]
		id, ok := inserted[key{m.Source, m.MessageID}]
		if !ok {
			continue
		}
		delete(inserted, key{m.Source, m.MessageID}) // a repeat within the request
		for _, dest := range m.Destinations {
			if len(args) > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,'pending',?,?,?)")
			args = append(args, id, m.Source, dest, store.Millis(m.ReceivedAt), in.now, in.now)
			if in.room > 0 {
				in.room--
				if lease == nil {
					lease = map[leaseKey]*store.Message{}
				}
				lease[leaseKey{id, dest}] = m
			}
		}
	}
	if len(args) == 0 {
		return nil
	}
	if lease == nil {
		_, err = tx.ExecContext(ctx, q.String(), args...)
		return err
	}
	q.WriteString(` RETURNING id, message, destination`)
	rows, err = tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	start := len(in.leased)
	for rows.Next() {
		var d store.Delivery
		var msg int64
		if err := rows.Scan(&d.ID, &msg, &d.Destination); err != nil {
			return err
		}
		m := lease[leaseKey{msg, d.Destination}]
		if m == nil || len(in.leased) == in.limit {
			continue // not leased; or a destination named twice
		}
		in.leased = append(in.leased, in.delivery(d.ID, d.Destination, m))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// RETURNING's order is not promised; ids follow msgs' order.
	slices.SortFunc(in.leased[start:], func(a, b store.Delivery) int { return cmp.Compare(a.ID, b.ID) })
	return rows.Close()
}
