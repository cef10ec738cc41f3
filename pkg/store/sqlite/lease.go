package sqlite

import (
	"context"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/leasefloor"
	"github.com/evfwd/evfwd/pkg/store/internal/rowscan"
	"github.com/evfwd/evfwd/pkg/store/internal/sharedsql"
)

// Lease implements store.Store.
func (s *Store) Lease(ctx context.Context, r store.LeaseRequest) ([]store.Delivery, error) {
	if r.Limit <= 0 {
		return nil, nil
	}
	now := store.Millis(r.Now)
	until := store.Millis(r.Now.Add(r.TTL))
	k := leasefloor.Key{Source: r.Source, Destination: r.Destination}
	var out []store.Delivery
	err := s.doRead(ctx, func(ctx context.Context, tx *wtx) error {
		out = nil // a second run starts afresh (see op.replayable)
		// The due deliveries in the index's order, past those leased: on
		// from the key's floor, or from the head once a second
		// (leasefloor.TTL) and when that finds too few.
		fl, ok := s.leases.floors.Get(k, now)
		head := !ok
		var err error
		if ok {
			out, fl, err = s.leaseRead(ctx, tx, k, &fl, now, r.Limit)
		}
		if err == nil && len(out) < r.Limit {
			head = true
			out, fl, err = s.leaseRead(ctx, tx, k, nil, now, r.Limit)
		}
		if err != nil || len(out) == 0 {
			return err
		}
		s.leases.setFloor(k, fl, now, head)
		for i, d := range out {
			// One process, one clock: the lease is r.Now's (see
			// store.LeaseRequest), here and for its holder.
			s.leases.take(d.ID, leaseOf{source: r.Source, owner: r.Owner, until: until})
			out[i].LeaseEnd = r.Now.Add(r.TTL)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// leaseRead reads up to limit due deliveries of k not leased at now, in due
// order (next_attempt_at, id), after from or, when from is nil, from the
// head; and a floor for k after them (see due).
func (s *Store) leaseRead(ctx context.Context, tx *wtx, k leasefloor.Key, from *leasefloor.Floor, now int64, limit int) ([]store.Delivery, leasefloor.Floor, error) {
	if k.Destination == "" {
		return s.readEvery(ctx, tx, k.Source, from, now, limit)
	}
	return s.readOne(ctx, tx, k, from, now, limit)
}

// readOne is leaseRead for one destination.
func (s *Store) readOne(ctx context.Context, tx *wtx, k leasefloor.Key, from *leasefloor.Floor, now int64, limit int) ([]store.Delivery, leasefloor.Floor, error) {
	if from == nil {
		start, free, err := s.firstFree(ctx, tx, k, now)
		if err != nil || !free {
			return nil, start, err
		}
		from = &start
	}
	return s.due(ctx, tx, k, *from, now, limit)
}

// readEvery is leaseRead for every destination of source: deliveries_due
// keeps each destination's in due order, not the source's, so it reads
// up to limit of each destination's (each from from, or from its own
// head) and merges them. A Lease of every destination is off the
// forwarder's path (it leases one destination at a time), and costs a
// seek per destination with pending deliveries (destinationsSQL), then
// a destination's Lease of up to limit per destination, and a sort of
// what they read (at most limit per destination).
//
// The floor after them is the last one taken when there are limit: every
// due delivery before it, of any destination, was read and taken or
// leased, since a destination that had limit to give gave none past it.
// Otherwise every destination's due ones were read, and it is the last
// row read of any.
func (s *Store) readEvery(ctx context.Context, tx *wtx, source string, from *leasefloor.Floor, now int64, limit int) ([]store.Delivery, leasefloor.Floor, error) {
	var last leasefloor.Floor
	dests, err := destinations(ctx, tx, source)
	if err != nil {
		return nil, last, err
	}
	var out []store.Delivery
	for _, dest := range dests {
		got, fl, err := s.readOne(ctx, tx, leasefloor.Key{Source: source, Destination: dest}, from, now, limit)
		if err != nil {
			return nil, last, err
		}
		if len(got) > 0 && fl.Compare(last) > 0 {
			last = fl
		}
		out = append(out, got...)
	}
	at := func(d store.Delivery) leasefloor.Floor {
		return leasefloor.Floor{Due: store.Millis(d.NextAttempt), ID: d.ID}
	}
	slices.SortFunc(out, func(a, b store.Delivery) int { return at(a).Compare(at(b)) })
	if len(out) >= limit {
		out = out[:limit]
		last = at(out[limit-1])
	}
	return out, last, nil
}

// destinationsCTE is dest (name): the destinations of source (a
// parameter, p) with pending deliveries, in order, and a last NULL: a
// seek in deliveries_due for each, the first after the last (min is an
// index seek, not a read of the entries between).
func destinationsCTE(p string) string {
	return `dest (name) AS (
	SELECT min(destination) FROM deliveries INDEXED BY deliveries_due WHERE source = ` + p + ` AND status = 'pending'
	UNION ALL
	SELECT (SELECT min(destination) FROM deliveries INDEXED BY deliveries_due
		WHERE source = ` + p + ` AND status = 'pending' AND destination > dest.name)
	FROM dest WHERE dest.name IS NOT NULL)`
}

// destinationsSQL is the destinations of ?1 with pending deliveries.
var destinationsSQL = `WITH RECURSIVE ` + destinationsCTE("?1") + ` SELECT name FROM dest WHERE name IS NOT NULL`

// destinations is the destinations of source with pending deliveries.
func destinations(ctx context.Context, tx *wtx, source string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, destinationsSQL, source)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// firstFreeSQL is the due deliveries of a destination (?, ?) at ? in
// due order, from the index alone.
const firstFreeSQL = `SELECT d.id, d.next_attempt_at FROM deliveries d INDEXED BY deliveries_due
	WHERE d.source = ? AND d.destination = ? AND d.status = 'pending' AND d.next_attempt_at <= ?
	ORDER BY d.next_attempt_at, d.id`

// firstFree is the floor right before the first due delivery of k (one
// destination's) not leased at now, found in the due index alone: the
// deliveries in flight sit at its head, and reading their rows and bodies
// only to skip them would cost a lease from the start more than the rows
// it takes. free is false when every due delivery is leased.
func (s *Store) firstFree(ctx context.Context, tx *wtx, k leasefloor.Key, now int64) (fl leasefloor.Floor, free bool, err error) {
	rows, err := tx.QueryContext(ctx, firstFreeSQL, k.Source, k.Destination, now)
	if err != nil {
		return fl, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, at int64
		if err := rows.Scan(&id, &at); err != nil {
			return fl, false, err
		}
		if !s.leases.leasedAt(id, now) {
			return leasefloor.Floor{Due: at, ID: id - 1}, true, nil
		}
	}
	return fl, false, rows.Err()
}

// due reads up to limit due deliveries of k (one destination's) that are
// not leased at now, in the due index's order, after c, and the last row
// it read: a floor, since it took every row before it that was not
// leased. Two statements, because SQLite seeks the index on
// (next_attempt_at, id) only through an equality on the first: the rest
// of c's millisecond, then the ones after it. A leased row is read and
// skipped: past the floor, or the first one free, there are few.
func (s *Store) due(ctx context.Context, tx *wtx, k leasefloor.Key, c leasefloor.Floor, now int64, limit int) ([]store.Delivery, leasefloor.Floor, error) {
	var out []store.Delivery
	scan := rowscan.Leased(k.Source)
	read := func(q string, args ...any) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for len(out) < limit && rows.Next() {
			d, err := scan(rows)
			if err != nil {
				return err
			}
			c = leasefloor.Floor{Due: store.Millis(d.NextAttempt), ID: d.ID}
			if !s.leases.leasedAt(d.ID, now) {
				out = append(out, d)
			}
		}
		return rows.Err()
	}
	// The messages of a deletion under way stay where they are until its
	// purge cancels them (recover.go).
	held, heldArgs := s.held.clause(k.Source)
	args := func(more ...any) []any {
		return append(append([]any{k.Source, k.Destination}, more...), heldArgs...)
	}
	same, after := dueSQL(held)
	if c.Due <= now {
		if err := read(same, args(c.Due, c.ID)...); err != nil {
			return nil, c, err
		}
	}
	if len(out) < limit {
		if err := read(after, args(c.Due, now)...); err != nil {
			return nil, c, err
		}
	}
	return out, c, nil
}

// dueSQL is due's two statements, with the condition held: the rows of
// a destination (?, ?) due at a millisecond (?) after an id (?), and the
// ones due after a millisecond (?) up to now (?).
func dueSQL(held string) (same, after string) {
	const from = `SELECT ` + rowscan.LeasedColumns + ` FROM deliveries d INDEXED BY deliveries_due
		JOIN messages m ON m.id = d.message WHERE d.source = ? AND d.destination = ? AND d.status = 'pending' AND `
	return from + `d.next_attempt_at = ? AND d.id > ?` + held + ` ORDER BY d.id`,
		from + `d.next_attempt_at > ? AND d.next_attempt_at <= ?` + held + ` ORDER BY d.next_attempt_at, d.id`
}

// Complete implements store.Store.
func (s *Store) Complete(ctx context.Context, cs []store.Completion) error {
	if len(cs) == 0 {
		return nil
	}
	now := store.Millis(s.opts.Now())
	// A completion is applied even when ctx has ended: the attempts were
	// made and must be on record.
	return s.doReplayable(context.WithoutCancel(ctx), 0, func(ctx context.Context, tx *wtx) error {
		// A completion applies while its owner holds the lease; its
		// attempts are recorded either way.
		owned := make([]bool, len(cs))
		var apply []store.Completion
		for i, c := range cs {
			if owned[i] = s.leases.ownedBy(c.ID, c.Owner); owned[i] {
				apply = append(apply, c)
			}
		}
		if err := applyOutcomes(ctx, tx, apply, now); err != nil {
			return err
		}
		if err := recordAttempts(ctx, tx, cs); err != nil {
			return err
		}
		for i, c := range cs {
			if owned[i] {
				s.leases.drop(c.ID)
			}
		}
		return nil
	})
}

// completeChunk bounds the completions, and the attempts, one multi-row
// statement applies: statements are prepared per row count, and a
// statement per group rather than per row is what makes recording
// outcomes cheap.
const completeChunk = 64

// sharedMin is how many completions (or attempts) sharing every value
// but their delivery's id make a group written with one statement over
// a JSON list of the ids: a batch's deliveries all end alike, and one
// statement of a few parameters binds far less than a row of six (or
// eleven) each.
const sharedMin = 4

// outcome is what a completion sets on its delivery, but which one.
type outcome struct {
	status      store.Status
	attempts    int
	first, next int64
	lastError   string
}

func outcomeOf(c store.Completion) outcome {
	return outcome{c.Status, c.Attempts, store.Millis(c.FirstAttempt), store.Millis(c.NextAttempt), c.LastError}
}

// attemptsKey is a completion's attempts but their delivery, as a map
// key: the completions of one batch request have the same.
func attemptsKey(as []store.Attempt) string {
	var b []byte
	for _, a := range as {
		for _, n := range []int64{int64(a.Delivery), int64(a.Endpoint), store.Millis(a.Start), a.Latency.Microseconds(), int64(a.Status)} {
			b = binary.AppendVarint(b, n)
		}
		for _, t := range []string{a.URL, a.Class, a.Error, string(a.Excerpt), a.Outcome} {
			b = binary.AppendUvarint(b, uint64(len(t)))
			b = append(b, t...)
		}
	}
	return string(b)
}

// idList is ids as a JSON array, for json_each.
func idList(ids []int64) string {
	b := make([]byte, 0, 8*len(ids))
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// applyOutcomes sets each completion's outcome on its pending delivery:
// those that share one in groups (sharedMin or more), the others a
// completeChunk at a time.
func applyOutcomes(ctx context.Context, tx *wtx, cs []store.Completion, now int64) error {
	groups := make(map[outcome][]int64, len(cs))
	for _, c := range cs {
		k := outcomeOf(c)
		groups[k] = append(groups[k], c.ID)
	}
	var rest []store.Completion
	for _, c := range cs {
		k := outcomeOf(c)
		ids, ok := groups[k]
		switch {
		case !ok: // its group's statement ran
		case len(ids) < sharedMin:
			rest = append(rest, c)
		default:
			delete(groups, k)
			if _, err := tx.ExecContext(ctx, `UPDATE OR FAIL deliveries SET status = ?, attempts = ?, first_attempt_at = ?,
				next_attempt_at = ?, last_error = ?, updated_at = ?
				WHERE id IN (SELECT value FROM json_each(?)) AND status = 'pending'`,
				string(k.status), k.attempts, k.first, k.next, k.lastError, now, idList(ids)); err != nil {
				return err
			}
		}
	}
	for i := 0; i < len(rest); i += completeChunk {
		if err := applyOutcomeRows(ctx, tx, rest[i:min(len(rest), i+completeChunk)], now); err != nil {
			return err
		}
	}
	return nil
}

// applyOutcomeRows sets cs' outcomes (at most completeChunk) with one UPDATE.
func applyOutcomeRows(ctx context.Context, tx *wtx, cs []store.Completion, now int64) error {
	var q strings.Builder
	q.WriteString(`UPDATE OR FAIL deliveries SET status = c.column2, attempts = c.column3, first_attempt_at = c.column4,
		next_attempt_at = c.column5, last_error = c.column6, updated_at = ? FROM (VALUES `)
	args := make([]any, 0, 1+len(cs)*6)
	args = append(args, now)
	for i, c := range cs {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,?,?)")
		args = append(args, c.ID, string(c.Status), c.Attempts, store.Millis(c.FirstAttempt), store.Millis(c.NextAttempt),
			c.LastError)
	}
	q.WriteString(`) AS c WHERE deliveries.id = c.column1 AND deliveries.status = 'pending'`)
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// recordAttempts records the attempts of cs, each delivery's in its
// order: those of completions whose attempts are all alike (a batch's)
// in groups (sharedMin or more), a statement for each attempt over a
// JSON list of the group's ids; the others with a multi-row INSERT per
// completeChunk attempts.
func recordAttempts(ctx context.Context, tx *wtx, cs []store.Completion) error {
	keys := make([]string, len(cs))
	alike := map[string][]int64{}
	for i, c := range cs {
		if len(c.Records) > 0 {
			keys[i] = attemptsKey(c.Records)
			alike[keys[i]] = append(alike[keys[i]], c.ID)
		}
	}
	// attemptColumns is the parameters of one attempt row.
	const attemptColumns = 11
	var q strings.Builder
	args := make([]any, 0, completeChunk*attemptColumns)
	insert := func() error {
		q.Reset()
		q.WriteString(`INSERT OR FAIL INTO attempts (delivery, delivery_no, endpoint, url, started_at, latency_us, status, class,
			error, excerpt, outcome) VALUES `)
		for i := range len(args) / attemptColumns {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?,?,?,?,?,?,?,?)")
		}
		_, err := tx.ExecContext(ctx, q.String(), args...)
		args = args[:0]
		return err
	}
	for i, c := range cs {
		ids, ok := alike[keys[i]]
		switch {
		case len(c.Records) == 0 || !ok: // none, or written with its group
		case len(ids) < sharedMin:
			for _, a := range c.Records {
				args = append(args, c.ID, a.Delivery, a.Endpoint, a.URL, store.Millis(a.Start), a.Latency.Microseconds(),
					a.Status, a.Class, a.Error, a.Excerpt, a.Outcome)
				if len(args) == completeChunk*attemptColumns {
					if err := insert(); err != nil {
						return err
					}
				}
			}
		default:
			delete(alike, keys[i])
			list := idList(ids)
			for _, a := range c.Records {
				if _, err := tx.ExecContext(ctx, `INSERT OR FAIL INTO attempts (delivery, delivery_no, endpoint, url, started_at,
					latency_us, status, class, error, excerpt, outcome)
					SELECT value, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM json_each(?)`,
					a.Delivery, a.Endpoint, a.URL, store.Millis(a.Start), a.Latency.Microseconds(), a.Status, a.Class, a.Error,
					a.Excerpt, a.Outcome, list); err != nil {
					return err
				}
			}
		}
	}
	if len(args) > 0 {
		return insert()
	}
	return nil
}

// Reclaim implements store.Store: one process uses the file at a time (see
// Lock), so every lease left behind belongs to a process that is gone.
func (s *Store) Reclaim(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		// Leases are in memory (leases.go); a file an evfwd before them
		// left may hold some in its rows.
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET lease_owner = NULL, lease_expires_at = 0
			WHERE lease_owner IS NOT NULL`)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		n += int64(s.leases.clear())
		return err
	})
	return int(n), err
}

// Retry implements store.Store. A pending delivery under a live lease is
// left to its holder; a cancelled one stays cancelled.
func (s *Store) Retry(ctx context.Context, ids []int64, f store.Filter, now time.Time) (int, error) {
	var n int64
	at := store.Millis(now)
	err := s.do(ctx, 0, func(ctx context.Context, tx *wtx) error {
		set, args := sharedsql.Retry(at, sharedsql.Question)
		// Not under a live lease: the leases are this process's.
		keep := sharedsql.Retryable + ` AND d.id NOT IN (SELECT value FROM json_each(?)))`
		live := s.leases.live(at)
		if len(ids) > 0 {
			for _, id := range ids {
				res, err := tx.ExecContext(ctx, set+` WHERE d.id = ?`+keep, append(args, id, live)...)
				if err != nil {
					return err
				}
				k, _ := res.RowsAffected()
				n += k
			}
			return nil
		}
		clause, more := sharedsql.Where(f, sharedsql.Question)
		res, err := tx.ExecContext(ctx, set+clause+keep, append(append(args, more...), live)...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
