package forwarder

import (
	"context"
	"log/slog"

	"github.com/evfwd/evfwd/pkg/store"
)

// maxCompleteGroup bounds the completions one Store.Complete records; it
// is also the completions waiting to be recorded before deliveries wait.
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
}

// complete hands c to the completer: the delivery's slot is free as soon
// as its requests are made, instead of after a commit, and one
// Store.Complete records the outcomes of many deliveries. Until it is on
// record the delivery stays leased; a crash before that makes it again
// once the lease is taken back, exactly as a crash between the request
// and the record always did: at least once.
func (f *Forwarder) complete(l *lane, c store.Completion, retry bool, closes uint64) {
	f.completions <- finishing{l, c, retry, closes}
}

// completer records what arrives on in, in groups, until in is closed and
// drained.
func (f *Forwarder) completer(in <-chan finishing) {
	group := make([]finishing, 0, maxCompleteGroup)
	cs := make([]store.Completion, 0, maxCompleteGroup)
	for first := range in {
		group = append(group[:0], first)
	gather:
		for len(group) < maxCompleteGroup {
			select {
			case x, ok := <-in:
				if !ok {
					break gather
				}
				group = append(group, x)
			default:
				break gather
			}
		}
		cs = cs[:0]
		for _, x := range group {
			cs = append(cs, x.c)
		}
		f.record(group, f.cfg.Store.Complete(context.Background(), cs))
	}
}

// record tells the observer and the log what was recorded, or that it
// could not be. A retry recorded after one of its lane's endpoints closed
// missed that closing's release (it was not on record yet): the lane
// releases again, so it does not wait out its backoff behind a healthy
// endpoint.
func (f *Forwarder) record(group []finishing, err error) {
	var again map[*lane]bool
	for _, x := range group {
		if err == nil && x.c.Status == store.Pending && x.l.closings() != x.closes {
			if again == nil {
				again = map[*lane]bool{}
			}
			again[x.l] = true
		}
		if err != nil {
			// The lease runs out and the delivery is made again: at least once.
			f.cfg.Logger.Error("record delivery", "source", x.l.source, "delivery", x.c.ID, "err", err)
			continue
		}
		if f.cfg.Observer != nil {
			f.cfg.Observer.Finished(x.l.source, x.c.ID, x.c.Status, x.retry)
		}
		lvl := slog.LevelDebug
		if x.c.Status == store.Dead || x.c.Status == store.Failed {
			lvl = slog.LevelWarn
		}
		f.cfg.Logger.Log(context.Background(), lvl, "delivery", deliveryLog(x.l.source, x.c)...)
	}
	for l := range again {
		f.release(l)
	}
}
