package postgres

import (
	"context"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/jackc/pgx/v5"
)

// The Store paces across nodes (store.Pacer).
var _ store.Pacer = (*Store)(nil)

// serverMicros is the database's clock in microseconds, read when the
// statement runs (see clockSQL): every node's reservations are judged by
// this one clock, whatever their own say.
const serverMicros = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// reserveSQL reserves $2 requests on key $1's schedule, one every $3 µs
// with up to $4 µs of them at once (burst × every), judged at clock (µs),
// and returns how long, in µs, the caller waits before it sends them.
//
// A schedule is GCRA's: tat, its theoretical arrival time, is when the
// schedule would be idle again had every request reserved so far gone at
// the rate. A reservation at now moves it to max(tat, now) + n·every, and
// its requests may go once the last of them is within burst of the rate:
// at tat - burst·every. An idle schedule (tat not after now) lets a burst
// go at once, and then one every `every`; a reservation is never refused,
// its wait grows with those before it. at is the clock's reading, kept
// so that the update reads the clock once (excluded.at), and to tell when
// a key was last used.
//
// Concurrent reservations of a key wait on its row in turn; each is judged
// by the clock read before it waited, which lengthens its wait by that
// time, never shortens it.
func reserveSQL(clock string) string {
	return `WITH c AS (SELECT ` + clock + ` AS now)
INSERT INTO pace_schedules AS p (key, tat, at) SELECT $1::text, c.now + $2::bigint * $3::bigint, c.now FROM c
ON CONFLICT (key) DO UPDATE SET tat = greatest(p.tat, excluded.at) + $2::bigint * $3::bigint, at = excluded.at
RETURNING greatest(p.tat - $4::bigint - p.at, 0)`
}

// reserveNow is reserveSQL judged by the database's clock.
var reserveNow = reserveSQL(serverMicros)

// paceSettings: a reservation is not waited on to reach the disk. One
// lost in a crash of the server lets that key's schedule start again
// earlier, as after a quiet spell; waiting for the flush at every
// reservation, on the way of every request paced, would slow the requests
// themselves.
const paceSettings = `SELECT set_config('synchronous_commit', 'off', true)`

// Reserve implements store.Pacer on a schedule kept in the database and
// judged by its clock, so that every node's reservations of key are one
// schedule. every of less than a microsecond does not pace; burst is at
// least 1. n reserved at once go together after the wait: above burst,
// they exceed it.
func (s *Store) Reserve(ctx context.Context, key string, every time.Duration, burst, n int) (time.Duration, error) {
	return s.reserve(ctx, reserveNow, key, every, burst, n)
}

// reserve runs q, a reserveSQL, with the parameters of a reservation and
// extra (those of q's clock, if any).
func (s *Store) reserve(ctx context.Context, q, key string, every time.Duration, burst, n int, extra ...any) (time.Duration, error) {
	step := every.Microseconds()
	if n <= 0 || step <= 0 {
		return 0, nil
	}
	burst = max(burst, 1)
	leave, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	var wait int64
	err = retryTransient(func() error {
		b := &pgx.Batch{}
		b.Queue(paceSettings)
		b.Queue(q, append([]any{key, int64(n), step, int64(burst) * step}, extra...)...)
		br := s.pool.SendBatch(ctx, b)
		_, err := br.Exec()
		if err == nil {
			err = br.QueryRow().Scan(&wait)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return 0, classify(err)
	}
	return time.Duration(wait) * time.Microsecond, nil
}
