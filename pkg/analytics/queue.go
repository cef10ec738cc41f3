package analytics

import "bytes"

// entry is one queued message: its final wire bytes, encoded once at
// enqueue and kept in slab, its messageId when a caller asked for
// per-batch outcomes, and the caller's tag.
type entry struct {
	data []byte
	id   string
	tag  uint64
	slab *slab
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

// slabSize is the block queued messages are copied into: one allocation
// per slab of messages rather than one per message, and a slab whose
// messages have all been sent is reused rather than left to the GC.
const slabSize = 64 << 10

// maxSpareSlabs bounds the emptied slabs kept for reuse; a client in a
// steady stream empties about one per batch.
const maxSpareSlabs = 4

// slab holds copies of queued messages; refs counts those not yet done.
type slab struct {
	buf  []byte
	refs int
}

// slabs hands out room for queued messages. Its methods need the client's
// lock.
type slabs struct {
	cur   *slab
	spare []*slab
}

// keep copies b into the current slab, starting another when it is full;
// a large message gets a copy of its own and no slab.
func (p *slabs) keep(b []byte) ([]byte, *slab) {
	if len(b) > slabSize/8 {
		return bytes.Clone(b), nil
	}
	s := p.cur
	if s == nil || cap(s.buf)-len(s.buf) < len(b) {
		s = p.next()
	}
	n := len(s.buf)
	s.buf = append(s.buf, b...)
	s.refs++
	return s.buf[n:len(s.buf):len(s.buf)], s
}

// next makes an empty slab current: the full one again if its messages
// are all done, else a spare, else a new one.
func (p *slabs) next() *slab {
	s := p.cur
	switch {
	case s != nil && s.refs == 0:
	case len(p.spare) > 0:
		s = p.spare[len(p.spare)-1]
		p.spare = p.spare[:len(p.spare)-1]
	default:
		s = &slab{buf: make([]byte, 0, slabSize)}
	}
	s.buf = s.buf[:0]
	p.cur = s
	return s
}

// release marks one message of s done; nothing reads its bytes again.
func (p *slabs) release(s *slab) {
	if s == nil {
		return
	}
	if s.refs--; s.refs == 0 && s != p.cur && len(p.spare) < maxSpareSlabs {
		p.spare = append(p.spare, s)
	}
}
