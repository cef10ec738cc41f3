package forwarder

import (
	"context"
	"log/slog"
	"time"

	"github.com/evfwd/evfwd/internal/gather"
	"github.com/evfwd/evfwd/pkg/store"
)

// maxCompleteGroup bounds the completions one Store.Complete records; it
// is also the completions waiting for the completer before deliveries
// wait.
const maxCompleteGroup = 512

// finishing is a delivery's outcome on its way to the store.
type finishing struct {
	l     *lane
	c     store.Completion
	retry bool
	// closes is l.closings() when the delivery's endpoints were chosen:
	// an endpoint that closed since may have released what waited on it
	// before this outcome was on record (see record).
	closes uint64
	fresh  bool // a fresh delivery's: its room is freed once on record
	// rest is how many outcomes of the same request (a batch's) follow
	// this one: the completer records them together, in one commit
	// rather than in pieces as they arrive.
	rest int
}

// complete hands x to the completer: the delivery's token is free as soon
// as its requests are made, and one Store.Complete records the outcomes of
// many deliveries; its slot is free once that is done (recorded). Until it
// is on record the delivery stays leased; a crash before that makes it
// again once the lease is taken back, exactly as a crash between the
// request and the record always did: at least once.
func (f *Forwarder) complete(x finishing) {
	f.completions <- x
}

// completer records what arrives on in, in groups, until in is closed and
// drained. What the store refuses waits in f.unrecorded (and so does what
// arrives meanwhile), retried with backoff until it is on record; when in
// is closed, the completer tries once more and says what it must leave.
func (f *Forwarder) completer(in <-chan finishing) {
	var retry *time.Timer // armed while outcomes wait
	fails := 0
	// Reused from group to group: keep copies what it keeps.
	group := make([]finishing, 0, maxCompleteGroup)
	cs := make([]store.Completion, 0, maxCompleteGroup)
	g := gather.Gatherer[finishing]{In: in, Max: maxCompleteGroup}
	for {
		var tick <-chan time.Time
		if f.unrecorded.waiting() {
			if retry == nil {
				retry = time.NewTimer(retryDelay(fails))
			}
			tick = retry.C
		}
		select {
		case first, ok := <-in:
			if !ok {
				if retry != nil {
					retry.Stop()
				}
				f.lastTry()
				return
			}
			group = g.More(append(group[:0], first))
			for group[len(group)-1].rest > 0 {
				x, ok := <-in // sent by now, or in a moment
				if !ok {
					break
				}
				group = append(group, x)
			}
			if f.unrecorded.waiting() {
				// Behind the others, written with them.
				f.unrecorded.keep(group)
				continue
			}
			cs = completions(cs[:0], group)
			f.record(group, f.cfg.Store.Complete(f.calls, cs))
		case <-tick:
			retry = nil
			if f.retryUnrecorded() {
				fails = 0
			} else {
				fails++
			}
		case <-f.unrecorded.kick: // the loop arms the retry
		}
	}
}

// completions appends group's completions to cs.
func completions(cs []store.Completion, group []finishing) []store.Completion {
	for _, x := range group {
		cs = append(cs, x.c)
	}
	return cs
}

// retryUnrecorded records the outcomes that wait, oldest first, a group at
// a time, and reports whether every one is on record. Once none waits the
// lanes lease again.
func (f *Forwarder) retryUnrecorded() bool {
	n := 0
	for {
		group := f.unrecorded.first(maxCompleteGroup)
		if len(group) == 0 {
			break
		}
		if err := f.cfg.Store.Complete(f.calls, completions(nil, group)); err != nil {
			f.cfg.Logger.Debug("record delivery outcomes again", "waiting", f.unrecorded.len(), "err", err)
			return false
		}
		f.unrecorded.drop(len(group))
		f.recorded(group)
		n += len(group)
	}
	if n > 0 {
		f.cfg.Logger.Info("recorded delivery outcomes the store had refused; leasing again", "n", n)
		f.roomMade()
	}
	return true
}

// lastTry is the completer's last retry, once Run has stopped: what it
// cannot record is lost, and its deliveries are made again once their
// leases are taken back (a restart), at least once.
func (f *Forwarder) lastTry() {
	if !f.unrecorded.waiting() || f.retryUnrecorded() {
		return
	}
	n := f.unrecorded.len()
	f.cfg.Logger.Error("delivery outcomes not recorded at shutdown: those deliveries will be made again", "n", n)
	for _, x := range f.unrecorded.first(n) {
		x.l.inflight.free(x.c.ID, x.fresh)
	}
	f.unrecorded.drop(n)
}

// paused reports whether the lanes must lease nothing and Ingest start
// nothing: outcomes wait to be recorded (see unrecorded).
func (f *Forwarder) paused() bool { return f.unrecorded.waiting() }

// record tells the observer and the log what was recorded or, when err
// says the store refused it, keeps it to record later.
func (f *Forwarder) record(group []finishing, err error) {
	if err != nil {
		// Sent, but not on record: if this process let the lease run
		// out, it would send them again. They wait in memory instead.
		f.unrecorded.keep(group)
		f.cfg.Logger.Error("record delivery outcomes; kept to retry, leasing paused",
			"n", len(group), "waiting", f.unrecorded.len(), "first", group[0].c.ID, "err", err)
		return
	}
	f.recorded(group)
}

// recorded tells the observer and the log what was recorded. A retry
// recorded after one of its lane's endpoints closed missed that closing's
// release (it was not on record yet): the lane releases again, so it does
// not wait out its backoff behind a healthy endpoint.
func (f *Forwarder) recorded(group []finishing) {
	var again map[*lane]bool
	var relet []store.Completion
	var reletLanes []*lane
	now := f.cfg.Now()
	for _, x := range group {
		if f.free(x.l, x.c.ID, x.fresh) && x.c.Status == store.Pending {
			relet = append(relet, x.c)
			reletLanes = append(reletLanes, x.l)
		}
		x.l.progress.mark(now)
		if x.c.Status == store.Pending && x.l.closings() != x.closes {
			if again == nil {
				again = map[*lane]bool{}
			}
			again[x.l] = true
		}
		if f.cfg.Observer != nil {
			f.cfg.Observer.Finished(x.l.source, x.c.ID, x.c.Status, x.retry)
		}
		if f.destinations != nil {
			f.destinations.Settled(x.l.source, x.l.name, x.c.Status, x.retry)
		}
		lvl := slog.LevelDebug
		if x.c.Status == store.Dead || x.c.Status == store.Failed {
			lvl = slog.LevelWarn
		}
		f.cfg.Logger.Log(context.Background(), lvl, "delivery", deliveryLog(x.l.source, x.c)...)
	}
	f.recordAgain(relet)
	// Given back, they may be due now: their lanes look, rather than
	// wait a poll (their passes since found them leased).
	for _, l := range reletLanes {
		l.poke()
	}
	for l := range again {
		f.release(l)
	}
}

// recordAgain applies cs once more, without their attempts (on record
// already): outcomes that left a delivery pending, of deliveries a Lease
// returned again while they were being recorded (inflight). Where that
// Lease ran before the record, the record took the lease back and this
// changes nothing (a completion applies only under its owner's lease);
// where it ran after, this node holds a lease it will not use, and this
// gives it back, the delivery due when its outcome said, not when that
// lease runs out.
func (f *Forwarder) recordAgain(cs []store.Completion) {
	if len(cs) == 0 {
		return
	}
	for i := range cs {
		cs[i].Records = nil
	}
	if err := f.cfg.Store.Complete(f.calls, cs); err != nil {
		f.cfg.Logger.Error("give back deliveries leased again while recorded", "n", len(cs), "err", err)
	}
}
