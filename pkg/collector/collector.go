// Package collector is the collection API of `evfwd serve`: an http.Handler
// that speaks the Segment HTTP Tracking API (DESIGN §2) — /v1/batch,
// /v1/import and /v1/{identify,track,page,screen,group,alias}, and the
// short forms the web and mobile libraries post to, /v1/b and
// /v1/{i,t,p,s,g,a} — checks and completes each message, and answers 200
// only once the store has committed every message of the request. It also
// serves those libraries' settings document (settings.go) and answers
// browsers' CORS requests (cors.go).
package collector

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/store"
)

// RetryAfter is what a 429, and a 503 for a store that cannot be reached
// or is shutting down, asks the client to wait, in seconds.
const RetryAfter = 1

// Source is one configured source.
type Source struct {
	Name     string
	WriteKey string
	// Destinations are the destinations enabled for the source, by the
	// name the store keeps (store.DestinationWebhooks); a message gets a
	// delivery for each one its integrations also enable.
	Destinations []string
	// Route, when set, names the destinations that take a message with
	// this webhook body, of those its integrations enable (their
	// subscriptions decide: pkg/destination.Router). Every destination is
	// a webhook destination, turned off together by the integrations'
	// "Webhooks" (or "All") key.
	Route func(body []byte) []string
	// Kind says what sends the events (see Kind); "" is KindServer.
	Kind Kind
	// AllowedOrigins, when set, are the only origins a browser may post
	// from (exact, lower case; "*" any; CheckOrigin reads them).
	AllowedOrigins []string
}

// Ingester is the part of the store the collector needs.
type Ingester interface {
	Ingest(ctx context.Context, msgs []store.Message) error
}

// Config configures a Handler.
type Config struct {
	Sources []Source
	Store   Ingester
	// Now is the clock for receivedAt (default time.Now).
	Now func() time.Time
	// NewID makes a messageId for a message without one (default
	// message.NewID).
	NewID func() string
	// OnStored, when set, is called after each committed request with the
	// source and the messages stored (metrics, waking the forwarder).
	OnStored func(source string, msgs []store.Message)
	// OnError, when set, is told about every request refused with a 5xx
	// or a 429 (but for the 503s of a spent BodyBudget: the first of each
	// time it is spent), about the first refusal of each page origin a
	// source does not allow, and about each write key no source has, once
	// a minute per key (logging: a page's 403, 401 or 404 shows only in
	// its browser).
	OnError func(status int, err error)
	// TrustedProxies are the peers whose X-Forwarded-For is believed when
	// the address of a web or mobile client is added (see ClientAddr).
	TrustedProxies []netip.Prefix
	// PublicURL, when set, is where clients reach the service (behind a
	// proxy): the settings document points them there (see
	// ParsePublicURL).
	PublicURL string
	// IngestTimeout bounds a request's wait for the store to commit its
	// messages, after which it answers 503 with Retry-After (default
	// store.CallTimeout).
	IngestTimeout time.Duration
	// BodyBudget bounds the bytes that the bodies of all requests in
	// flight hold at once, from their first byte to the answer (see
	// budget.go); a request it has no room for is answered 503 with
	// Retry-After. Default DefaultBodyBudget; at least one gzipped batch
	// at MaxBatchBytes must fit.
	BodyBudget int64
}

// Handler serves the collection API.
type Handler struct {
	cfg      Config
	keys     keyIndex // sources by write key (keys.go)
	draining atomic.Bool
	mux      *http.ServeMux
	public   *url.URL // Config.PublicURL, parsed
	refused  reported[[2]string]
	unknown  reported[[sha256.Size]byte] // write keys no source has, by SHA-256
	budget   budget                      // Config.BodyBudget, the bodies in flight
}

// New checks cfg and returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("collector: no store")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = message.NewID
	}
	if cfg.IngestTimeout <= 0 {
		cfg.IngestTimeout = store.CallTimeout
	}
	if cfg.BodyBudget == 0 {
		cfg.BodyBudget = DefaultBodyBudget
	}
	if cfg.BodyBudget < minBodyBudget {
		return nil, fmt.Errorf("collector: body budget of %d bytes: at least %d are needed, for one gzipped batch at the limit", cfg.BodyBudget, minBodyBudget)
	}
	h := &Handler{cfg: cfg, keys: keyIndex{}, mux: http.NewServeMux()}
	h.unknown.every = unknownKeyEvery
	h.budget.limit = cfg.BodyBudget
	if cfg.PublicURL != "" {
		u, err := ParsePublicURL(cfg.PublicURL)
		if err != nil {
			return nil, err
		}
		h.public = u
	}
	for i := range cfg.Sources {
		s := &cfg.Sources[i]
		if s.WriteKey == "" {
			return nil, fmt.Errorf("collector: source %q has no write key", s.Name)
		}
		if s.Kind == "" {
			s.Kind = KindServer
		}
		if other, dup := h.keys.add(s); dup {
			return nil, fmt.Errorf("collector: sources %q and %q share a write key", other.Name, s.Name)
		}
	}
	// Each path answers its method and a browser's preflight.
	route := func(method, path string, handler http.HandlerFunc) {
		h.mux.HandleFunc(method+" "+path, handler)
		h.mux.HandleFunc("OPTIONS "+path, preflight)
	}
	for _, path := range []string{"/v1/batch", "/v1/import", "/v1/b"} {
		route("POST", path, h.batch)
	}
	for _, t := range message.Types {
		route("POST", "/v1/"+string(t), h.single(t))
		route("POST", "/v1/"+string(t)[:1], h.single(t))
	}
	route("POST", "/v1/m", metrics)
	route("GET", "/v1/projects/{writeKey}/settings", h.settings)
	route("GET", "/projects/{writeKey}/settings", h.settings)
	return h, nil
}

// Drain makes the Handler answer 503 to every new request (shutdown).
func (h *Handler) Drain() { h.draining.Store(true) }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	withOrigin(w, r)
	if h.draining.Load() {
		w.Header().Set("Connection", "close")
		retryLater(w, http.StatusServiceUnavailable, RetryAfter, "server is shutting down")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// metrics takes what Analytics.js reports about itself (its own
// counters, posted to /v1/m): read, and dropped. A few hundred bytes each:
// they go through a small buffer of the request's own, where io.Discard
// would hold one of 8 KiB for as long as a client takes to send.
func metrics(w http.ResponseWriter, r *http.Request) {
	if _, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, http.MaxBytesReader(w, r.Body, MaxBatchBytes), make([]byte, 512)); tooLarge(err) {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the %d-byte limit", MaxBatchBytes), nil)
		return
	}
	writeSuccess(w)
}

// batch serves /v1/batch, /v1/import and /v1/b.
func (h *Handler) batch(w http.ResponseWriter, r *http.Request) {
	h.collect(w, r, MaxBatchBytes, parseBatch, "")
}

// single serves /v1/{type} and /v1/{t,i,...}: one message whose type the
// path fixes.
func (h *Handler) single(t message.Type) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.collect(w, r, MaxMessageBytes, parseSingle, t)
	}
}

// collect is every collection endpoint: authenticate, read at most limit
// bytes, parse, and store; t, when set, is the type the path fixes. A
// write key or an origin in the headers that is refused is refused before
// a byte of the body is read.
func (h *Handler) collect(w http.ResponseWriter, r *http.Request, limit int64, parse func([]byte) (*batch, error), t message.Type) {
	src, ok := h.headerSource(w, r)
	if !ok || src != nil && !h.fromAllowed(w, r, src, true) {
		return
	}
	res := reservation{budget: &h.budget}
	defer res.release()
	body, ok := h.readBody(w, r, limit, &res)
	if !ok {
		return
	}
	b, err := parse(validUTF8(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	if src == nil {
		if src = h.keys.source(b.writeKey); src == nil {
			h.unknownKey(r, b.writeKey, http.StatusUnauthorized)
			writeAuthError(w, b.writeKey != "")
			return
		}
		if !h.fromAllowed(w, r, src, false) {
			return
		}
	}
	if src.Kind.onDevice() {
		b.clientAddr = ClientAddr(r, h.cfg.TrustedProxies)
	}
	h.store(w, r, src, b, t)
}

// fromAllowed refuses, with a 403 the page can read, a browser request
// from an origin src does not allow; bodyUnread says the request's body
// has not been read.
func (h *Handler) fromAllowed(w http.ResponseWriter, r *http.Request, src *Source, bodyUnread bool) bool {
	if origin := r.Header.Get("Origin"); !src.allows(origin) {
		if bodyUnread {
			unread(w, r)
		}
		err := refuseOrigin(w, src, origin)
		if h.refused.due([2]string{src.Name, origin}, time.Time{}) {
			h.onError(http.StatusForbidden, err)
		}
		return false
	}
	return true
}

// headerSource resolves Basic auth. It answers 401 itself for an unknown
// key; with no Authorization header it returns nil, true and the body's
// writeKey decides.
func (h *Handler) headerSource(w http.ResponseWriter, r *http.Request) (*Source, bool) {
	if r.Header.Get("Authorization") == "" {
		return nil, true
	}
	key, _, ok := r.BasicAuth()
	if ok {
		if src := h.keys.source(key); src != nil {
			return src, true
		}
	}
	h.unknownKey(r, key, http.StatusUnauthorized)
	unread(w, r)
	writeAuthError(w, true)
	return nil, false
}

// unread closes the connection after a refusal made before the body is
// read, rather than wait for and discard a body nobody reads: net/http
// would read up to 256 KiB of it before writing the answer, as slowly as
// the client sends it.
func unread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

// overBudget answers a request that the body budget has no room for: 503,
// retry in a second, and the connection closed (what is left of the body
// is not read). The first refusal since the budget was half free is
// reported.
func (h *Handler) overBudget(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	retryLater(w, http.StatusServiceUnavailable, RetryAfter, "server is busy, retry later")
	if h.budget.firstRefusal() {
		h.onError(http.StatusServiceUnavailable, fmt.Errorf(
			"the bodies of the requests in flight hold the whole body budget (%d bytes): new requests are answered 503 until half of it is free; the rest of these refusals are not logged",
			h.budget.limit))
	}
}

// store completes the batch's messages, commits them, and answers.
func (h *Handler) store(w http.ResponseWriter, r *http.Request, src *Source, b *batch, pathType message.Type) {
	if len(b.elems) == 0 {
		// analytics-ruby posts {"batch":[]} after dropping an oversized
		// message; Segment answers 200, and so does evfwd, storing nothing.
		writeSuccess(w)
		return
	}
	now := h.cfg.Now()
	msgs, details, tooLarge := b.messages(src, pathType, now, h.cfg.NewID)
	switch {
	case tooLarge:
		writeError(w, http.StatusRequestEntityTooLarge, "message too large", details)
		return
	case len(details) > 0:
		writeError(w, http.StatusBadRequest, "invalid message", details)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.IngestTimeout)
	defer cancel()
	if err := h.cfg.Store.Ingest(ctx, msgs); err != nil {
		switch {
		case errors.Is(err, store.ErrBusy):
			retryLater(w, http.StatusTooManyRequests, RetryAfter, "store is busy, retry later")
			h.onError(http.StatusTooManyRequests, err)
		case errors.Is(err, store.ErrFull):
			// The disk (or the database) is full: nothing was stored, and
			// the client keeps the messages to retry.
			retryLater(w, http.StatusServiceUnavailable, RetryAfterFull, "store cannot write (full), retry later")
			h.onError(http.StatusServiceUnavailable, err)
		case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
			// The database cannot be reached (stopped, restarting, cut
			// off) or did not commit within Config.IngestTimeout. The messages
			// may have been committed all the same; a retry is safe, as
			// the store skips a messageId it has.
			retryLater(w, http.StatusServiceUnavailable, RetryAfter, "store unavailable, retry later")
			h.onError(http.StatusServiceUnavailable, err)
		case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled):
			retryLater(w, http.StatusServiceUnavailable, RetryAfter, "server is shutting down")
			h.onError(http.StatusServiceUnavailable, err)
		default:
			writeError(w, http.StatusInternalServerError, "could not store messages", nil)
			h.onError(http.StatusInternalServerError, err)
		}
		return
	}
	if h.cfg.OnStored != nil {
		h.cfg.OnStored(src.Name, msgs)
	}
	writeSuccess(w)
}

// Prebuilt, for the answer every single event gets: the header keys are
// canonical already, so they are assigned without Set's canonicalising.
var (
	success     = []byte(`{"success":true}` + "\n")
	contentJSON = []string{"application/json"}
)

func writeSuccess(w http.ResponseWriter) {
	w.Header()["Content-Type"] = contentJSON
	w.WriteHeader(http.StatusOK)
	w.Write(success)
}

func (h *Handler) onError(status int, err error) {
	if h.cfg.OnError != nil {
		h.cfg.OnError(status, err)
	}
}

// retryLater answers a 429 or 503 that the client is to retry in
// seconds: overload, the store's or this process's, or shutdown.
func retryLater(w http.ResponseWriter, status, seconds int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(seconds))
	writeError(w, status, msg, nil)
}

func writeAuthError(w http.ResponseWriter, given bool) {
	w.Header().Set("WWW-Authenticate", `Basic realm="evfwd"`)
	msg := "missing write key"
	if given {
		msg = "unknown write key"
	}
	writeError(w, http.StatusUnauthorized, msg, nil)
}

// Detail says what is wrong with one message of a request.
type Detail struct {
	Index  int    `json:"index"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

func (d Detail) String() string {
	return strings.TrimSpace(fmt.Sprintf("message %d: %s %s", d.Index, d.Field, d.Reason))
}
