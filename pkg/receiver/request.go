package receiver

import (
	"net/http"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/signature"
)

// SigVerdict is the outcome of checking a request's signature.
type SigVerdict string

const (
	// SigUnchecked: nothing was checked: no secret is configured, or the
	// request was refused first (its path, or a body that did not arrive
	// whole).
	SigUnchecked SigVerdict = "unchecked"
	// SigValid: the signature matches the body under a secret, within
	// the tolerance.
	SigValid SigVerdict = "valid"
	// SigInvalid: anything else; Reason says what.
	SigInvalid SigVerdict = "invalid"
)

// Signature is the verdict on a request's signature: the scheme judged
// (auto when the request carried none known), a stable reason code
// (signature.Reason: ok, missing, malformed, mismatch, trailing_newline,
// expired, future, scheme, encoding), the position (from 1) of the secret
// that matched when several were given, and, when invalid, a sentence
// for people saying why. The expected value and the secrets are never
// carried. All but Verdict are empty when unchecked.
type Signature struct {
	Verdict SigVerdict       `json:"verdict"`
	Scheme  signature.Scheme `json:"scheme,omitempty"`
	Reason  signature.Reason `json:"reason,omitempty"`
	Secret  int              `json:"secret,omitempty"`
	Message string           `json:"message,omitempty"`
}

// Shape is the verdict of CheckShape on the body.
type Shape struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Forwarded is what came back from the app a request was relayed to.
type Forwarded struct {
	URL     string
	Status  int // 0 when Error is set
	Header  http.Header
	Body    []byte // at most 1 MB of the app's answer
	Latency time.Duration
	Error   string
}

// Request reports one request the Handler answered. A Request handed to
// Options.OnRequest is the caller's to keep.
type Request struct {
	ReceivedAt time.Time
	Method     string
	Path       string
	Query      string // raw query, without '?'
	Header     http.Header
	Body       []byte // nil when refused before it was read whole: never part of a body
	Size       int    // body bytes that arrived

	// From the body, when it is a JSON object; empty otherwise.
	Type      string
	Event     string // track's event, or page/screen name
	UserID    string // userId, alias's "User ID", else anonymousId
	MessageID string
	Batch     int // messages in the body when it is a JSON array of them (a batching destination's)

	Signature Signature
	Shape     Shape
	Duplicate bool // messageId seen among the recent ones
	// Replay: the same signed message was seen among the recent ones
	// (see Options.DedupWindow): the same webhook-id (Standard Webhooks),
	// timestamp and signature (Stripe, Slack), or signature, and so body
	// (segment, github, shopify). Only authentic requests count: ones whose
	// MAC matched, even outside the tolerance.
	Replay bool

	// Refused says why the request was turned away before the normal
	// answer ("path", "body", "signature"); empty when it was accepted.
	Refused string

	Status  int           // what the Handler answered
	Latency time.Duration // from the body read to the answer decided
	Forward *Forwarded    // nil unless relayed

	line     []byte    // encoded record, cached between the sinks
	pooled   bool      // line came from linePool
	bodyJSON jsonState // whether Body is known to be valid JSON
}

type jsonState uint8

const (
	jsonUnknown jsonState = iota
	jsonYes
	jsonNo
)

// Line returns the request as one NDJSON record line (ending in '\n'),
// the form --record files and `-o json` hold. It is computed once.
//
// Within OnRequest the line is shared and must not be kept or changed;
// once OnRequest returns its buffer is reused, and a later Line encodes
// anew into a fresh one.
func (r *Request) Line() []byte {
	if r.line == nil {
		buf := linePool.Get().(*[]byte)
		r.line = r.AppendJSON((*buf)[:0])
		r.pooled = true
	}
	return r.line
}

// linePool recycles record buffers: each request needs one, briefly.
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// releaseLine returns a pooled line buffer once every sink has used it.
func (r *Request) releaseLine() {
	if r.pooled && cap(r.line) <= 64<<10 {
		b := r.line[:0]
		linePool.Put(&b)
	}
	r.line, r.pooled = nil, false
}
