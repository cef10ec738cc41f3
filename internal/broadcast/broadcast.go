// Package broadcast is a one-to-many wake-up: tests wait on it for "something
// changed" instead of sleeping, then re-check what they wait for.
package broadcast

import "sync"

// Signal is a broadcast: Next returns a channel that the following Fire
// closes. The zero value is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Next returns the channel the next Fire closes. Take it before checking
// a condition, so that a change during the check is not missed.
func (s *Signal) Next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Fire wakes everyone waiting on the channel Next returned.
func (s *Signal) Fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
