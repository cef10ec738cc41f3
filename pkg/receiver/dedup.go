package receiver

import "sync"

// DefaultDedupWindow is how many recent messageIds (and signatures) are
// remembered.
const DefaultDedupWindow = 10000

// dedup remembers the last n keys in a ring so memory stays bounded
// however long the listener runs: a key older than n others is
// forgotten, which is fine for spotting redelivery and replays, which
// come soon after. The zero K is never remembered.
type dedup[K comparable] struct {
	mu   sync.Mutex
	seen map[K]struct{}
	ring []K
	next int
}

func newDedup[K comparable](n int) *dedup[K] {
	return &dedup[K]{seen: make(map[K]struct{}, n), ring: make([]K, n)}
}

// check records key and reports whether it was already among the last n.
func (d *dedup[K]) check(key K) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[key]; ok {
		return true
	}
	var zero K
	if old := d.ring[d.next]; old != zero {
		delete(d.seen, old)
	}
	d.ring[d.next] = key
	d.seen[key] = struct{}{}
	d.next = (d.next + 1) % len(d.ring)
	return false
}
