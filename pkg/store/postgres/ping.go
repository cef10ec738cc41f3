package postgres

import "context"

// Ping implements store.Pinger: one empty statement on a pooled
// connection (a new one when none is idle), a round trip to the server
// and nothing more. A server that cannot be reached, and a deadline that
// passes first, are store.ErrUnavailable (classify).
func (s *Store) Ping(ctx context.Context) error {
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	return classify(s.pool.Ping(ctx))
}
