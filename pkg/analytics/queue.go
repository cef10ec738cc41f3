package analytics

// entry is one queued message: its final wire bytes, encoded once at
// enqueue, and its messageId when a caller asked for per-batch outcomes.
type entry struct {
	data []byte
	id   string
}

// ring is a FIFO of entries that grows by doubling, so a client that only
// ever holds a few messages never allocates MaxQueueSize slots.
type ring struct {
	buf  []entry
	head int
	n    int
}

func (r *ring) len() int { return r.n }

func (r *ring) push(e entry) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)%len(r.buf)] = e
	r.n++
}

// front returns the oldest entry; the ring must not be empty.
func (r *ring) front() *entry { return &r.buf[r.head] }

func (r *ring) pop() entry {
	e := r.buf[r.head]
	r.buf[r.head] = entry{} // let the bytes go
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return e
}

func (r *ring) grow() {
	buf := make([]entry, max(16, 2*len(r.buf)))
	for i := range r.n {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf, r.head = buf, 0
}
