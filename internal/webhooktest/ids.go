package webhooktest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// IDCounter is a Receiver that counts each messageId it gets.
type IDCounter struct {
	*Receiver

	mu    sync.Mutex
	ids   map[string]int
	extra int                  // arrivals of an id that had arrived before
	first map[string]time.Time // each id's first arrival
	// Set by WaitAll: the ids it waits for, how many of them have not
	// arrived, and a channel closed when none is missing.
	want    map[string]bool
	missing int
	all     chan struct{}
}

// NewIDCounter starts an IDCounter, closed when the test ends.
func NewIDCounter(t testing.TB, opts ...Option) *IDCounter {
	t.Helper()
	c := &IDCounter{ids: map[string]int{}, first: map[string]time.Time{}}
	c.Receiver = New(t, append(opts, func(r *Receiver) { r.counted = c.count })...)
	return c
}

func (c *IDCounter) count(body []byte) {
	var m struct {
		MessageID string `json:"messageId"`
	}
	if json.Unmarshal(body, &m) != nil || m.MessageID == "" {
		return // not a message: Requests has it, the counts leave it out
	}
	id, now := m.MessageID, time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids[id]++
	if c.ids[id] > 1 {
		c.extra++
	} else {
		c.first[id] = now
	}
	if c.ids[id] == 1 && c.want[id] {
		if c.missing--; c.missing == 0 {
			close(c.all)
		}
	}
}

// Tally is how many distinct messageIds arrived and how many arrivals
// repeated one.
func (c *IDCounter) Tally() (distinct, duplicates int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids), c.extra
}

// First is when id first arrived.
func (c *IDCounter) First(id string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.first[id]
	return at, ok
}

// WaitAll waits until each of ids has arrived, or deadline passes; it
// returns how many never arrived and how many arrivals were duplicates.
// Each arrival counts itself off, so the wait costs nothing per arrival
// and ends at the one that completes the set.
func (c *IDCounter) WaitAll(ids map[string]bool, deadline time.Time) (missing, duplicates int) {
	c.mu.Lock()
	c.want, c.missing, c.all = map[string]bool{}, 0, make(chan struct{})
	for id := range ids {
		c.want[id] = true
		if c.ids[id] == 0 {
			c.missing++
		}
	}
	if c.missing == 0 {
		close(c.all)
	}
	all := c.all
	c.mu.Unlock()
	limit := time.NewTimer(time.Until(deadline))
	defer limit.Stop()
	select {
	case <-all:
	case <-limit.C:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.missing, c.extra
}
