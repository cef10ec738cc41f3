package receiver

import "sync"

// DefaultDedupWindow is how many recent messageIds are remembered.
const DefaultDedupWindow = 10000

// dedup remembers the last n messageIds in a ring so memory stays bounded
// however long the listener runs: an id older than n messages is
// forgotten, which is fine for spotting redelivery, which comes soon after.
type dedup struct {
	mu   sync.Mutex
	seen map[string]struct{}
	ring []string
	next int
}

func newDedup(n int) *dedup {
	return &dedup{seen: make(map[string]struct{}, n), ring: make([]string, n)}
}

// check records id and reports whether it was already among the last n.
func (d *dedup) check(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[id]; ok {
		return true
	}
	if old := d.ring[d.next]; old != "" {
		delete(d.seen, old)
	}
	d.ring[d.next] = id
	d.seen[id] = struct{}{}
	d.next = (d.next + 1) % len(d.ring)
	return false
}
