package serve_test

import (
	"fmt"
	"testing"
	"time"
)

// TestPostgresFailover is OPERATIONS.md's "PostgreSQL failover": serve on a
// primary and its streaming replica (pg_basebackup -R), named together in
// one URL with target_session_attrs=read-write, while clients send
// events; the primary stops (pg_ctl stop -m fast, which sends the standby
// all its WAL first) and the replica is promoted. serve writes to the new
// primary within faultRecoverBound of the promotion, answers 503 with
// Retry-After meanwhile, and delivers every message it acknowledged, on
// either side. The gap and what the clients saw are logged. It runs where
// initdb, pg_ctl and pg_basebackup are on PATH (.ci/run puts Debian's
// there), as the postgres user when root.
func TestPostgresFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers: runs without -short")
	}
	primary := newClusterDir(t, "initdb", "pg_ctl", "pg_basebackup")
	primary.run(t, "initdb", "-D", primary.data(), "-A", "trust", "-U", "evfwd", "-E", "UTF8", "--no-sync")
	primary.start(t)
	replica := newClusterDir(t)
	replica.run(t, "pg_basebackup", "-D", replica.data(), "-R", "-X", "stream", "--no-sync",
		"-h", "127.0.0.1", "-p", fmt.Sprint(primary.port), "-U", "evfwd")
	replica.start(t)
	dbURL := fmt.Sprintf("postgres://evfwd@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.port, replica.port)

	var logs processLog
	h, rcv := runFaulted(t, dbURL, &logs)
	c := newFaultClients(h.url, 4)
	defer c.stop()
	waitFor(t, "events acknowledged before the failover", func() bool { return c.acks() >= 50 })

	stopped := time.Now()
	primary.ctl(t, "stop", "-m", "fast")
	stopTook := time.Since(stopped)
	replica.run(t, "pg_ctl", "-D", replica.data(), "-w", "promote")
	promoted := time.Now()
	waitFor(t, "an ingest 200 after the promotion", func() bool { return c.first200(promoted) > 0 })
	writing := c.first200(promoted)
	waitFor(t, "/healthz 200 after the promotion", func() bool { code, _ := getz(h.url + "/healthz"); return code == 200 })
	healthy := time.Since(promoted)
	more := c.acks() + 50
	waitFor(t, "more events acknowledged after it", func() bool { return c.acks() >= more })
	c.stop()

	missing, dups := rcv.WaitAll(c.acked(), time.Now().Add(waitLimit))
	t.Logf("%s: pg_ctl stop %v, promote %v; ingest 200 again %v after the promotion, /healthz 200 after %v; "+
		"clients saw no 200 for %v (%d 503s, all with Retry-After: %v); %d acknowledged, %d missing, %d duplicates",
		t.Name(), stopTook.Round(time.Millisecond), promoted.Sub(stopped.Add(stopTook)).Round(time.Millisecond),
		writing.Round(time.Millisecond), healthy.Round(time.Millisecond), c.longestWithout200(stopped).Round(time.Millisecond),
		c.count503(), c.retryAfterOK(), len(c.acked()), missing, dups)
	switch {
	case writing > faultRecoverBound:
		t.Errorf("ingest 200 again only %v after the promotion, want under %v", writing, faultRecoverBound)
	case !c.retryAfterOK():
		t.Error("an answer without a status, or a 503 without Retry-After")
	case missing > 0:
		t.Errorf("%d acknowledged messages never delivered", missing)
	}
	if t.Failed() {
		t.Log(logs.String())
	}
}

// longestWithout200 is the longest the clients went, from a moment before
// since, without an acknowledgement.
func (c *faultClients) longestWithout200(since time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var gap time.Duration
	last := time.Time{}
	for _, a := range c.answers {
		if a.status != 200 {
			continue
		}
		if !last.IsZero() && a.at.After(since) {
			gap = max(gap, a.at.Sub(last))
		}
		last = a.at
	}
	return gap
}
