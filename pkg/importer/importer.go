// Package importer sends NDJSON calls (one message per line, with its
// "type") through evfwd's batching client and accounts for every line: a
// bulk import or a replay. Input is read in constant memory, gzip
// decompressed on the fly, and lines keep their exact bytes. Lines go in
// fixed blocks to independent workers, each with its own analytics.Client,
// optionally paced.
//
// Every line read ends as accepted by the collection API, rejected as bad
// input (never sent), not delivered (refused by the API or out of
// retries), unsent (a run abandoned while it was queued) or skipped (a
// resumed run). Lines not accepted, unsent ones too, are handed to the
// caller with their input, line number, bytes and reason, so they can be
// fixed and sent again (lines starting with #, skipped as blank ones are,
// can carry the reason above each line), and the summary names the line up to which everything was settled: where to
// resume (Options.Resume). An answer that refuses the write key, or a
// refused connection the client takes as final, ends the whole run
// (Summary.Fatal): every other batch would fail alike.
package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/ndjson"
)

// Input is one source of lines.
type Input struct {
	// Name names its lines (NAME:LINE); a name ending in .gz, or data that
	// starts as gzip does, is decompressed.
	Name string
	// Size is its length in bytes, -1 when unknown (Summary.TotalBytes).
	Size int64
	// Open is called when the input's turn comes; Run closes what it
	// returns.
	Open func() (io.ReadCloser, error)
}

// File is the input of the file at path. It looks at the file now, so
// that a wrong path fails before anything is sent: a missing file, a
// directory or a regular file that cannot be opened for reading gives a
// *ReadError. A FIFO or device is only opened at its turn, since opening
// one can wait for a writer.
func File(path string) (Input, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Input{}, &ReadError{Input: path, Err: err}
	}
	if st.IsDir() {
		return Input{}, &ReadError{Input: path, Err: syscall.EISDIR}
	}
	size := st.Size()
	if st.Mode().IsRegular() {
		f, err := os.Open(path)
		if err != nil {
			return Input{}, &ReadError{Input: path, Err: err}
		}
		f.Close()
	} else {
		size = -1
	}
	return Input{Name: path, Size: size, Open: func() (io.ReadCloser, error) { return os.Open(path) }}, nil
}

// ReadError is an input that could not be opened, or read to its end.
type ReadError struct {
	Input string // Input.Name
	// Line is the line being read when reading failed; 0 when the input
	// could not be opened.
	Line int64
	Err  error
}

// Error names the input (and line) and gives the cause in words:
// "cannot read a.ndjson: permission denied".
func (e *ReadError) Error() string {
	cause := e.Err
	var pe *fs.PathError
	if errors.As(cause, &pe) { // the path is said already
		cause = pe.Err
	}
	if e.Line > 0 {
		return fmt.Sprintf("cannot read %s at line %d: %v", e.Input, e.Line, cause)
	}
	return fmt.Sprintf("cannot read %s: %v", e.Input, cause)
}

func (e *ReadError) Unwrap() error { return e.Err }

// Stream is the input of r, such as stdin; Run does not close it. Its
// size is known when r is a regular file.
func Stream(name string, r io.Reader) Input {
	in := Input{Name: name, Size: -1, Open: func() (io.ReadCloser, error) { return io.NopCloser(r), nil }}
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			in.Size = st.Size()
		}
	}
	return in
}

// Options configure an Import. Zero values mean the defaults.
type Options struct {
	// Client configures each worker's client (WriteKey, Endpoint,
	// BatchSize, MaxQueueSize per worker, retries); its Now is the
	// import's clock too. Its OnBatch, if any, is called after the
	// importer's own.
	Client analytics.Config
	// Workers is how many clients send side by side, each with one
	// request in flight (default 1). Lines go to workers in fixed blocks
	// of consecutive lines, so the same input always splits the same way.
	Workers int
	// Rate caps events per second over all workers (0: no cap).
	Rate float64
	// KeepLines has LineError.Bytes carry the line as read, for an errors
	// file: each queued line is kept until its batch's outcome.
	KeepLines bool
	// OnLineError is called for each line not accepted, except those an
	// abandoned run leaves unsent (Summary.Unsent). Workers and clients
	// call it from their goroutines, so calls may overlap.
	OnLineError func(*LineError)
	// OnUnsent is called for each line an abandoned or stopped run left
	// unsent (Summary.Unsent), with LineError.Unsent set: lines a resume
	// sends again, so OnLineError does not report them one by one. Called
	// from the clients' goroutines, as OnLineError.
	OnUnsent func(*LineError)
	// OnReadError is called, with a *ReadError, when an input cannot be opened or read to its
	// end; the import goes on with the next input.
	OnReadError func(error)

	// Skip skips the first Skip lines of the inputs taken as one stream,
	// counted across them in order, as if they were concatenated.
	Skip int64
	// Resume continues after a Summary.LastAccepted of an earlier run:
	// the inputs before Resume.Input are not opened, and its lines up to
	// Resume.Line are skipped. Input must name exactly one input, and Line
	// be at least 1. Skip and Resume exclude each other.
	Resume Position

	// sleep is the pacer's wait; tests replace it.
	sleep func(context.Context, time.Duration) error
}

// LineError is a line that was not accepted.
type LineError struct {
	Input string // Input.Name
	Line  int64  // from 1
	// Bytes is the line as read when Options.KeepLines is set, valid
	// until OnLineError returns; nil for a line too long to hold.
	Bytes []byte
	// Sent: the line went to the API, which refused it or could not be
	// reached after retries (Err is the client's). Otherwise it was
	// refused as bad input and never sent.
	Sent bool
	// Unsent: the line was queued when the run was abandoned or stopped
	// (Options.OnUnsent); Err says why, and whether a request carrying it
	// was cut off.
	Unsent bool
	// Attempts is how many requests carried the line (Sent or Unsent).
	Attempts int
	Err      error
}

// Error is "INPUT:LINE: reason", the reason in a user's terms.
func (e *LineError) Error() string {
	return Position{Input: e.Input, Line: e.Line}.String() + ": " + e.reason()
}

func (e *LineError) Unwrap() error { return e.Err }

func (e *LineError) reason() string {
	cause := Cause(e.Err)
	if e.Attempts > 1 {
		cause += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	switch {
	case e.Unsent && errors.Is(e.Err, ErrAbandoned) && e.Attempts > 0:
		return "abandoned while its request was in flight: it may have arrived"
	case e.Unsent && errors.Is(e.Err, ErrAbandoned):
		return "abandoned before it was sent"
	case e.Unsent && e.Attempts > 0:
		return "not delivered, the run stopped: " + cause
	case e.Unsent:
		return "not sent, the run stopped: " + cause
	case e.Sent:
		return "not delivered: " + cause
	}
	var ve *message.ValidationError
	var se *message.SizeError
	var le *ndjson.LineTooLongError
	switch {
	case errors.As(e.Err, &ve):
		if ve.Type != "" {
			return string(ve.Type) + ": " + ve.Error()
		}
		return ve.Error()
	case errors.As(e.Err, &se):
		return se.Error()
	case errors.As(e.Err, &le):
		return le.Error()
	}
	return "invalid JSON: " + e.Err.Error()
}

// ErrUnauthorized is what Summary.Fatal is (errors.Is) when the API
// refused the write key.
var ErrUnauthorized = errors.New("the API refused the write key")

// AuthError is the answer 401 or 403 to a batch: the write key is wrong,
// so the run stops rather than have every batch refused in turn.
type AuthError struct {
	Status int
	Err    *analytics.APIError // the answer, with the server's message
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("%v (HTTP %d)", ErrUnauthorized, e.Status)
}

func (e *AuthError) Is(target error) bool { return target == ErrUnauthorized }
func (e *AuthError) Unwrap() error        { return e.Err }

// ErrNoServer is what Summary.Fatal is (errors.Is) when a batch failed
// for good on a refused connection: at once under the client's
// analytics.RetryPolicy.StopOnRefused, else once its retries ran out.
// Nothing listens at the endpoint, and every other batch would fail alike.
var ErrNoServer = errors.New("nothing listens at the endpoint")

// RefusedError is a batch's final refused connection.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string        { return Cause(e.Err) }
func (e *RefusedError) Is(target error) bool { return target == ErrNoServer }
func (e *RefusedError) Unwrap() error        { return e.Err }

// fatalError is the error that ends a whole run when a batch fails with
// err, or nil when only that batch's lines failed.
func (im *Import) fatalError(err error) error {
	var api *analytics.APIError
	switch {
	case errors.As(err, &api) && (api.Status == 401 || api.Status == 403):
		return &AuthError{Status: api.Status, Err: api}
	case analytics.IsRefused(err):
		return &RefusedError{Err: err}
	}
	return nil
}

// Cause is a failed request's error in words: "POST URL: connection
// refused" rather than Go's quoted URL and dial chain; an answer is
// "server answered 400: why".
func Cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		cause := ue.Err
		for next := errors.Unwrap(cause); next != nil; next = errors.Unwrap(cause) {
			cause = next
		}
		if errors.Is(cause, context.DeadlineExceeded) {
			return strings.ToUpper(ue.Op) + " " + ue.URL + ": no answer in time"
		}
		return strings.ToUpper(ue.Op) + " " + ue.URL + ": " + cause.Error()
	}
	return strings.TrimPrefix(fmt.Sprint(err), "analytics: ")
}

// Position is a line of an input.
type Position struct {
	Input string
	Line  int64 // from 1; 0 for none
}

// String is "INPUT:LINE", or "" for none.
func (p Position) String() string {
	if p.Line <= 0 {
		return ""
	}
	return p.Input + ":" + strconv.FormatInt(p.Line, 10)
}

// Summary is the account of an import: so far while it runs, final once
// Run returns.
type Summary struct {
	Lines      int64 // lines read and handled, blank and skipped ones included
	Accepted   int64 // accepted by the collection API
	Rejected   int64 // bad input, never sent
	Failed     int64 // refused by the API or undeliverable after retries
	Unsent     int64 // queued when the run was abandoned or stopped by Fatal
	Blank      int64 // blank lines and lines starting with # (notes, as in an errors file)
	Skipped    int64 // read but not sent: Options.Skip or Options.Resume
	ReadErrors int64 // inputs that could not be opened or read to the end
	BytesRead  int64 // input bytes read (the compressed size for gzip)
	NDJSONRead int64 // NDJSON bytes read: BytesRead, after gzip is undone
	TotalBytes int64 // the inputs' sizes added up; -1 when one is unknown
	Batches    int64
	Retries    int64
	Elapsed    time.Duration // since New
	// LastAccepted is the last line such that it and every line before it
	// was accepted, rejected as bad input or skipped: where to resume
	// (Options.Resume). Meaningful once Run has returned.
	LastAccepted Position
	// Fatal is why the run stopped on its own, as Abandon does: an
	// *AuthError (errors.Is ErrUnauthorized) or a *RefusedError (errors.Is
	// ErrNoServer). The lines of the refused
	// batch count as Unsent, since resuming sends them again.
	Fatal error
}

// Import is one run over a list of inputs.
type Import struct {
	inputs   []Input
	firstSeq []atomic.Int64 // seq of each input's first line, once reading it began
	resumeAt int            // index of the input Options.Resume names; -1 for none
	opts     Options
	now      func() time.Time
	began    time.Time
	pacer    *pacer
	chunks   sync.Pool

	// abandoned ends when Abandon is called: delivery is given up.
	abandoned context.Context
	abandon   context.CancelFunc

	// Set by Run before its goroutines start. Summary, which may run
	// beside Run, reads the clients only through clients.
	readCtx     context.Context // ends when reading stops: Run's ctx or Abandon
	stopReading context.CancelFunc
	workers     []*worker
	clients     atomic.Pointer[[]*analytics.Client]

	lines, blank, rejected, accepted, failed, unsent atomic.Int64
	skipped, readErrors                              atomic.Int64
	fatal                                            atomic.Pointer[error] // the first Summary.Fatal
	bytesDone                                        atomic.Int64          // input bytes of finished inputs
	ndjsonDone                                       atomic.Int64          // their NDJSON bytes (gzip undone)
	current                                          atomic.Pointer[ndjson.Reader]

	// Lines at or past these seqs are not settled: the first line that
	// failed delivery and the first that was never sent (interrupted).
	firstFailed, firstUnsent atomic.Int64
	firstUnread              atomic.Int64 // the first line of an input that could not be read
	lastSeq                  atomic.Int64 // the last line handed to a worker
}

// New prepares an import of inputs, in order: a bad Options.Client gives
// the client's *analytics.ConfigError. It starts nothing: the clients are
// built by Run, so an Import that never runs needs no clean-up. Call Run
// once.
func New(inputs []Input, opts Options) (*Import, error) {
	switch {
	case opts.Workers < 0:
		return nil, errors.New("importer: Workers must not be negative")
	case opts.Rate < 0:
		return nil, errors.New("importer: Rate must not be negative")
	case opts.Skip < 0:
		return nil, errors.New("importer: Skip must not be negative")
	case opts.Skip > 0 && opts.Resume != Position{}:
		return nil, errors.New("importer: Skip and Resume exclude each other")
	case opts.Workers == 0:
		opts.Workers = 1
	}
	resumeAt, err := resumeInput(inputs, opts.Resume)
	if err != nil {
		return nil, err
	}
	// analytics checks a config only by building a client: build one and
	// stop it at once, so that Run's clients cannot fail.
	c, err := analytics.New(opts.Client)
	if err != nil {
		return nil, err
	}
	c.Close(context.Background())
	im := &Import{inputs: inputs, firstSeq: make([]atomic.Int64, len(inputs)), resumeAt: resumeAt, opts: opts, now: opts.Client.Now}
	if im.now == nil {
		im.now = time.Now
	}
	im.chunks.New = func() any { return &chunk{data: make([]byte, 0, chunkBytes)} }
	if opts.Rate > 0 {
		im.pacer = newPacer(opts.Rate, im.now, opts.sleep)
	}
	im.abandoned, im.abandon = context.WithCancel(context.Background())
	im.began = im.now()
	return im, nil
}

// resumeInput is the index of the input p names, -1 for no p.
func resumeInput(inputs []Input, p Position) (int, error) {
	if p == (Position{}) {
		return -1, nil
	}
	if p.Line < 1 {
		return 0, fmt.Errorf("importer: Resume line %d: lines count from 1", p.Line)
	}
	at := -1
	for i, in := range inputs {
		if in.Name != p.Input {
			continue
		}
		if at >= 0 { // the line could be of either
			return 0, fmt.Errorf("importer: Resume input %q is given more than once", p.Input)
		}
		at = i
	}
	if at < 0 {
		return 0, fmt.Errorf("importer: Resume input %q is not among the inputs", p.Input)
	}
	return at, nil
}

// Run reads the inputs and sends their lines, and returns the final
// summary once every line read is settled. When ctx ends, reading stops
// and what is already queued is still delivered (a first Ctrl-C); Abandon
// cuts that short, and so does a fatal answer (Summary.Fatal).
func (im *Import) Run(ctx context.Context) Summary {
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	defer context.AfterFunc(im.abandoned, stopReading)()
	if im.abandoned.Err() != nil { // AfterFunc would stop reading only later
		stopReading()
	}
	im.readCtx, im.stopReading = readCtx, stopReading

	clients := make([]*analytics.Client, 0, im.opts.Workers)
	for range im.opts.Workers {
		w, err := newWorker(im)
		if err != nil { // not expected: New built a client from this config
			for _, w := range im.workers {
				w.client.Close(context.Background())
			}
			im.workers = nil
			im.fatal.CompareAndSwap(nil, &err)
			return im.Summary()
		}
		im.workers = append(im.workers, w)
		clients = append(clients, w.client)
	}
	im.clients.Store(&clients)
	for _, w := range im.workers {
		go w.loop()
	}
	im.read()
	var wg sync.WaitGroup
	for _, w := range im.workers {
		wg.Go(func() {
			<-w.done
			w.client.Close(im.abandoned)
		})
	}
	wg.Wait()
	return im.Summary()
}

// Abandon gives the run up at once, as a second Ctrl-C does: reading
// stops, the request in flight is cut off, and what was queued is not
// delivered (Summary.Unsent); Run then returns promptly. It may be called
// from any goroutine, at any time and more than once; before Run, Run
// reads nothing.
func (im *Import) Abandon() { im.abandon() }

// Summary is the account so far; it may be called while Run goes on.
func (im *Import) Summary() Summary {
	// Lines are counted before they are settled, so loading them last
	// keeps every settled count within Lines while the run goes on.
	sum := Summary{
		Accepted: im.accepted.Load(), Rejected: im.rejected.Load(),
		Failed: im.failed.Load(), Unsent: im.unsent.Load(), Blank: im.blank.Load(),
		Skipped: im.skipped.Load(), ReadErrors: im.readErrors.Load(), BytesRead: im.bytesDone.Load(),
		NDJSONRead: im.ndjsonDone.Load(),
		Elapsed:    im.now().Sub(im.began),
	}
	sum.Lines = im.lines.Load()
	if f := im.fatal.Load(); f != nil {
		sum.Fatal = *f
	}
	if r := im.current.Load(); r != nil {
		sum.BytesRead += r.Offset()
		sum.NDJSONRead += r.Decoded()
	}
	for _, in := range im.inputs[max(im.resumeAt, 0):] { // a resume opens none before
		if in.Size < 0 {
			sum.TotalBytes = -1
			break
		}
		sum.TotalBytes += in.Size
	}
	if clients := im.clients.Load(); clients != nil {
		for _, c := range *clients {
			st := c.Stats()
			sum.Batches += st.Batches
			sum.Retries += st.Retries
		}
	}
	last := im.lastSeq.Load()
	for _, first := range []int64{im.firstFailed.Load(), im.firstUnsent.Load(), im.firstUnread.Load()} {
		if first > 0 {
			last = min(last, first-1)
		}
	}
	sum.LastAccepted = im.position(last)
	return sum
}

// position turns a line's seq into its input and line number.
func (im *Import) position(seq int64) Position {
	if seq <= 0 {
		return Position{}
	}
	for i := len(im.inputs) - 1; i >= 0; i-- {
		if first := im.firstSeq[i].Load(); first > 0 && first <= seq {
			return Position{Input: im.inputs[i].Name, Line: seq - first + 1}
		}
	}
	return Position{}
}

// lineError reports a line not accepted; b is kept only when asked for.
func (im *Import) lineError(input int32, num int64, b []byte, sent bool, err error) {
	im.report(im.opts.OnLineError, &LineError{Input: im.inputs[input].Name, Line: num, Bytes: b, Sent: sent, Err: err})
}

// report hands e to fn, without its bytes unless they were asked for.
func (im *Import) report(fn func(*LineError), e *LineError) {
	if fn == nil {
		return
	}
	if !im.opts.KeepLines {
		e.Bytes = nil
	}
	fn(e)
}

// ErrAbandoned is why lines queued when Abandon was called were not sent.
var ErrAbandoned = errors.New("the run was abandoned")

// unsentCause is why the lines of a batch that ended with err were not
// delivered once the run was abandoned or stopped.
func (im *Import) unsentCause(err error) error {
	if !errors.Is(err, analytics.ErrClosed) && !errors.Is(err, context.Canceled) {
		return err // the batch's own failure, the one that stopped the run
	}
	if f := im.fatal.Load(); f != nil {
		return *f
	}
	return ErrAbandoned
}

// stop ends the run for err, as Abandon does; the first err is the one
// Summary.Fatal reports. A client's OnBatch calls it, so it stops every
// client before its next request rather than when Run closes them:
// against a fast API that is hundreds of requests later.
func (im *Import) stop(err error) {
	im.fatal.CompareAndSwap(nil, &err)
	im.abandon()
	im.stopReading() // now, not when AfterFunc gets to it
	for _, c := range *im.clients.Load() {
		c.Abandon()
	}
}

// readError reports input i unread from line (0: not opened on), after seq
// lines of the whole import: no line past seq counts as settled, so a
// resume does not skip what was never read.
func (im *Import) readError(i int, line, seq int64, err error) {
	if cause := errors.Unwrap(err); cause != nil { // drop the name the reader or os put in
		err = cause
	}
	minStore(&im.firstUnread, seq+1)
	im.readErrors.Add(1)
	err = &ReadError{Input: im.inputs[i].Name, Line: line, Err: err}
	if im.opts.OnReadError != nil {
		im.opts.OnReadError(err)
	}
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
