package forwarder

import (
	"context"
	"slices"
	"time"

	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/store"
)

// batchesInFlight is how many batches a batching lane sends at once, and
// so what a crash may send twice (docs/OPERATIONS.md). Its outcomes wait
// for the store's one writer, a commit at a time: the more a lane holds,
// the more each commit records.
const batchesInFlight = 16

// batchWait is the longest a message waits for its batch to fill, from
// when it was due: a quiet destination still gets each message within a
// second.
const batchWait = time.Second

// fillBatch is fill for a destination that sends batches: it leases up to
// as many batches as the lane has room and the process tokens for, in one
// Lease (each Lease waits its turn at the store, so one a batch would
// bound the batches a second by that wait), and sends each as one request
// on one token. Less than a batch waits (batchWait at most) for more to
// fill it. Each of a batch's deliveries holds a slot of the lane until its
// outcome is on record, as a single delivery does.
func (f *Forwarder) fillBatch(ctx, deliverCtx context.Context, l *lane) (got, full bool) {
	if f.held(l) {
		return false, false
	}
	size := l.route.Batch.Size
	room, _, _ := l.inflight.look()
	if room < size {
		return false, false // a batch is recorded first
	}
	m, probe := l.mode(f.cfg.Now())
	if m == modeNone {
		l.progress.mark(f.cfg.Now())
		return false, false
	}
	if !f.tokens.tryTake() {
		f.tell(l, laneStarved, 0)
		if !f.tokens.take(ctx) {
			return false, false
		}
	}
	n := 1 // batches, and tokens held
	if probe == nil {
		n += f.tokens.takeUpTo(room/size - 1)
	}
	if probe != nil && !f.admitProbe(l, probe, 1) {
		return false, false
	}
	ds, _ := f.lease(ctx, l, n*size)
	if probe != nil && len(ds) == 0 {
		f.noProbeDue(ctx, l, probe)
	}
	ds = f.fillUp(ctx, l, ds, size)
	kept := ds[:0]
	for _, d := range ds {
		if f.startable(l, d) {
			kept = append(kept, d)
			continue
		}
		f.letLapse(l, d, nil)
		f.giveBack(l, l.inflight.forget([]store.Delivery{d}))
	}
	sent := 0
	for batch := range slices.Chunk(kept, size) {
		l.inflight.startBatch(len(batch))
		f.workers.run(func() {
			f.deliverBatch(deliverCtx, l, batch, probe)
			l.inflight.batchSent()
			f.tokens.handBack(1)
			f.roomMade()
		})
		sent++
	}
	f.tokens.handBack(n - sent)
	return sent > 0, len(kept) == n*size
}

// fillUp leases more of l's due deliveries until ds holds size of them or
// its oldest has waited batchWait since it was due. When ctx ends first,
// ds goes back and none is returned.
func (f *Forwarder) fillUp(ctx context.Context, l *lane, ds []store.Delivery, size int) []store.Delivery {
	if len(ds) == 0 || len(ds) >= size {
		return ds
	}
	oldest := ds[0].NextAttempt
	for _, d := range ds[1:] {
		if d.NextAttempt.Before(oldest) {
			oldest = d.NextAttempt
		}
	}
	deadline := oldest.Add(batchWait)
	for len(ds) < size {
		wait := deadline.Sub(f.cfg.Now())
		if wait <= 0 {
			break
		}
		t := time.NewTimer(min(wait, f.cfg.Poll))
		select {
		case <-ctx.Done():
			t.Stop()
			f.giveBack(l, ds)
			f.giveBack(l, l.inflight.forget(ds))
			return nil
		case <-l.wake:
		case <-t.C:
		}
		t.Stop()
		more, _ := f.lease(ctx, l, size-len(ds))
		ds = append(ds, more...)
	}
	return ds
}

// deliverBatch sends ds as one request, the JSON array of their bodies (as
// l's mapping shapes each, under the batch's max_bytes), and hands each
// one's outcome, the request's, to the completer. A message the mapping
// cannot take fails alone; those past max_bytes go back, due now, for the
// next batch.
func (f *Forwarder) deliverBatch(ctx context.Context, l *lane, ds []store.Delivery, probe *breaker) {
	closes := l.closings()
	start := func(d store.Delivery) store.Completion {
		c := store.Completion{ID: d.ID, Owner: f.cfg.Owner, Attempts: d.Attempts + 1, FirstAttempt: d.FirstAttempt}
		if c.FirstAttempt.IsZero() {
			c.FirstAttempt = f.cfg.Now()
		}
		return c
	}
	items := make([]store.Delivery, 0, len(ds))
	ids := make([]string, 0, len(ds))
	body := append(make([]byte, 0, 64<<10), '[')
	for i, d := range ds {
		b, err := f.body(l, d)
		if err != nil {
			c := start(d)
			c.Status, c.LastError = store.Failed, err.Error()
			f.complete(finishing{l: l, c: c, closes: closes})
			continue
		}
		if len(items) > 0 && len(body)+len(b)+2 > l.route.Batch.MaxBytes {
			f.giveBack(l, ds[i:])
			for _, d := range ds[i:] {
				f.free(l, d.ID, false)
			}
			break
		}
		if len(items) > 0 {
			body = append(body, ',')
		}
		body = append(body, b...)
		items = append(items, d)
		ids = append(ids, d.MessageID)
	}
	body = append(body, ']')
	if len(items) == 0 {
		return
	}
	if l.pace != nil && l.pace.wait(ctx) != nil {
		for _, d := range items {
			c := store.Completion{ID: d.ID, Owner: f.cfg.Owner, Status: store.Pending, Attempts: d.Attempts,
				FirstAttempt: d.FirstAttempt, NextAttempt: f.cfg.Now(), LastError: d.LastError}
			f.complete(finishing{l: l, c: c, closes: closes})
		}
		return
	}
	g := f.gate(l, probe)
	if g.allSkipped() {
		for _, d := range items {
			f.hold(l, d, start(d), g, false)
		}
		return
	}
	// The request is reported once, as the first delivery's attempt; each
	// delivery's record holds it.
	res, last := f.request(ctx, l, g, body, destination.BatchID(ids), items[0].ID)
	for i, d := range items {
		c, retry := f.outcome(d, start(d), res)
		if i == 0 {
			f.tellLast(l, d.ID, last, c, retry)
		}
		f.complete(finishing{l: l, c: c, retry: retry, closes: g.closes, rest: len(items) - 1 - i})
	}
}
