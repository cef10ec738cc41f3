package importer

import (
	"github.com/evfwd/evfwd/pkg/ndjson"
)

// How lines move: one reader goroutine cuts the input into chunks (copies
// of up to chunkLines lines or chunkBytes bytes) and hands chunk i to
// worker i mod N; each worker parses its lines and enqueues them, in
// order, into its own client, waiting when the queue is full. Memory is
// bounded by the chunks in flight and the clients' queues, never the input.
// A worker parses lines faster than one client delivers them, so parsing
// is not spread over more goroutines: each hand-off between goroutines
// costs CPU that the connection needs.
const (
	chunkLines = 256
	chunkBytes = 256 << 10
	// maxReadLine is the longest line read whole; longer ones are
	// reported without being held (they are far over the 32 KB limit).
	maxReadLine = 1 << 20
)

// chunk is a block of lines for one worker.
type chunk struct {
	data  []byte
	lines []chunkLine
}

type chunkLine struct {
	start, end int
	input      int32 // index into Import.inputs
	num        int64 // line number within the input
	seq        int64 // position in the whole import, from 1
	err        error // from the reader (line too long)
}

func (c *chunk) reset() {
	c.data = c.data[:0]
	clear(c.lines)
	c.lines = c.lines[:0]
}

// read feeds every input to the workers until the end or readCtx ends.
func (im *Import) read() {
	ctx := im.readCtx
	var seq int64
	n := 0 // chunks dispatched
	c := im.chunks.Get().(*chunk)
	dispatch := func() bool {
		if len(c.lines) == 0 {
			return true
		}
		last := c.lines[len(c.lines)-1].seq // c belongs to the worker once sent
		select {
		case im.workers[n%len(im.workers)].in <- c:
		case <-ctx.Done():
			return false
		}
		im.lastSeq.Store(last)
		n++
		c = im.chunks.Get().(*chunk)
		return true
	}
	defer func() {
		c.reset()
		im.chunks.Put(c)
		for _, w := range im.workers {
			close(w.in)
		}
	}()
	for i, in := range im.inputs {
		if ctx.Err() != nil { // stopped before Run, or after a failed open
			return
		}
		if i < im.resumeAt { // settled by the run being resumed
			continue
		}
		r, closeIn, err := open(in)
		if err != nil {
			im.readError(i, 0, seq, err)
			continue
		}
		im.current.Store(r)
		im.firstSeq[i].Store(seq + 1)
		for r.Next() {
			if ctx.Err() != nil {
				break
			}
			l := r.Line()
			seq++
			if im.skip(i, l.Num, seq) {
				continue
			}
			if len(c.lines) == chunkLines || len(c.data)+len(l.Bytes) > chunkBytes && len(c.lines) > 0 {
				if !dispatch() {
					break
				}
			}
			start := len(c.data)
			c.data = append(c.data, l.Bytes...)
			c.lines = append(c.lines, chunkLine{start: start, end: len(c.data), input: int32(i), num: l.Num, seq: seq, err: l.Err})
		}
		if err := r.Err(); err != nil {
			im.readError(i, r.Line().Num, seq, err)
		}
		im.bytesDone.Add(r.Offset())
		im.ndjsonDone.Add(r.Decoded())
		im.current.Store(nil)
		r.Close()
		closeIn()
		if ctx.Err() != nil {
			return
		}
	}
	dispatch()
}

// skip reports whether the line is one Options.Skip or Options.Resume
// leaves out, and counts it. Skipped lines come before any line sent, so
// each one is settled as soon as it is read.
func (im *Import) skip(input int, num, seq int64) bool {
	if seq > im.opts.Skip && (input != im.resumeAt || num > im.opts.Resume.Line) {
		return false
	}
	im.lines.Add(1) // first, as Summary loads it last
	im.skipped.Add(1)
	im.lastSeq.Store(seq)
	return true
}

func open(in Input) (*ndjson.Reader, func(), error) {
	rc, err := in.Open()
	if err != nil {
		return nil, nil, err
	}
	r, err := ndjson.NewReader(rc, in.Name, ndjson.Options{MaxLine: maxReadLine})
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return r, func() { rc.Close() }, nil
}
