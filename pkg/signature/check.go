package signature

import (
	"bytes"
	"crypto/hmac"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"time"
)

// Reason is a stable code for a verdict.
type Reason string

const (
	ReasonOK              Reason = "ok"
	ReasonMissing         Reason = "missing"          // no signature header
	ReasonMalformed       Reason = "malformed"        // a header that does not parse
	ReasonMismatch        Reason = "mismatch"         // wrong secret or changed bytes
	ReasonTrailingNewline Reason = "trailing_newline" // the body gained a final newline
	ReasonExpired         Reason = "expired"          // valid, but signed too long ago
	ReasonFuture          Reason = "future"           // valid, but signed too far ahead
	ReasonScheme          Reason = "scheme"           // signed with another scheme
	ReasonEncoding        Reason = "encoding"         // hex where base64 is expected, or the reverse
)

// Options are how a Check judges a signature.
type Options struct {
	// Secrets are tried in order; any one that matches makes the
	// signature valid (key rotation).
	Secrets [][]byte
	// Tolerance is how old a signed timestamp may be at Now (for Standard
	// Webhooks, also how far ahead): 0 means DefaultTolerance, a negative
	// value no limit.
	Tolerance time.Duration
	// Now is the time timestamps are judged at; zero means time.Now().
	// A recorded request is judged at the time it was received.
	Now time.Time
}

// Result is a Check's verdict.
type Result struct {
	Scheme Scheme `json:"scheme"`
	Valid  bool   `json:"valid"`
	Reason Reason `json:"reason"`
	// Secret is the position (from 1) of the secret that matched, of
	// Secrets tried; never the value.
	Secret  int `json:"secret,omitempty"`
	Secrets int `json:"secrets"`
	// Timestamp (Unix seconds) and ID are what the request signed, when
	// its scheme signs them; Skew is Now minus Timestamp.
	Timestamp int64         `json:"timestamp,omitempty"`
	ID        string        `json:"id,omitempty"`
	Skew      time.Duration `json:"-"`
	Tolerance time.Duration `json:"-"`
	// Other is the scheme the request was signed with (ReasonScheme).
	Other Scheme `json:"other_scheme,omitempty"`
	// Detail says what is malformed or missing.
	Detail string `json:"detail,omitempty"`
	// Found is the encoding found (ReasonEncoding), and WouldMatch whether
	// the signature matches when read that way.
	Found      string `json:"found_encoding,omitempty"`
	WouldMatch bool   `json:"would_match,omitempty"`
	Bytes      int64  `json:"bytes"`
	// MAC is the signature that matched (nil when none did): fixed-size
	// bytes, e.g. for a receiver to remember what it has seen.
	MAC []byte `json:"-"`
}

// Check verifies a request's signature while its body streams through
// it: build it from the headers with NewCheck, write the body, then call
// Result. It costs one MAC pass per secret and scheme, in constant memory,
// and still tells a body that gained a final newline from one that
// changed otherwise: the last two bytes are held back and the MAC states
// cloned at the end.
type Check struct {
	cands []*candidate
	tail  []byte
	n     int64
	now   time.Time
	tol   time.Duration
	nsec  int
}

// candidate is one scheme a Check judges.
type candidate struct {
	sp    *spec
	early *Result // a verdict reached from the headers alone
	sigs  [][]byte
	// found is the encoding the signatures were read in: the other one
	// than the scheme's means ReasonEncoding.
	found encoding
	ts    int64
	id    string
	macs  []hash.Hash // one per secret, fed the signed prefix
}

// NewCheck prepares to verify a request with headers h under scheme s
// (Auto: each scheme h carries, the first to verify wins). It fails only
// on options that cannot work: no secret, an unknown scheme or a secret
// the scheme cannot use.
func NewCheck(s Scheme, h http.Header, opts Options) (*Check, error) {
	if len(opts.Secrets) == 0 {
		return nil, ErrNoSecret
	}
	c := &Check{tail: make([]byte, 0, 2), now: opts.Now, tol: opts.Tolerance, nsec: len(opts.Secrets)}
	if c.now.IsZero() {
		c.now = time.Now()
	}
	if c.tol == 0 {
		c.tol = DefaultTolerance
	}
	var schemes []Scheme
	switch {
	case s == Auto:
		schemes = Detect(h)
		if len(schemes) == 0 {
			c.cands = []*candidate{{sp: &spec{scheme: Auto}, early: &Result{Scheme: Auto, Reason: ReasonMissing, Detail: "no signature header of any known scheme"}}}
			return c, nil
		}
	case specs[s] == nil:
		return nil, fmt.Errorf("cannot verify with scheme %q", s)
	default:
		schemes = []Scheme{s}
		for _, secret := range opts.Secrets {
			if _, err := Key(s, secret); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range schemes {
		cand := parse(specs[s], h)
		if cand.early == nil {
			cand.keyed(opts.Secrets)
		}
		c.cands = append(c.cands, cand)
	}
	return c, nil
}

// keyed makes a MAC per secret, fed the signed prefix. A secret the
// scheme cannot use (only Auto lets one through: a Standard Webhooks key
// must be base64) gets none, keeping the others' positions.
func (cand *candidate) keyed(secrets [][]byte) {
	prefix := cand.sp.signedPrefix(cand.ts, cand.id)
	usable := 0
	for _, secret := range secrets {
		key, err := Key(cand.sp.scheme, secret)
		if err != nil {
			cand.macs = append(cand.macs, nil)
			continue
		}
		m := hmac.New(cand.sp.hash, key)
		m.Write(prefix)
		cand.macs = append(cand.macs, m)
		usable++
	}
	if usable == 0 {
		cand.early = &Result{Scheme: cand.sp.scheme, Reason: ReasonMismatch,
			Detail: "no secret given is a " + string(cand.sp.scheme) + " secret: " + keyForm}
	}
}

// Write feeds body bytes; it never fails.
func (c *Check) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if len(c.tail)+len(p) <= 2 {
		c.tail = append(c.tail, p...)
		return len(p), nil
	}
	// Everything but the last two bytes of tail+p goes into the MACs.
	if len(p) >= 2 {
		c.feed(c.tail)
		c.feed(p[:len(p)-2])
		c.tail = append(c.tail[:0], p[len(p)-2:]...)
		return len(p), nil
	}
	keep := append(c.tail, p...) // 3 bytes at most
	c.feed(keep[:len(keep)-2])
	c.tail = append(c.tail[:0], keep[len(keep)-2:]...)
	return len(p), nil
}

func (c *Check) feed(p []byte) {
	if len(p) == 0 {
		return
	}
	for _, cand := range c.cands {
		for _, m := range cand.macs {
			if m != nil {
				m.Write(p)
			}
		}
	}
}

// Result is the verdict on everything written.
func (c *Check) Result() Result {
	var first Result
	for i, cand := range c.cands {
		r := c.judge(cand)
		r.Secrets, r.Bytes, r.Tolerance = c.nsec, c.n, c.tol
		if r.Valid {
			return r
		}
		if i == 0 {
			first = r
		}
	}
	return first
}

func (c *Check) judge(cand *candidate) Result {
	if cand.early != nil {
		return *cand.early
	}
	r := Result{Scheme: cand.sp.scheme, Timestamp: cand.ts, ID: cand.id}
	secret, mac := c.match(cand, c.tail)
	if cand.found != cand.sp.enc {
		r.Reason, r.Found, r.WouldMatch = ReasonEncoding, cand.found.String(), secret > 0
		return r
	}
	if secret == 0 {
		r.Reason = ReasonMismatch
		if trimmed, ok := trimNewline(c.tail); ok {
			if n, _ := c.match(cand, trimmed); n > 0 {
				r.Reason = ReasonTrailingNewline
			}
		}
		return r
	}
	r.Secret, r.MAC = secret, mac
	if cand.sp.stamped && c.tol > 0 {
		// In whole seconds: a timestamp centuries away must not overflow
		// a Duration (both sides are within MaxTimestamp).
		skew, tol := c.now.Unix()-cand.ts, int64(c.tol/time.Second)
		r.Skew = time.Duration(max(min(skew, 1<<33), -1<<33)) * time.Second
		switch {
		case skew > tol:
			r.Reason = ReasonExpired
			return r
		case -skew > tol && cand.sp.future:
			r.Reason = ReasonFuture
			return r
		}
	}
	r.Valid, r.Reason = true, ReasonOK
	return r
}

// match returns the position (from 1) of the first secret whose MAC,
// finished with tail, equals one of the signatures, and that MAC; 0 when
// none does.
func (c *Check) match(cand *candidate, tail []byte) (int, []byte) {
	for i, m := range cand.macs {
		if m == nil {
			continue
		}
		sum := finish(m, tail)
		for _, sig := range cand.sigs {
			if hmac.Equal(sum, sig) {
				return i + 1, sum
			}
		}
	}
	return 0, nil
}

// finish returns the MAC of what m has seen followed by tail, leaving m
// as it was so it can be finished again another way.
func finish(m hash.Hash, tail []byte) []byte {
	if cl, ok := m.(hash.Cloner); ok {
		if h, err := cl.Clone(); err == nil {
			h.Write(tail)
			return h.Sum(nil)
		}
	}
	panic("signature: the MAC cannot be cloned")
}

func trimNewline(b []byte) ([]byte, bool) {
	switch {
	case bytes.HasSuffix(b, []byte("\r\n")):
		return b[:len(b)-2], true
	case bytes.HasSuffix(b, []byte("\n")):
		return b[:len(b)-1], true
	}
	return nil, false
}

// VerifyFields checks body against header lines under scheme s.
func VerifyFields(s Scheme, h http.Header, body []byte, opts Options) (Result, error) {
	c, err := NewCheck(s, h, opts)
	if err != nil {
		return Result{}, err
	}
	c.Write(body)
	return c.Result(), nil
}

// Message explains the verdict in a sentence, without the scheme's name
// and never with a secret or an expected signature.
func (r Result) Message() string {
	sp := specs[r.Scheme]
	if sp == nil || (r.Reason == ReasonScheme && specs[r.Other] == nil) {
		// A Result not made by a Check of a known scheme: say what it has.
		if r.Detail != "" {
			return r.Detail
		}
		return "signature " + string(r.Reason)
	}
	switch r.Reason {
	case ReasonOK:
		return "signature valid (" + plural(r.Bytes, "byte") + r.secretNote() + ")"
	case ReasonMissing:
		if r.Detail != "" {
			return r.Detail
		}
		return "the request has no " + sp.header + " header"
	case ReasonMalformed:
		return r.Detail
	case ReasonScheme:
		return fmt.Sprintf("the request is signed with the %s scheme (%s), not %s (%s)", r.Other, specs[r.Other].header, r.Scheme, sp.header)
	case ReasonEncoding:
		then := "read that way it does not match either"
		if r.WouldMatch {
			then = "read that way it matches: the sender encodes it wrong"
		}
		return fmt.Sprintf("the signature is %s where the %s scheme sends %s (%s)", r.Found, r.Scheme, sp.enc, then)
	case ReasonTrailingNewline:
		return "body differs: it ends with a newline the signed body did not have (without it, the signature verifies)"
	case ReasonExpired:
		return fmt.Sprintf("signature valid, but signed %s, over the %s tolerance (a replay, or clocks apart)", Ago(r.Skew), r.Tolerance)
	case ReasonFuture:
		return fmt.Sprintf("signature valid, but its timestamp is %s, over the %s tolerance (clocks apart)", Ago(r.Skew), r.Tolerance)
	}
	if r.Detail != "" {
		return r.Detail
	}
	what := fmt.Sprintf("the %d-byte body", r.Bytes)
	if sp.stamped {
		what += ", the timestamp"
		if sp.idHeader != "" {
			what += " or the id"
		}
	}
	secret := "the secret is wrong"
	if r.Secrets > 1 {
		secret = fmt.Sprintf("none of the %d secrets is the one", r.Secrets)
	}
	return fmt.Sprintf("signature does not match: %s or %s is not the one that was signed", secret, what)
}

func (r Result) secretNote() string {
	if r.Secrets <= 1 {
		return ""
	}
	return fmt.Sprintf(", secret %d of %d", r.Secret, r.Secrets)
}

func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.FormatInt(n, 10) + " " + unit + "s"
}
