package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/signature"
)

// DefaultTimeout is the deadline of one attempt, connect to last byte
// (spec 4.1: the receiver must answer within 5 seconds).
const DefaultTimeout = 5 * time.Second

// UserAgent returns the User-Agent the destination sends for an evfwd
// version, e.g. "evfwd-webhooks/1.2.0".
func UserAgent(version string) string {
	if version == "" {
		version = "dev"
	}
	return "evfwd-webhooks/" + version
}

// Options configure a Sender; the zero value is ready to use.
type Options struct {
	// UserAgent defaults to UserAgent("dev").
	UserAgent string
	// Timeout is the deadline of each attempt; DefaultTimeout when zero.
	Timeout time.Duration
	// RootCAs replaces the system roots when set (tests, embedders).
	RootCAs *x509.CertPool
	// CAFile names a PEM file whose certificates are trusted in addition to
	// RootCAs (or the system roots): for endpoints behind a private CA.
	// Certificates are always verified; there is no way to skip that.
	CAFile string
	// MaxConnsPerHost bounds connections to one host; 0 means no bound.
	MaxConnsPerHost int
	// Now is the clock for attempt start times; time.Now when nil.
	Now func() time.Time
	// AllowPrivateEndpoints lets the Sender call link-local addresses and
	// cloud metadata services (BlockedHost), which it otherwise refuses,
	// by URL and at each connection, whatever name led there: an attempt
	// that would reach one fails, final, as ClassBlocked. Loopback,
	// private and public addresses are called either way.
	AllowPrivateEndpoints bool
}

// Sender posts webhook bodies. It keeps connections alive across
// deliveries and is safe for concurrent use; make one per process.
type Sender struct {
	transport *http.Transport
	dialer    *net.Dialer
	userAgent []string // header values are slices; build them once
	timeout   time.Duration
	now       func() time.Time
	allowAll  bool // Options.AllowPrivateEndpoints

	urls sync.Map // endpoint URL string -> parsedURL, parsed once
	keys sync.Map // shared secret -> *signature.Keyed, keyed once
}

// idleConnsPerHost keeps enough idle connections for many concurrent
// deliveries to one host (the default of 2 would close and redial).
const idleConnsPerHost = 1024

// NewSender returns a Sender. It fails only when CAFile cannot be used.
func NewSender(opts Options) (*Sender, error) {
	roots := opts.RootCAs
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		if roots == nil {
			if roots, err = x509.SystemCertPool(); err != nil || roots == nil {
				roots = x509.NewCertPool()
			}
		} else {
			roots = roots.Clone()
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate found", opts.CAFile)
		}
	}
	s := &Sender{
		userAgent: []string{opts.UserAgent},
		timeout:   opts.Timeout,
		now:       opts.Now,
		allowAll:  opts.AllowPrivateEndpoints,
	}
	if s.userAgent[0] == "" {
		s.userAgent[0] = UserAgent("")
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.dialer = &net.Dialer{KeepAlive: 30 * time.Second}
	if !s.allowAll {
		// After DNS, before connecting: a name rebound to 169.254.169.254
		// is refused as its literal is. Redirects are not followed
		// (RoundTrip), so every connection is one of an endpoint's.
		s.dialer.ControlContext = refuseBlocked
	}
	s.transport = &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         s.dialer.DialContext,
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        0, // no global bound; per host below
		MaxIdleConnsPerHost: idleConnsPerHost,
		MaxConnsPerHost:     opts.MaxConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		// The header set is fixed by DESIGN §4: no Accept-Encoding.
		DisableCompression: true,
	}
	return s, nil
}

// Timeout is the per-attempt deadline in use.
func (s *Sender) Timeout() time.Duration { return s.timeout }

// CloseIdleConnections closes kept-alive connections not in use.
func (s *Sender) CloseIdleConnections() { s.transport.CloseIdleConnections() }

// Deliver posts body to dest's endpoints in order until one answers 2xx,
// and returns a record of every attempt. body must be the exact bytes to
// send (see Body); X-Signature is computed once, when dest has a shared
// secret; what signs a timestamp (Endpoint.Signing, another
// Destination.Scheme) is signed at each attempt, with its start time.
// dest is assumed valid (Validate); an unusable URL fails its attempt.
func (s *Sender) Deliver(ctx context.Context, dest *Destination, body []byte) Result {
	return s.deliver(ctx, dest, body, "", 1, nil, nil)
}

// DeliverFunc is Deliver that calls onAttempt after each attempt, as it
// happens, so a caller can show progress.
func (s *Sender) DeliverFunc(ctx context.Context, dest *Destination, body []byte, onAttempt func(Attempt)) Result {
	return s.deliver(ctx, dest, body, "", 1, nil, onAttempt)
}

// DeliverMessage is DeliverFunc for a message with an id, its messageId:
// the webhook-id of the Standard Webhooks headers (Endpoint.Signing,
// Destination.Scheme), the same at every attempt and every URL so that a
// receiver can drop what it already has. Deliver and DeliverFunc make a
// fresh one per delivery. An id that is not printable ASCII without
// spaces is sent as a digest of it, stable too.
func (s *Sender) DeliverMessage(ctx context.Context, dest *Destination, body []byte, id string, onAttempt func(Attempt)) Result {
	return s.deliver(ctx, dest, body, id, 1, nil, onAttempt)
}

// deliver makes one delivery. decide, when set, fills in Then/RetryAt of
// the last attempt of a failed delivery before it is reported.
func (s *Sender) deliver(ctx context.Context, dest *Destination, body []byte, id string, delivery int, decide func(*Result), onAttempt func(Attempt)) Result {
	sig := s.xSignature(dest, body)
	ps := dest.perAttempt(id)
	res := Result{Attempts: make([]Attempt, 0, len(dest.Endpoints))}
	for i := range dest.Endpoints {
		a := s.post(ctx, dest.method(), &dest.Endpoints[i], i, body, sig, ps)
		a.Delivery = delivery
		res.Attempts = append(res.Attempts, a)
		last := &res.Attempts[len(res.Attempts)-1]
		more := i+1 < len(dest.Endpoints)
		switch {
		case a.Outcome == Delivered:
			last.Then = ThenDone
		case a.Outcome == Interrupted:
			last.Then = ThenStop
		case more:
			last.Then = ThenNextURL
		}
		if last.Then != ThenNextURL {
			res.Outcome, res.RetryAfter = aggregate(res.Attempts)
			if last.Then == ThenUndecided && decide != nil {
				decide(&res)
			}
		}
		if onAttempt != nil {
			onAttempt(*last)
		}
		if last.Then != ThenNextURL {
			break
		}
	}
	return res
}

// post makes one attempt.
func (s *Sender) post(ctx context.Context, method string, ep *Endpoint, index int, body []byte, sig []string, ps *perAttempt) Attempt {
	pu, err := s.parse(ep.URL)
	a := Attempt{Endpoint: index, URL: ep.Name, Start: s.now()}
	if a.URL == "" {
		a.URL = pu.display
	}
	start := time.Now() // monotonic, for latency, whatever the injected clock says
	u := pu.u
	if err != nil {
		a.Class, a.Err, a.Outcome = ClassNetwork, err, Final
		if errors.Is(err, ErrBlockedAddress) {
			a.Class = ClassBlocked
		}
		return a
	}

	h, err := s.header(ep, body, sig, ps, a.Start)
	if err != nil {
		a.Class, a.Err, a.Outcome = ClassNetwork, err, Final
		return a
	}
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// A *bytes.Reader (under io.NopCloser) is one net/http knows is in
	// memory: it writes the headers and the body with one write, where a
	// reader of its own makes it flush the headers first, a second
	// syscall and a second TCP segment per webhook.
	getBody := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	rb, _ := getBody()
	req := (&http.Request{
		Method:        method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          rb,
		GetBody:       getBody,
		ContentLength: int64(len(body)),
		Host:          u.Host,
	}).WithContext(actx)

	resp, err := s.transport.RoundTrip(req)
	if err != nil {
		a.Latency = time.Since(start)
		a.Class, a.Outcome, a.Err = classifyError(ctx, actx, err, s.timeout)
		return a
	}
	a.Status = resp.StatusCode
	a.Body, err = readExcerpt(resp.Body)
	resp.Body.Close()
	a.Latency = time.Since(start)
	a.Class, a.Outcome = classifyStatus(resp.StatusCode)
	if err != nil && a.Outcome == Delivered {
		// The answer was 2xx; a body cut short does not undo that, but a
		// deadline hit while reading means the endpoint was too slow.
		if actx.Err() != nil {
			a.Class, a.Outcome, a.Err = classifyError(ctx, actx, err, s.timeout)
		}
	}
	if a.Status == http.StatusTooManyRequests || a.Status == http.StatusServiceUnavailable {
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), s.now()); ok {
			a.RetryAfter = d
		}
	}
	return a
}

// xSignature is the X-Signature of body, computed once per delivery, or
// nil when dest signs none.
func (s *Sender) xSignature(dest *Destination, body []byte) []string {
	if dest.SharedSecret == "" || !dest.segment() {
		return nil
	}
	return []string{s.key(dest.SharedSecret).Sign(body)}
}

// header is the header set of one attempt to ep, started at: the
// endpoint's static headers, User-Agent, Content-Type, the X-Signature sig
// (nil: none) and what ps signs per attempt. Preview shows the same.
func (s *Sender) header(ep *Endpoint, body []byte, sig []string, ps *perAttempt, at time.Time) (http.Header, error) {
	// One backing array for every header value: a map entry per header
	// is unavoidable, a slice allocation per header is not.
	h := make(http.Header, len(ep.Headers)+3)
	vals := make([]string, 0, len(ep.Headers))
	for k, v := range ep.Headers {
		vals = append(vals, v)
		h[http.CanonicalHeaderKey(k)] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	h["User-Agent"] = s.userAgent
	h["Content-Type"] = contentTypeJSON
	if sig != nil {
		h[signature.Header] = sig
	}
	if ps != nil {
		if err := ps.sign(h, ep, body, at); err != nil {
			return nil, err
		}
	}
	return h, nil
}

var contentTypeJSON = []string{"application/json"}

// key returns the signature.Keyed of a shared secret, cached: making one
// per webhook was a tenth of what signing cost.
func (s *Sender) key(secret string) *signature.Keyed {
	if k, ok := s.keys.Load(secret); ok {
		return k.(*signature.Keyed)
	}
	k, _ := s.keys.LoadOrStore(secret, signature.NewKeyed([]byte(secret)))
	return k.(*signature.Keyed)
}

// parsedURL is an endpoint URL parsed, and how it is shown (RedactURL).
type parsedURL struct {
	u       *url.URL
	display string
}

// parse returns the parsed URL and its display, cached: endpoints repeat
// across deliveries and parsing showed up in profiles. The display is set
// even when the URL is refused.
func (s *Sender) parse(raw string) (parsedURL, error) {
	if p, ok := s.urls.Load(raw); ok {
		return p.(parsedURL), nil
	}
	p := parsedURL{display: RedactURL(raw)}
	if err := checkURL(raw); err != nil {
		return p, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return p, err
	}
	if !s.allowAll {
		// Through a proxy the dial check sees the proxy: the URL's own
		// host is checked here too.
		if why := BlockedHost(u.Hostname()); why != "" {
			return p, &BlockedError{Host: u.Hostname(), Reason: why}
		}
	}
	p.u = u
	s.urls.Store(raw, p)
	return p, nil
}

// drainLimit is how much of a long answer is read past the excerpt so the
// connection can be reused; longer answers cost a new connection instead.
const drainLimit = 64 << 10

var excerptPool = sync.Pool{New: func() any { b := make([]byte, ExcerptSize); return &b }}

// readExcerpt keeps the first ExcerptSize bytes and drains the rest.
func readExcerpt(r io.Reader) ([]byte, error) {
	bp := excerptPool.Get().(*[]byte)
	defer excerptPool.Put(bp)
	buf := *bp
	n, err := io.ReadFull(r, buf)
	var out []byte
	if n > 0 {
		out = bytes.Clone(buf[:n])
	}
	switch err {
	case io.EOF, io.ErrUnexpectedEOF:
		return out, nil
	case nil:
		_, err = io.CopyN(io.Discard, r, drainLimit)
		if err == io.EOF {
			err = nil
		}
	}
	return out, err
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return message.FormatTime(t)
}

// errTimeout replaces the context's "deadline exceeded" in records.
var errTimeout = errors.New("no complete answer within the deadline")
