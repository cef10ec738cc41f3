package cmd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/ndjson"
)

// How `send` moves lines: one reader goroutine cuts the input into chunks
// (copies of up to chunkLines lines or chunkBytes bytes) and hands chunk i
// to worker i mod N; each worker parses its lines and enqueues them, in
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

// sendInput is one FILE argument (path "" is stdin).
type sendInput struct {
	name, path string
	size       int64 // -1 when unknown
	firstSeq   int64 // seq of its first line, set while reading
}

// statInputs checks every FILE before anything is sent, so a typo is a
// usage error rather than a half-done import.
func statInputs(ios *cli.IOStreams, files []string) ([]sendInput, error) {
	if len(files) == 0 {
		files = []string{"-"}
	}
	var out []sendInput
	stdin := false
	for _, p := range files {
		if p == "-" {
			if stdin {
				return nil, cli.UsageErrorf("stdin (-) given twice")
			}
			stdin = true
			in := sendInput{name: "stdin", size: -1}
			if f, ok := ios.In.(*os.File); ok {
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					in.size = st.Size()
				}
			}
			out = append(out, in)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, cli.UsageError(err)
		}
		if st.IsDir() {
			return nil, cli.UsageErrorf("%s is a directory", p)
		}
		size := st.Size()
		if !st.Mode().IsRegular() {
			size = -1
		}
		out = append(out, sendInput{name: p, path: p, size: size})
	}
	return out, nil
}

// chunk is a block of lines for one worker.
type chunk struct {
	data  []byte
	lines []chunkLine
}

type chunkLine struct {
	start, end int
	file       int32 // index into inputs
	num        int64 // line number within the file
	seq        int64 // position in the whole input, from 1
	err        error // from the reader (line too long)
}

// pendingLine is a line queued in a client, until its batch's outcome.
type pendingLine struct {
	file int32
	num  int64
	seq  int64
	raw  []byte // the original line, kept only for --errors-file
}

// sendJob is one run of `send`: the reader, the workers and the tallies.
type sendJob struct {
	f       *cli.Factory
	opts    *SendOptions
	inputs  []sendInput
	console *console
	errOut  *bufio.Writer // --errors-file, or nil
	errMu   sync.Mutex
	pacer   *pacer
	workers []*sendWorker
	chunks  sync.Pool
	began   time.Time

	// readCtx ends at the first Ctrl-C (stop reading), drainCtx at the
	// second (abandon the flush).
	readCtx, drainCtx context.Context

	// Tallies, read by the progress line while the run goes.
	lines, blank, rejected, accepted, failed, unsent atomic.Int64
	readErrors                                       atomic.Int64
	bytesDone                                        atomic.Int64 // input bytes of finished inputs
	current                                          atomic.Pointer[ndjson.Reader]

	// Lines at or past these seqs are not accepted: the first line that
	// failed delivery and the first that was never sent (interrupted).
	firstFailed, firstUnsent atomic.Int64
	lastSeq                  int64 // the last line handed to a worker
}

func newSendJob(f *cli.Factory, opts *SendOptions, inputs []sendInput, errOut *bufio.Writer, readCtx, drainCtx context.Context) *sendJob {
	s := &sendJob{f: f, opts: opts, inputs: inputs, errOut: errOut, console: newConsole(f.IO), readCtx: readCtx, drainCtx: drainCtx}
	s.chunks.New = func() any { return &chunk{data: make([]byte, 0, chunkBytes)} }
	if opts.Rate > 0 {
		s.pacer = newPacer(opts.Rate, f.Now, opts.sleep)
	}
	return s
}

// start creates the workers and their clients.
func (s *sendJob) start(cfg analytics.Config) error {
	s.began = s.f.Now()
	for range s.opts.Workers {
		// A few chunks in flight keep the worker busy while the reader reads.
		w := &sendWorker{run: s, in: make(chan *chunk, 4), done: make(chan struct{})}
		c := cfg
		c.OnBatch = w.onBatch
		client, err := newClient(c)
		if err != nil {
			for _, w := range s.workers {
				w.client.Close(context.Background())
			}
			return err
		}
		w.client = client
		s.workers = append(s.workers, w)
	}
	for _, w := range s.workers {
		go w.loop()
	}
	if s.f.IO.ErrTTY {
		s.console.startProgress(s.progress)
	}
	return nil
}

// read feeds every input to the workers until the end or readCtx ends.
func (s *sendJob) read() {
	ctx := s.readCtx
	var seq int64
	n := 0 // chunks dispatched
	c := s.chunks.Get().(*chunk)
	dispatch := func() bool {
		if len(c.lines) == 0 {
			return true
		}
		last := c.lines[len(c.lines)-1].seq // c belongs to the worker once sent
		select {
		case s.workers[n%len(s.workers)].in <- c:
		case <-ctx.Done():
			return false
		}
		s.lastSeq = last
		n++
		c = s.chunks.Get().(*chunk)
		return true
	}
	defer func() {
		c.reset()
		s.chunks.Put(c)
		for _, w := range s.workers {
			close(w.in)
		}
	}()
	for i, in := range s.inputs {
		r, closeIn, err := s.open(in)
		if err != nil {
			s.readError(err)
			continue
		}
		s.current.Store(r)
		s.inputs[i].firstSeq = seq + 1
		for r.Next() {
			if ctx.Err() != nil {
				break
			}
			l := r.Line()
			seq++
			if len(c.lines) == chunkLines || len(c.data)+len(l.Bytes) > chunkBytes && len(c.lines) > 0 {
				if !dispatch() {
					break
				}
			}
			start := len(c.data)
			c.data = append(c.data, l.Bytes...)
			c.lines = append(c.lines, chunkLine{start: start, end: len(c.data), file: int32(i), num: l.Num, seq: seq, err: l.Err})
		}
		if err := r.Err(); err != nil {
			s.readError(err)
		}
		s.bytesDone.Add(r.Offset())
		s.current.Store(nil)
		r.Close()
		closeIn()
		if ctx.Err() != nil {
			return
		}
	}
	dispatch()
}

func (s *sendJob) open(in sendInput) (*ndjson.Reader, func(), error) {
	var rc io.ReadCloser = io.NopCloser(s.f.IO.In)
	if in.path != "" {
		f, err := os.Open(in.path)
		if err != nil {
			return nil, nil, err
		}
		rc = f
	}
	r, err := ndjson.NewReader(rc, in.name, ndjson.Options{MaxLine: maxReadLine})
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return r, func() { rc.Close() }, nil
}

func (s *sendJob) readError(err error) {
	s.readErrors.Add(1)
	s.console.line("error: " + err.Error())
}

// finish waits for the workers to enqueue what they were given, then
// flushes every client; ctx ending (second Ctrl-C) abandons the flush.
func (s *sendJob) finish(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range s.workers {
		wg.Go(func() {
			<-w.done
			w.client.Close(ctx)
		})
	}
	wg.Wait()
	s.console.stopProgress()
}

// badLine reports a line refused as bad input, rejected by the API or not
// delivered, and keeps raw (when known) in --errors-file.
func (s *sendJob) badLine(file int32, num int64, reason string, raw []byte) {
	s.console.line(s.inputs[file].name + ":" + itoa(num) + ": " + reason)
	if s.errOut != nil && raw != nil {
		s.errMu.Lock()
		s.errOut.Write(raw)
		s.errOut.WriteByte('\n')
		s.errMu.Unlock()
	}
}

func (c *chunk) reset() {
	c.data = c.data[:0]
	clear(c.lines)
	c.lines = c.lines[:0]
}

// sendWorker parses and enqueues its chunks into its own client.
type sendWorker struct {
	run    *sendJob
	client *analytics.Client
	in     chan *chunk
	done   chan struct{}

	raw message.Raw // the line being enqueued

	mu      sync.Mutex
	pending []pendingLine // queued lines, in queue order
	head    int
}

func (w *sendWorker) loop() {
	defer close(w.done)
	s := w.run
	stopped := false
	for c := range w.in {
		read := 0 // counted once per chunk: the progress line needs no more
		for i := range c.lines {
			l := &c.lines[i]
			if stopped || s.readCtx.Err() != nil {
				if !stopped {
					stopped = true
					minStore(&s.firstUnsent, l.seq)
				}
				continue
			}
			if !w.line(c.data[l.start:l.end], l) {
				stopped = true
				minStore(&s.firstUnsent, l.seq)
				continue
			}
			read++
		}
		s.lines.Add(int64(read))
		c.reset()
		s.chunks.Put(c)
	}
}

// line handles one line; false when reading stopped before it was queued.
func (w *sendWorker) line(b []byte, l *chunkLine) bool {
	s := w.run
	if l.err != nil { // too long to hold, so not kept for --errors-file
		s.rejected.Add(1)
		s.badLine(l.file, l.num, l.err.Error(), nil)
		return true
	}
	if isBlank(b) {
		s.blank.Add(1)
		return true
	}
	raw := &w.raw
	if err := raw.Parse(b); err != nil {
		s.rejected.Add(1)
		s.badLine(l.file, l.num, lineReason(err), b)
		return true
	}
	if s.pacer != nil {
		if s.pacer.wait(s.readCtx) != nil {
			return false
		}
	}
	p := pendingLine{file: l.file, num: l.num, seq: l.seq}
	if s.errOut != nil {
		p.raw = append([]byte(nil), b...)
	}
	// The line joins the pending list before the client can report it.
	w.mu.Lock()
	w.pending = append(w.pending, p)
	w.mu.Unlock()
	if err := w.client.EnqueueWait(s.readCtx, raw); err != nil {
		w.mu.Lock()
		w.pending = w.pending[:len(w.pending)-1]
		w.mu.Unlock()
		if s.readCtx.Err() != nil && errors.Is(err, s.readCtx.Err()) {
			return false
		}
		s.rejected.Add(1)
		s.badLine(l.file, l.num, lineReason(err), b)
	}
	return true
}

// onBatch settles the batch's lines, the oldest pending ones.
func (w *sendWorker) onBatch(res analytics.BatchResult) {
	s := w.run
	n := len(res.MessageIds)
	w.mu.Lock()
	lines := w.pending[w.head : w.head+n]
	w.head += n
	var settled []pendingLine
	if res.Err != nil {
		settled = append(settled, lines...)
	}
	clear(lines) // drop the kept bytes
	if w.head > 1024 && w.head*2 > len(w.pending) {
		w.pending = append(w.pending[:0], w.pending[w.head:]...)
		w.head = 0
	}
	w.mu.Unlock()
	switch {
	case res.Err == nil:
		s.accepted.Add(int64(n))
	case errors.Is(res.Err, analytics.ErrClosed) || s.drainCtx.Err() != nil:
		// Abandoned by a second Ctrl-C: not sent, or sent without an answer.
		s.unsent.Add(int64(n))
		if len(settled) > 0 {
			minStore(&s.firstUnsent, settled[0].seq)
		}
	default:
		s.failed.Add(int64(n))
		minStore(&s.firstFailed, settled[0].seq)
		reason := "not delivered: " + strings.TrimPrefix(res.Err.Error(), "analytics: ")
		for _, p := range settled {
			s.badLine(p.file, p.num, reason, p.raw)
		}
	}
}

// lineReason says why a line was refused, in the user's terms.
func lineReason(err error) string {
	var ve *message.ValidationError
	var se *message.SizeError
	switch {
	case errors.As(err, &ve):
		if ve.Type != "" {
			return string(ve.Type) + ": " + ve.Error()
		}
		return ve.Error()
	case errors.As(err, &se):
		return se.Error()
	}
	return "invalid JSON: " + err.Error()
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// minStore lowers v to seq (0 means unset).
func minStore(v *atomic.Int64, seq int64) {
	for {
		old := v.Load()
		if old != 0 && old <= seq {
			return
		}
		if v.CompareAndSwap(old, seq) {
			return
		}
	}
}
