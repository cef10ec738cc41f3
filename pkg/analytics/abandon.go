package analytics

// Abandon gives the client up at once without waiting, so that OnBatch
// may call it (Close waits for the consumer that runs OnBatch): the
// request in flight is cut off, what is queued fails with ErrClosed
// without a request, and later messages are refused with ErrClosed. Close
// still waits for the consumer to end.
func (c *Client) Abandon() {
	c.mu.Lock()
	c.closed = true
	wakeAll(&c.room) // a sender waiting for room gets ErrClosed now
	c.mu.Unlock()
	c.cancel()
}
