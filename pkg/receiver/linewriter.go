package receiver

import (
	"io"
	"sync"
	"time"
)

// FlushInterval is the longest a line waits in a LineWriter; FlushSize
// the batch size that is written without waiting.
const (
	FlushInterval = 20 * time.Millisecond
	FlushSize     = 64 << 10
)

// LineWriter collects whole lines from many goroutines and writes them to
// an underlying writer from one goroutine, in batches. A batch goes out
// FlushInterval after its first line, or as soon as FlushSize bytes wait,
// so under load a write syscall carries hundreds of lines instead of one
// (per-line writes and wake-ups cost more than the rest of a request), and
// a quiet listener still shows a line within the interval. A slow disk or
// pipe never holds the mutex that request handlers take.
type LineWriter struct {
	w io.Writer

	mu      sync.Mutex
	buf     []byte
	err     error // first write error; later lines are dropped
	closed  bool
	wake    chan struct{}
	armed   bool       // a flush timer is pending
	writing bool       // a batch is out of buf and being written
	flushed *sync.Cond // signalled when buf has drained
	done    chan struct{}
}

// NewLineWriter starts a LineWriter over w; Close it to write the rest.
func NewLineWriter(w io.Writer) *LineWriter {
	lw := &LineWriter{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	lw.flushed = sync.NewCond(&lw.mu)
	go lw.run()
	return lw
}

// WriteLine queues line (which must end in '\n') for writing. It never
// blocks on I/O. It returns the first error the writer met, if any.
func (lw *LineWriter) WriteLine(line []byte) error {
	return lw.Append(func(b []byte) []byte { return append(b, line...) })
}

// Append lets a caller encode straight into the queue: fn gets the buffer
// and returns it extended by whole lines, which saves a copy per line.
// fn runs under the writer's lock, so it must be quick.
func (lw *LineWriter) Append(fn func([]byte) []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	if lw.closed {
		return io.ErrClosedPipe
	}
	wasEmpty := len(lw.buf) == 0
	lw.buf = fn(lw.buf)
	switch {
	case len(lw.buf) >= FlushSize:
		lw.signal()
	case wasEmpty && !lw.armed:
		lw.armed = true
		time.AfterFunc(FlushInterval, lw.timerFired)
	}
	return nil
}

func (lw *LineWriter) timerFired() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.armed = false
	if !lw.closed {
		lw.signal()
	}
}

// signal wakes the writing goroutine; mu must be held, so it never races
// with Close closing the channel.
func (lw *LineWriter) signal() {
	select {
	case lw.wake <- struct{}{}:
	default:
	}
}

func (lw *LineWriter) run() {
	defer close(lw.done)
	var spare []byte
	for {
		_, open := <-lw.wake
		for {
			lw.mu.Lock()
			if len(lw.buf) == 0 {
				lw.writing = false
				lw.flushed.Broadcast()
				lw.mu.Unlock()
				break
			}
			batch := lw.buf
			lw.buf = spare[:0]
			lw.writing = true
			lw.mu.Unlock()
			_, err := lw.w.Write(batch)
			if err != nil {
				lw.mu.Lock()
				if lw.err == nil {
					lw.err = err
				}
				lw.mu.Unlock()
			}
			spare = batch
		}
		if !open {
			return
		}
	}
}

// Flush waits until every line queued before it has been written.
func (lw *LineWriter) Flush() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for (len(lw.buf) > 0 || lw.writing) && lw.err == nil && !lw.closed {
		lw.signal()
		lw.flushed.Wait()
	}
	return lw.err
}

// Close writes every queued line, stops the goroutine and returns the
// first write error. It does not close the underlying writer.
func (lw *LineWriter) Close() error {
	lw.mu.Lock()
	if !lw.closed {
		lw.closed = true
		close(lw.wake)
	}
	lw.mu.Unlock()
	<-lw.done
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}
