package postgres

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ingestSQL stores the messages of one or more IngestLeased calls (an
// ingest group, ingestgroup.go) and their deliveries in one statement, so
// one round trip and one commit for them all. Messages already stored are
// not returned by the INSERT and so get no deliveries.
//
// The messages go in (source, message_id) order, whichever calls they
// came from (ingestStmt): an INSERT … ON CONFLICT takes each row's key in
// the unique index in the order it inserts the rows, and a transaction
// that meets a key another one inserted and has not committed waits for
// it. Two groups sharing messages in different orders each held a key
// the other waited for: a deadlock, which the server breaks only after
// its deadlock_timeout (1 s), failing one group to run again (issue 43:
// 37 deadlocks, p99 1.0-1.9 s). In one order for every statement, a
// transaction waits only for one that holds a key after all of its own,
// so no wait closes a circle. The deliveries take no key, so their order
// is free: they follow the calls' order (d.r, d.ord: the order the window
// sorts them in already), so a call's delivery ids follow its request's
// order.
//
// The first $13[r] new deliveries of call r, in its order, are created
// leased to $14[r] until $15[r] after the database's clock (IngestLeased;
// see leaseSQL), and the statement returns those. $12[r] is call r's
// created and updated time.
const ingestSQL = `WITH m AS (
	INSERT INTO messages (source, message_id, type, user_id, received_at, body, body_form)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bytea[], $7::smallint[])
	ON CONFLICT (source, message_id) DO NOTHING
	RETURNING id, source, message_id, received_at),
l AS (
	INSERT INTO deliveries (message, source, destination, status, next_attempt_at, created_at, updated_at,
		lease_owner, lease_expires_at)
	SELECT m.id, m.source, d.destination, 'pending', m.received_at, ($12::bigint[])[d.r], ($12::bigint[])[d.r],
		CASE WHEN row_number() OVER w <= ($13::bigint[])[d.r] THEN ($14::text[])[d.r] END,
		CASE WHEN row_number() OVER w <= ($13::bigint[])[d.r] THEN ` + clockSQL + ` + ($15::bigint[])[d.r] ELSE 0 END
	FROM m JOIN unnest($8::text[], $9::text[], $10::text[], $11::int[]) WITH ORDINALITY AS d (source, message_id, destination, r, ord)
		ON d.source = m.source AND d.message_id = m.message_id
	WINDOW w AS (PARTITION BY d.r ORDER BY d.ord)
	ORDER BY d.r, d.ord
	RETURNING id, message, destination, lease_owner IS NOT NULL AS leased)
SELECT l.id, m.source, m.message_id, l.destination FROM l JOIN m ON m.id = l.message WHERE l.leased`

// ingest is one IngestLeased call: its messages (a repeat within the
// call is skipped), its time and its lease.
type ingest struct {
	msgs  []store.Message
	now   int64
	lease store.IngestLease
	keep  []int // index in msgs of each message's first occurrence, in request order
}

type msgKey struct{ source, id string }

func newIngest(msgs []store.Message, now int64, lease store.IngestLease) *ingest {
	in := &ingest{msgs: msgs, now: now, lease: lease, keep: make([]int, 0, len(msgs))}
	seen := make(map[msgKey]bool, len(msgs))
	for i := range msgs {
		k := msgKey{msgs[i].Source, msgs[i].MessageID}
		if !seen[k] {
			seen[k] = true
			in.keep = append(in.keep, i)
		}
	}
	return in
}

// ingestStmt is ingestSQL for a group of calls: its arguments, and what
// turns the leased rows it returns into each call's deliveries.
type ingestStmt struct {
	group []*ingest
	// stored is, for each message, the call it is stored for (the first
	// in the group that has it: the others skip it, as a call skips a
	// message another transaction stored) and its index in that call's
	// msgs.
	stored map[msgKey]msgRef
	args   []any
}

// msgRef is group[call].msgs[i].
type msgRef struct{ call, i int }

// newIngestStmt builds the statement of group; until[r] is call r's lease
// end after the database's clock (Store.leaseClock of its lease.Until,
// just before sending).
func newIngestStmt(group []*ingest, until []int64) *ingestStmt {
	n := 0
	for _, in := range group {
		n += len(in.keep)
	}
	st := &ingestStmt{group: group, stored: make(map[msgKey]msgRef, n)}
	rows := make([]msgRef, 0, n)
	for r, in := range group {
		for _, i := range in.keep {
			k := msgKey{in.msgs[i].Source, in.msgs[i].MessageID}
			if _, dup := st.stored[k]; !dup {
				st.stored[k] = msgRef{r, i}
				rows = append(rows, msgRef{r, i})
			}
		}
	}
	msg := func(x msgRef) *store.Message { return &group[x.call].msgs[x.i] }
	// One order for every statement's keys (see ingestSQL); no two rows
	// share a key.
	slices.SortFunc(rows, func(a, b msgRef) int {
		ma, mb := msg(a), msg(b)
		return cmp.Or(strings.Compare(ma.Source, mb.Source), strings.Compare(ma.MessageID, mb.MessageID))
	})
	src, mid, typ, uid := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	recv, body, form := make([]int64, 0, n), make([][]byte, 0, n), make([]int16, 0, n)
	for _, x := range rows {
		m := msg(x)
		src, mid, typ, uid = append(src, m.Source), append(mid, m.MessageID), append(typ, m.Type), append(uid, m.UserID)
		recv, body, form = append(recv, store.Millis(m.ReceivedAt)), append(body, m.Body), append(form, int16(m.Form))
	}
	dSrc, dMid, dDest, dCall := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]int32, 0, n)
	now, limit, owner := make([]int64, len(group)), make([]int64, len(group)), make([]*string, len(group))
	for r, in := range group {
		for _, i := range in.keep {
			m := &in.msgs[i]
			if st.stored[msgKey{m.Source, m.MessageID}] != (msgRef{r, i}) {
				continue // stored for an earlier call of the group
			}
			for _, d := range m.Destinations {
				dSrc, dMid, dDest, dCall = append(dSrc, m.Source), append(dMid, m.MessageID), append(dDest, d), append(dCall, int32(r+1))
			}
		}
		now[r], limit[r] = in.now, int64(max(in.lease.Limit, 0))
		if limit[r] > 0 {
			owner[r] = &in.lease.Owner
		}
	}
	st.args = []any{src, mid, typ, uid, recv, body, form, dSrc, dMid, dDest, dCall, now, limit, owner, until}
	return st
}

// read turns the leased rows ingestSQL returns into deliveries as Lease
// returns them (the row as inserted, the body as sent), each call's in its
// request's order.
func (st *ingestStmt) read(rows pgx.Rows) ([][]store.Delivery, error) {
	out := make([][]store.Delivery, len(st.group))
	for rows.Next() {
		var d store.Delivery
		if err := rows.Scan(&d.ID, &d.Source, &d.MessageID, &d.Destination); err != nil {
			rows.Close()
			return nil, err
		}
		x := st.stored[msgKey{d.Source, d.MessageID}]
		in := st.group[x.call]
		m := &in.msgs[x.i]
		d.Type, d.UserID, d.Status = m.Type, m.UserID, store.Pending
		d.NextAttempt = store.FromMillis(store.Millis(m.ReceivedAt))
		d.CreatedAt, d.UpdatedAt = store.FromMillis(in.now), store.FromMillis(in.now)
		d.Body, d.Form, d.LeaseEnd = m.Body, m.Form, in.lease.Until
		out[x.call] = append(out[x.call], d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Ids follow each request's order (the INSERT's ORDER BY).
	for _, ds := range out {
		slices.SortFunc(ds, func(a, b store.Delivery) int { return cmp.Compare(a.ID, b.ID) })
	}
	return out, nil
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ingestExec stores msgs (see IngestLeased, leasing none) through q.
func ingestExec(ctx context.Context, q execer, msgs []store.Message, now int64) error {
	_, err := q.Exec(ctx, ingestSQL, newIngestStmt([]*ingest{newIngest(msgs, now, store.IngestLease{})}, []int64{0}).args...)
	return err
}
