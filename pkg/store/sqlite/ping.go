package sqlite

import (
	"context"

	"github.com/evfwd/evfwd/pkg/store"
)

// Ping implements store.Pinger. A local file has no link to lose: the store
// is reachable until it is closed (a full disk is ErrFull, per write).
func (s *Store) Ping(ctx context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	return ctx.Err()
}
