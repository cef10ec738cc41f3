//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/evfwd/evfwd/bench/internal/benchpg"
)

// overlapConns and overlapPer are the overlap rows' load (issue 43, row
// 8): 128 keep-alive connections, half of them one client and half
// another, posting batches of 10 events.
const (
	overlapConns = 128
	overlapPer   = 10
)

// overlapRows measures serve on PostgreSQL (webhooks on, to the receiver)
// under two clients that post the same batches, first with messageIds of
// their own (unique), then sharing every one, the second client's batch in
// the reverse order of the first's, as two clients of one source or a
// client retrying a batch whose first try is still in flight do. Each run
// has a database of its own, whose deadlock count the server keeps
// (pg_stat_database); every message must be stored once, with one
// delivery. The shared run's p99 must stay within twice the unique run's,
// and neither may deadlock.
func (b *bench) overlapRows() {
	var uniqueP99 time.Duration
	for _, shared := range []bool{false, true} {
		name, what := "overlap-unique", "unique messageIds"
		t := "0 deadlocks"
		if shared {
			name, what = "overlap-shared", "the two sharing every messageId (in reverse orders)"
			t = "0 deadlocks, p99 ≤ 2× unique's"
		}
		n := b.opt.overlapBatches
		r := row{measure: fmt.Sprintf("ingest, PostgreSQL, %d connections as 2 clients, %d batches of %d each, %s, webhooks on",
			overlapConns, n, overlapPer, what), target: t, verdict: "info"}
		url, drop, err := benchpg.Database(b.opt.postgres, strings.TrimPrefix(name, "overlap-"))
		if err != nil {
			b.print(b.fail(r, err))
			continue
		}
		var m measured
		rows := b.withServe(name, url, source{webhooks: true}, r, func(base string) []row {
			var err error
			if m, err = postBatches(b.ctx, base, overlapConns, n, overlapPer, shared, webLimit); err != nil {
				return []row{b.fail(r, err)}
			}
			r.result, r.items = m.result(), m.n
			return []row{r}
		})
		// serve has stopped: its sessions end and report their counts.
		dl, err := benchpg.Deadlocks(url, 30*time.Second)
		var msgs, dels int64
		if err == nil {
			err = counts(url, &msgs, &dels)
		}
		drop()
		if strings.HasPrefix(rows[0].verdict, "FAIL") {
			b.printAll(rows)
			continue
		}
		if err != nil {
			b.print(b.fail(rows[0], err))
			continue
		}
		want := int64(2 * n * overlapPer)
		if shared {
			want /= 2
		}
		rows[0].result += fmt.Sprintf(", %d deadlocks, %d messages and %d deliveries stored", dl, msgs, dels)
		ok := dl == 0 && msgs == want && dels == want
		p99 := pct(m.lat, 0.99)
		if !shared {
			uniqueP99 = p99
		} else if uniqueP99 > 0 {
			rows[0].ratio = fmt.Sprintf("p99 %.2f× unique's", float64(p99)/float64(uniqueP99))
			ok = ok && p99 <= 2*uniqueP99
		}
		rows[0].verdict = verdict(ok)
		if msgs != want || dels != want {
			fmt.Fprintf(os.Stderr, "%s: %d messages and %d deliveries stored, want %d of each\n", name, msgs, dels, want)
		}
		b.printAll(rows)
	}
}

// counts reads the messages and deliveries stored in url's database.
func counts(url string, msgs, dels *int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM deliveries)`).Scan(msgs, dels)
}

// postBatches has conns keep-alive connections post batches of per track
// events to /v1/batch: the first half of them are client A, posting its
// batches 0 … n-1 (each connection the next batch not yet taken), the
// other half client B, posting its own n batches. B's batch k has A's
// messageIds in the reverse order when shared, ids of its own otherwise.
// Each connection waits for its answer before the next request. It stops
// after limit, and reports the requests answered 200, the time from the
// first request to the last answer and every request's latency, sorted.
func postBatches(ctx context.Context, base string, conns, n, per int, shared bool, limit time.Duration) (measured, error) {
	addr := strings.TrimPrefix(base, "http://")
	head := "POST /v1/batch HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Basic " +
		base64.StdEncoding.EncodeToString([]byte(writeKey+":")) + "\r\nContent-Type: application/json\r\nContent-Length: "
	var next [2]atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lats := make([][]time.Duration, conns)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(limit)
	for w := range conns {
		client := w % 2
		wg.Go(func() {
			rc := &rawConn{addr: addr}
			defer rc.close()
			prefix, reverse := "a", false
			if client == 1 {
				prefix, reverse = "b", true
				if shared {
					prefix = "a"
				}
			}
			var req, body []byte
			var lat []time.Duration
			for k := next[client].Add(1) - 1; k < int64(n) && ctx.Err() == nil; k = next[client].Add(1) - 1 {
				t := time.Now()
				if t.After(deadline) {
					break
				}
				body = appendBatch(body[:0], prefix, int(k), per, reverse, nil, t)
				req = append(append(strconv.AppendInt(append(req[:0], head...), int64(len(body)), 10), "\r\n\r\n"...), body...)
				if err := rc.send(ctx, req); err != nil {
					cancel(fmt.Errorf("POST /v1/batch: %w", err))
					break
				}
				lat = append(lat, time.Since(t))
			}
			lats[w] = lat
		})
	}
	wg.Wait()
	m := measured{elapsed: time.Since(start), lat: slices.Concat(lats...)}
	slices.Sort(m.lat)
	m.n = len(m.lat)
	return m, context.Cause(ctx)
}
