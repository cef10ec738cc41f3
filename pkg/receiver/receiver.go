// Package receiver is a webhook receiver: an http.Handler that reads each
// request's raw body, verifies its signature (any scheme pkg/signature
// knows), checks it against the webhook message shapes, flags redelivered
// messageIds and replayed signatures, decides the
// answer (optionally simulating failures or relaying to another app),
// records it, and reports it as a Request value. Server serves it on its
// ports until told to stop. `evfwd listen` is a thin command around both;
// they are usable on their own in tests and programs.
//
// How a request is answered, first rule that applies:
//   - a path other than Options.Path: 404 (nothing else is checked);
//   - a body over MaxBodyBytes: 413; one that stops arriving until the
//     server's read deadline passes: 408; one cut short otherwise: 400.
//     The connection is closed after these, and the report (and its
//     record) carries none of the body: Size says how much arrived;
//   - a signature that is not valid when a secret is set (missing,
//     malformed, not matching, outside the tolerance...): 401, unless
//     AcceptInvalid;
//   - a FailRate roll: FailStatus; then Respond's next code or Status;
//   - ForwardTo: the app's response (502 when it cannot be reached);
//   - otherwise 200.
//
// A body that is not a well-formed webhook message is answered as any
// other and only flagged (Request.Shape): the receiver shows a sender's
// mistakes, it does not hide them behind a 400 the sender may retry.
// A replay (Request.Replay) is likewise answered as any other: a sender's
// retry is one, under every scheme but Stripe's and Slack's, which sign a
// fresh timestamp each time.
package receiver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// DefaultMaxBodyBytes bounds a request body: far above the 32 KB message
// limit, so a sender's oversized message is still seen, not just refused.
const DefaultMaxBodyBytes = 5 << 20

// DefaultForwardTimeout is how long the default ForwardTo client waits for
// the app, from connecting to the last byte of its answer.
const DefaultForwardTimeout = 30 * time.Second

// Options configures a Handler. The zero value answers 200 to every
// request on any path and checks no signature.
type Options struct {
	// Secrets, when any is given, make the Handler verify each request's
	// signature and answer 401 to one that is not valid. Any of them may
	// match (a sender rotating its secret); the report says which.
	Secrets [][]byte
	// Scheme is how requests are signed (default signature.Auto: whichever
	// scheme a request's headers carry). A scheme other than Auto must be
	// able to use every secret (Standard Webhooks wants whsec_ base64).
	Scheme signature.Scheme
	// Tolerance is how old a signed timestamp may be at the request's
	// arrival (for Standard Webhooks, also how far ahead, as its owner
	// judges): 0 means signature.DefaultTolerance, a negative
	// value no limit.
	Tolerance time.Duration
	// AcceptInvalid answers such requests normally; the verdict is still
	// reported.
	AcceptInvalid bool
	// Path, when set, is the only path served; others get 404.
	Path string
	// Simulate injects failures for testing senders.
	Simulate Simulation
	// ForwardTo relays each accepted request to this URL (method, headers
	// and body unchanged) and answers with the app's response.
	ForwardTo string
	// Client sends relayed requests; the default gives up after
	// DefaultForwardTimeout.
	Client *http.Client
	// Record, when set, receives one NDJSON record line per request
	// (see Record). The Handler batches writes; Close flushes them.
	Record io.Writer
	// OnRequest, when set, is called with each request's report after the
	// answer is written, on the request's goroutine.
	OnRequest func(*Request)
	// DedupWindow is how many recent messageIds, and how many recent
	// signatures (for Request.Replay), are remembered (default
	// DefaultDedupWindow).
	DedupWindow int
	// MaxBodyBytes bounds a body (default DefaultMaxBodyBytes); a larger
	// one is answered 413 and its connection closed.
	//
	// How long a body may take to arrive is the server's to bound
	// (http.Server.ReadTimeout, which Handler.Server sets): the Handler
	// answers a body whose read deadline passed 408.
	MaxBodyBytes int64
	// Now is the clock (default time.Now); tests inject one.
	Now func() time.Time
	// RedactHeaders names headers (any case) whose values are replaced
	// with Redacted in the report handed to OnRequest and in the record,
	// so that they are kept nowhere. The signature is checked, and a
	// ForwardTo request relayed, with the values that came.
	RedactHeaders []string
}

// Redacted stands for the value of a header named in
// Options.RedactHeaders.
const Redacted = "[redacted]"

// Handler is the receiver; build it with New and Close it when done.
type Handler struct {
	opts    Options
	now     func() time.Time
	sim     *simulator
	dedup   *dedup[string]
	replays *dedup[replayKey]
	record  *LineWriter
	forward *url.URL
	client  *http.Client
	secrets [][]byte
	scheme  signature.Scheme
	macs    []*signature.Keyed // per secret, segment's keyed MAC (fastSegment)
	redact  []string           // Options.RedactHeaders, canonical
	tap     func(*Request)     // after OnRequest: what Server.Serve adds (its UI, Count)
}

// ErrConfig is matched by every configuration error from New.
var ErrConfig = errors.New("receiver: invalid options")

type configError struct{ field, reason string }

func (e *configError) Error() string   { return "receiver: " + e.field + ": " + e.reason }
func (e *configError) Is(t error) bool { return t == ErrConfig }

// New checks opts and returns a Handler.
func New(opts Options) (*Handler, error) {
	h := &Handler{opts: opts, now: opts.Now}
	if err := h.setSecrets(); err != nil {
		return nil, err
	}
	if h.now == nil {
		h.now = time.Now
	}
	sim, err := newSimulator(opts.Simulate)
	if err != nil {
		return nil, err
	}
	h.sim = sim
	if opts.ForwardTo != "" {
		if sim.setsStatus() {
			return nil, &configError{"ForwardTo", "cannot be combined with a simulated status or response sequence"}
		}
		u, err := url.Parse(opts.ForwardTo)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, &configError{"ForwardTo", fmt.Sprintf("%q is not an http(s) URL", webhook.RedactURL(opts.ForwardTo))} // never its credentials
		}
		h.forward = u
		h.client = opts.Client
		if h.client == nil {
			h.client = &http.Client{
				Timeout: DefaultForwardTimeout,
				// Relay the app's answer as is, redirects included.
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}
		}
	}
	if opts.DedupWindow < 0 {
		return nil, &configError{"DedupWindow", "must not be negative"}
	}
	if opts.DedupWindow == 0 {
		opts.DedupWindow = DefaultDedupWindow
	}
	h.dedup = newDedup[string](opts.DedupWindow)
	h.replays = newDedup[replayKey](opts.DedupWindow)
	if opts.MaxBodyBytes <= 0 {
		h.opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Path != "" && opts.Path[0] != '/' {
		h.opts.Path = "/" + opts.Path
	}
	if opts.Record != nil {
		h.record = NewLineWriter(opts.Record)
	}
	for _, name := range opts.RedactHeaders {
		if name = strings.TrimSpace(name); name == "" || strings.ContainsAny(name, " \t:") {
			return nil, &configError{"RedactHeaders", fmt.Sprintf("%q is not a header name", name)}
		}
		h.redact = append(h.redact, http.CanonicalHeaderKey(name))
	}
	return h, nil
}

// Close writes out every recorded request. Call it after the server has
// stopped calling the Handler (http.Server.Shutdown returned).
func (h *Handler) Close() error {
	if h.record == nil {
		return nil
	}
	return h.record.Close()
}

// Flush waits until every request recorded so far has been written.
func (h *Handler) Flush() error {
	if h.record == nil {
		return nil
	}
	return h.record.Flush()
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := &Request{
		ReceivedAt: h.now(),
		Method:     r.Method,
		Path:       r.URL.Path,
		Query:      r.URL.RawQuery,
		Header:     r.Header,
	}
	if h.opts.Path != "" && r.URL.Path != h.opts.Path {
		req.Refused = RefusedPath
		req.Signature = Signature{Verdict: SigUnchecked}
		req.Shape = Shape{Reason: "not checked"}
		h.answer(w, req, http.StatusNotFound, "no webhook here; listening on "+h.opts.Path)
		return
	}
	body, err := readBody(r, h.opts.MaxBodyBytes)
	req.Size = len(body)
	if err != nil {
		// Part of a body is not a body: its signature cannot verify and
		// a record of it would pass for the real thing.
		status := http.StatusBadRequest
		switch {
		case errors.Is(err, errTooLarge):
			status = http.StatusRequestEntityTooLarge
		case errors.Is(err, errBodyTimeout):
			status = http.StatusRequestTimeout
		}
		req.Shape = Shape{Reason: err.Error()}
		req.Refused = RefusedBody
		req.Signature = Signature{Verdict: SigUnchecked}
		refuseRest(w)
		h.answer(w, req, status, err.Error())
		return
	}
	req.Body = body
	h.inspect(req)

	if req.Signature.Verdict == SigInvalid && !h.opts.AcceptInvalid {
		req.Refused = RefusedSignature
		h.answer(w, req, http.StatusUnauthorized, "invalid signature ("+string(req.Signature.Reason)+"): "+req.Signature.Message)
		return
	}
	status, delay := h.sim.next()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	if status == 0 && h.forward != nil {
		h.relay(w, r, req)
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	h.answer(w, req, status, "")
}

// inspect fills the verdicts and the fields read from the body.
func (h *Handler) inspect(req *Request) {
	req.Signature, req.Replay = h.verify(req.Header, req.Body, req.ReceivedAt)
	o, err := rawjson.ParseObject(req.Body)
	if err != nil {
		if n, err := checkBatch(req.Body); n > 0 {
			// A batching destination's body: its messages' shapes.
			req.Batch, req.Shape = n, Shape{OK: err == nil}
			if err != nil {
				req.Shape.Reason = err.Error()
			}
			return
		}
		req.Shape = Shape{Reason: parseShapeErr(req.Body).Error()}
		req.bodyJSON = jsonNo
		return
	}
	req.bodyJSON = jsonYes
	if err := checkObject(o); err != nil {
		req.Shape = Shape{Reason: err.Error()}
	} else {
		req.Shape = Shape{OK: true}
	}
	req.Type, _ = o.GetString("type")
	switch message.Type(req.Type) {
	case message.TypeTrack:
		req.Event, _ = o.GetString("event")
	case message.TypePage, message.TypeScreen:
		req.Event, _ = o.GetString("name")
	}
	if req.Type == string(message.TypeAlias) {
		req.UserID, _ = o.GetString("User ID")
	} else if id, ok := o.GetString("userId"); ok {
		req.UserID = id
	} else {
		req.UserID, _ = o.GetString("anonymousId")
	}
	if id, ok := o.GetString("messageId"); ok && id != "" {
		req.MessageID = id
		req.Duplicate = h.dedup.check(id)
	}
}

// Why a request was refused (Request.Refused).
const (
	RefusedPath      = "path"      // not the --path served: 404
	RefusedBody      = "body"      // too large (413) or unreadable (400)
	RefusedSignature = "signature" // invalid signature: 401
)

var (
	errTooLarge    = errors.New("body too large")
	errBodyTimeout = errors.New("body timed out")
)

// refuseRest makes the server drop the rest of a refused body and close
// the connection once the answer is out. Left alone, net/http reads up to
// 256 KB more of the body, before answering and again after, however
// slowly it comes: a read deadline already past ends that. And only a
// body found over a MaxBytesReader's limit makes it close gently (half
// close, then a pause for the sender to read the answer, which a reset
// could otherwise discard); one byte over a limit of 0 says so.
func refuseRest(w http.ResponseWriter) {
	http.NewResponseController(w).SetReadDeadline(time.Now())
	var one [1]byte
	http.MaxBytesReader(w, io.NopCloser(strings.NewReader("x")), 0).Read(one[:])
}

// bodyAhead is the most readBody allocates ahead of the bytes that have
// arrived. A Content-Length is a promise, not bytes: 200 senders that
// promise 5 MB and stall must not cost 1 GB. Every webhook message (32 KB
// at most) still gets one allocation of its exact size. A chunked body,
// whose size is not announced, starts at chunkedStart.
const (
	bodyAhead    = 32 << 10
	chunkedStart = 1 << 10
)

// readBody reads the whole body, at most limit bytes. On an error it
// returns what arrived, for its length.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	cl := r.ContentLength
	if cl > limit {
		return nil, fmt.Errorf("%w: Content-Length %d is over the %d-byte limit", errTooLarge, cl, limit)
	}
	want, ahead := cl, int64(bodyAhead) // read exactly want, or up to EOF when unknown
	if want < 0 {
		want, ahead = limit+1, chunkedStart
	}
	b := make([]byte, 0, min(want, ahead))
	for int64(len(b)) < want {
		if len(b) == cap(b) {
			// Double, within what may still come.
			b = slices.Grow(b, int(min(int64(len(b)), want-int64(len(b)))))
		}
		n, err := r.Body.Read(b[len(b):min(int64(cap(b)), want)])
		b = b[:len(b)+n]
		if err == io.EOF {
			if cl < 0 || int64(len(b)) == want {
				break
			}
			err = io.ErrUnexpectedEOF // net/http says so itself; another caller's body may not
		}
		if err != nil {
			arrived := strconv.Itoa(len(b))
			if cl >= 0 {
				arrived += " of " + strconv.FormatInt(cl, 10)
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return b, fmt.Errorf("%w: %s bytes arrived", errBodyTimeout, arrived)
			}
			return b, fmt.Errorf("reading body: %w (%s bytes arrived)", err, arrived)
		}
	}
	if int64(len(b)) > limit {
		return b, fmt.Errorf("%w: over the %d-byte limit", errTooLarge, limit)
	}
	return b, nil
}

// answer writes a plain-text answer and finishes the report.
func (h *Handler) answer(w http.ResponseWriter, req *Request, status int, text string) {
	hdr := w.Header()
	hdr["Content-Type"] = textPlain
	if text == "" {
		a := cannedAnswer(status)
		hdr["Content-Length"] = a.length
		w.WriteHeader(status)
		w.Write(a.body)
	} else {
		hdr["Content-Length"] = []string{strconv.Itoa(len(text) + 1)}
		w.WriteHeader(status)
		io.WriteString(w, text+"\n")
	}
	h.finish(req, status)
}

var textPlain = []string{"text/plain; charset=utf-8"}

// canned is a status's plain answer, built once: every request gets one.
type canned struct {
	body   []byte
	length []string
}

var cannedAnswers sync.Map // int -> *canned

func cannedAnswer(status int) *canned {
	if a, ok := cannedAnswers.Load(status); ok {
		return a.(*canned)
	}
	text := http.StatusText(status)
	if text == "" {
		text = "Status " + strconv.Itoa(status)
	}
	a := &canned{body: []byte(text + "\n"), length: []string{strconv.Itoa(len(text) + 1)}}
	cannedAnswers.Store(status, a)
	return a
}

// finish completes the report, records it and hands it on.
func (h *Handler) finish(req *Request, status int) {
	req.Status = status
	req.Header = h.redacted(req.Header)
	req.Latency = h.now().Sub(req.ReceivedAt)
	if h.record != nil {
		h.record.WriteLine(req.Line())
	}
	if h.opts.OnRequest != nil {
		h.opts.OnRequest(req)
	}
	if h.tap != nil {
		h.tap(req)
	}
	req.releaseLine()
}

// redacted returns hdr with the values of the RedactHeaders replaced by
// Redacted: a copy when it has any of them (hdr is the request's, which
// the relay has sent as it came), else hdr itself.
func (h *Handler) redacted(hdr http.Header) http.Header {
	var out http.Header
	for _, name := range h.redact {
		if _, ok := hdr[name]; !ok {
			continue
		}
		if out == nil {
			out = hdr.Clone()
		}
		out[name] = []string{Redacted}
	}
	if out == nil {
		return hdr
	}
	return out
}
