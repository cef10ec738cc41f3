package importer

import (
	"errors"
	"sync"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
)

// worker parses and enqueues its chunks into its own client.
type worker struct {
	im      *Import
	client  *analytics.Client
	in      chan *chunk
	done    chan struct{}
	raw     message.Raw // the line being enqueued
	pending pending
}

func newWorker(im *Import) (*worker, error) {
	// A few chunks in flight keep the worker busy while the reader reads.
	w := &worker{im: im, in: make(chan *chunk, 4), done: make(chan struct{})}
	cfg := im.opts.Client
	cfg.OnBatch = w.onBatch
	if theirs := im.opts.Client.OnBatch; theirs != nil {
		cfg.OnBatch = func(res analytics.BatchResult) { w.onBatch(res); theirs(res) }
	}
	c, err := analytics.New(cfg)
	if err != nil {
		return nil, err
	}
	w.client = c
	return w, nil
}

func (w *worker) loop() {
	defer close(w.done)
	im := w.im
	stopped := false
	for c := range w.in {
		// Lines count as read once per chunk (progress needs no more), and
		// before any is handled: no summary shows more lines settled than
		// read. Those left unhandled when reading stops are taken back.
		im.lines.Add(int64(len(c.lines)))
		unhandled := 0
		for i := range c.lines {
			l := &c.lines[i]
			if stopped || im.readCtx.Err() != nil {
				if !stopped {
					stopped = true
					minStore(&im.firstUnsent, l.seq)
				}
				unhandled++
				continue
			}
			if !w.line(c.data[l.start:l.end], l) {
				stopped = true
				minStore(&im.firstUnsent, l.seq)
				unhandled++
			}
		}
		if unhandled > 0 {
			im.lines.Add(-int64(unhandled))
		}
		c.reset()
		im.chunks.Put(c)
	}
}

// line handles one line; false when reading stopped before it was queued.
func (w *worker) line(b []byte, l *chunkLine) bool {
	im := w.im
	if l.err != nil { // too long to hold, so not kept
		im.rejected.Add(1)
		im.lineError(l.input, l.num, nil, false, l.err)
		return true
	}
	if isBlank(b) || b[0] == '#' { // a note, as an errors file holds: never JSON
		im.blank.Add(1)
		return true
	}
	raw := &w.raw
	if err := raw.Parse(b); err != nil {
		im.rejected.Add(1)
		im.lineError(l.input, l.num, b, false, err)
		return true
	}
	if im.pacer != nil {
		if im.pacer.wait(im.readCtx) != nil {
			return false
		}
	}
	p := pendingLine{input: l.input, num: l.num, seq: l.seq}
	if im.opts.KeepLines {
		p.raw = append([]byte(nil), b...)
	}
	// The line is pending before the client can report its batch.
	tag := w.pending.add(p)
	if err := w.client.EnqueueWaitTagged(im.readCtx, raw, tag); err != nil {
		w.pending.dropLast()
		// Stopped: the wait ended, or a fatal answer closed the client.
		if im.readCtx.Err() != nil && (errors.Is(err, im.readCtx.Err()) || errors.Is(err, analytics.ErrClosed)) {
			return false
		}
		im.rejected.Add(1)
		im.lineError(l.input, l.num, b, false, err)
	}
	return true
}

// onBatch settles the lines the batch carried.
func (w *worker) onBatch(res analytics.BatchResult) {
	im := w.im
	n := int64(len(res.Tags))
	lines := w.pending.settle(res.Tags, res.Err != nil)
	if res.Err != nil {
		if err := im.fatalError(res.Err); err != nil {
			// Its lines are fine, and a resume sends them: unsent below,
			// not reported one by one (a wrong key would report them all).
			im.stop(err)
		}
	}
	switch {
	case res.Err == nil:
		im.accepted.Add(n)
	case errors.Is(res.Err, analytics.ErrClosed) || im.abandoned.Err() != nil:
		// Abandoned or stopped: not sent, sent without an answer, or
		// refused with the rest of the run.
		im.unsent.Add(n)
		if len(lines) > 0 {
			minStore(&im.firstUnsent, firstSeq(lines))
		}
		cause := im.unsentCause(res.Err)
		for _, p := range lines {
			im.report(im.opts.OnUnsent, &LineError{Input: im.inputs[p.input].Name, Line: p.num, Bytes: p.raw, Unsent: true, Attempts: res.Attempts, Err: cause})
		}
	default:
		im.failed.Add(n)
		minStore(&im.firstFailed, firstSeq(lines))
		for _, p := range lines {
			im.report(im.opts.OnLineError, &LineError{Input: im.inputs[p.input].Name, Line: p.num, Bytes: p.raw, Sent: true, Attempts: res.Attempts, Err: res.Err})
		}
	}
}

// pendingLine is a line queued in a client, until its batch's outcome.
type pendingLine struct {
	input int32
	num   int64
	seq   int64  // 0 once settled
	raw   []byte // the line as read, kept only with KeepLines
}

func firstSeq(lines []pendingLine) int64 {
	first := lines[0].seq
	for _, p := range lines[1:] {
		first = min(first, p.seq)
	}
	return first
}

// pending holds a worker's queued lines until their batches' outcomes. A
// line's tag is its place in the worker's queue order, lines[i] having
// tag base+i+1, so the tags a batch reports find their lines directly.
// Tags start at 1 because analytics reports 0 for an untagged message.
type pending struct {
	mu    sync.Mutex
	lines []pendingLine // lines[head:] hold every unsettled line
	head  int
	base  uint64
}

// add makes l pending and returns its tag.
func (p *pending) add(l pendingLine) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, l)
	return p.base + uint64(len(p.lines))
}

// dropLast forgets the line add last made pending: the client refused
// it. Settling never moves past an unsettled line, so it is still there.
func (p *pending) dropLast() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines[len(p.lines)-1] = pendingLine{}
	p.lines = p.lines[:len(p.lines)-1]
}

// settle ends the lines of tags, returning them when keep is set.
func (p *pending) settle(tags []uint64, keep bool) []pendingLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pendingLine
	if keep {
		out = make([]pendingLine, 0, len(tags))
	}
	for _, t := range tags {
		i := t - p.base - 1
		if keep {
			out = append(out, p.lines[i])
		}
		p.lines[i] = pendingLine{} // drops the kept bytes
	}
	for p.head < len(p.lines) && p.lines[p.head].seq == 0 {
		p.head++
	}
	// Reuse the slice once most of it is settled.
	if p.head > 1024 && p.head*2 > len(p.lines) {
		n := copy(p.lines, p.lines[p.head:])
		clear(p.lines[n:])
		p.lines = p.lines[:n]
		p.base += uint64(p.head)
		p.head = 0
	}
	return out
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
