package serve

import (
	"context"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
)

// pruneEvery is how often the pruner runs for a retention window: often
// enough that the store holds little more than the window, rarely enough
// that a pass has work to do.
func pruneEvery(retention time.Duration) time.Duration {
	return min(max(retention/10, time.Second), time.Minute)
}

// Prune removes what the retention window has passed, now. The service
// runs it in the background; tests and tools call it directly.
func (s *Server) Prune(ctx context.Context) (store.Pruned, error) {
	start := time.Now()
	before := s.opts.Now().Add(-s.cfg.Retention)
	n, err := s.store.Prune(ctx, before)
	s.metrics.Pruned(n.Messages)
	if n.Messages > 0 {
		s.log.Info("pruned", "before", before, "messages", n.Messages, "deliveries", n.Deliveries,
			"attempts", n.Attempts, "took", time.Since(start).Round(time.Millisecond))
	}
	if err != nil && ctx.Err() == nil {
		s.log.Error("prune", "before", before, "err", err)
	}
	return n, err
}

// pruner runs Prune every pruneEvery until ctx ends; a retention of 0 keeps
// everything.
func (s *Server) pruner(ctx context.Context) {
	if s.cfg.Retention <= 0 {
		return
	}
	tick := time.NewTicker(pruneEvery(s.cfg.Retention))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.Prune(ctx)
		}
	}
}
