package inspector

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/lockout"
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// The serve inspector's limits.
const (
	// SessionHeader carries the session id that POST /api/session
	// answers. The page holds it (in the tab's sessionStorage) and sends it
	// with every call: no cookie, so nothing the browser sends by itself to
	// other ports of the host opens the inspector.
	SessionHeader = "X-Evfwd-Session"
	// DefaultSessionIdle is how long a session lives without a call.
	DefaultSessionIdle = 12 * time.Hour
	// DefaultPage and MaxPage bound GET /api/deliveries.
	DefaultPage = 100
	MaxPage     = 1000
	// maxSessions bounds the sessions kept; a login beyond it ends the
	// oldest.
	maxSessions = 64
	// maxRetryIDs bounds the ids of one POST /api/retry.
	maxRetryIDs = 1000
	// legacyCookie is the session cookie of evfwd before sessions moved to
	// SessionHeader; a browser that still holds one is told to drop it.
	legacyCookie = "evfwd_ui"
)

// Login failures, LoginFailure's reasons.
const (
	// LoginWrongToken is a wrong admin token, at POST /api/session or as
	// a Bearer token.
	LoginWrongToken = "wrong_token"
	// LoginRateLimited is an attempt refused (429) because its address
	// failed too often.
	LoginRateLimited = "rate_limited"
)

// ServeSource is a source as GET /api/session shows it.
type ServeSource struct {
	Name string `json:"name"`
	// Webhooks says that it forwards: it has a webhooks block or
	// destinations.
	Webhooks bool `json:"webhooks"`
	// Endpoints are the URLs of its destinations, in config order, each
	// once: the values GET /api/deliveries?endpoint= takes.
	Endpoints []string `json:"endpoints"`
	// Destinations are its destinations, in config order (the webhooks
	// block first). With ServeConfig.Destinations set, GET /api/session
	// shows what it answers instead: the destinations as they run now.
	Destinations []ServeDestination `json:"destinations"`
}

// ServeDestination is one destination of a source: its settings, as the
// page shows them, and whether it is paused.
type ServeDestination struct {
	Source string `json:"source"`
	// Name is the value GET /api/deliveries?destination= takes.
	Name string `json:"name"`
	// Endpoints are its URLs in order (never their credentials).
	Endpoints []string `json:"endpoints"`
	// Subscribe is its Segment FQL condition; "" takes every message.
	Subscribe string `json:"subscribe,omitempty"`
	// Maps says that a mapping shapes its bodies.
	Maps bool `json:"maps"`
	// Batch is how many messages one request carries when it batches
	// (above 1); 0 when it sends each on its own.
	Batch int `json:"batch,omitempty"`
	// PerSecond is its pace, requests a second, when it has one.
	PerSecond float64 `json:"perSecond,omitempty"`
	Paused    bool    `json:"paused"`
	// Holding is how many of its deliveries this process holds now
	// (being sent, recorded, or leased ahead).
	Holding int `json:"holding"`
}

// DestinationControl is serve's hold on its destinations as they run:
// their settings and state, and pausing and resuming one. Pause and
// Resume report false for a destination it does not know.
type DestinationControl interface {
	Destinations() []ServeDestination
	Pause(source, name string) bool
	Resume(source, name string) bool
}

// ServeConfig is what the serve inspector needs from `evfwd serve`.
type ServeConfig struct {
	// Addr is the inspector's listener address (net.Listener.Addr()), which
	// requests must name as their Host.
	Addr string
	// Token is serve's admin token; required.
	Token string
	// Store is serve's store.
	Store store.Store
	// Sources are serve's sources, in config order.
	Sources []ServeSource
	// URL is serve's collection URL, StoreName its store with any
	// password masked, and Version evfwd's: shown by GET /api/session.
	URL, StoreName, Version string
	// Now is the clock of retries, of the per-minute stats, of session
	// expiry and of the login rate limit (default time.Now).
	Now func() time.Time
	// SessionIdle ends a session after this long without a call (default
	// DefaultSessionIdle).
	SessionIdle time.Duration
	// SessionCheck is how often an open event stream of a session checks
	// that the session is still alive, on the wall clock (default 1
	// minute); a logout ends the stream at once.
	SessionCheck time.Duration
	// LoginFailure, when set, hears each failed login: reason is
	// LoginWrongToken or LoginRateLimited (serve counts them in /metrics).
	LoginFailure func(reason string)
	// Wake, when set, tells the forwarder that source's deliveries may
	// be due now (forwarder.Notify), after a retry or a resend.
	Wake func(source string)
	// Destinations, when set, lists the destinations as they run and
	// pauses and resumes them: GET /api/destinations and POST
	// /api/pause and /api/resume. Without it those answer 404.
	Destinations DestinationControl
	// Health, when set, gives the endpoints' live health
	// (forwarder.Health); without it GET /api/stats reads the states the
	// store recorded.
	Health func() []store.EndpointState
	// Logger gets a line per retry, per login and per failed login
	// (default: none).
	Logger *slog.Logger
}

// Serve is the inspector of `evfwd serve --ui`: an http.Handler for its
// own listener, and the forwarder's observer (Attempt, Finished,
// EndpointState, Skipped, Settled) that feeds its stats and event stream.
type Serve struct {
	cfg     ServeConfig
	token   admin.Token
	stats   *Stats
	hub     *hub
	handler http.Handler

	mu       sync.Mutex
	sessions map[string]*uiSession // by sessionKey(id)
	logins   []string              // session keys, oldest first

	// limit counts wrong admin tokens by client address (the login rate
	// limit).
	limit *lockout.Limiter
	// signIn are the one-time sign-in links' codes (signin.go).
	signIn signInCodes

	// started is when the inspector began: the attempts before it are
	// counted from the store, once (fillStats), those after it as the
	// forwarder reports them.
	started time.Time
	filled  sync.Once
}

// uiSession is one login's session.
type uiSession struct {
	used time.Time     // the last call with it
	done chan struct{} // closed when it ends, to end its event streams
}

// NewServe checks cfg and returns the inspector.
func NewServe(cfg ServeConfig) (*Serve, error) {
	if cfg.Token == "" {
		return nil, errors.New("the serve inspector needs the admin token: set admin_token in the config or " + admin.TokenEnv)
	}
	if cfg.Store == nil {
		return nil, errors.New("inspector: ServeConfig.Store is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionCheck <= 0 {
		cfg.SessionCheck = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Serve{
		cfg: cfg, token: admin.NewToken(cfg.Token),
		stats: NewStats(cfg.Now), hub: newHub(), sessions: map[string]*uiSession{}, limit: lockout.New(cfg.Now),
		started: cfg.Now(),
	}
	mux := http.NewServeMux()
	mux.Handle("/", Assets())
	mux.HandleFunc("GET /api/session", s.session)
	mux.HandleFunc("POST /api/session", s.login)
	mux.HandleFunc("DELETE /api/session", s.logout)
	mux.HandleFunc("GET /api/deliveries", s.list)
	mux.HandleFunc("GET /api/deliveries/{id}", s.detail)
	mux.HandleFunc("POST /api/retry", s.retry)
	mux.HandleFunc("POST /api/resend", s.resend)
	mux.HandleFunc("GET /api/stats", s.statsHandler)
	if cfg.Destinations != nil {
		mux.HandleFunc("GET /api/destinations", s.destinations)
		mux.HandleFunc("POST /api/pause", s.pauseResume(true))
		mux.HandleFunc("POST /api/resume", s.pauseResume(false))
	}
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("/api/", noAPI)
	checked := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie(legacyCookie); err == nil && c.Value != "" {
			http.SetCookie(w, &http.Cookie{Name: legacyCookie, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			writeError(w, http.StatusForbidden, "cross-origin request refused (Origin "+quote(o)+")")
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api/session" && !s.authorize(w, r) {
			return
		}
		if r.Method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, "send the body as Content-Type: application/json")
			return
		}
		mux.ServeHTTP(w, r)
	})
	// guard checks the Host and sets the security headers. No CSRF token:
	// the credentials (SessionHeader, Authorization) are headers that a
	// browser never adds by itself and that a page of another origin cannot
	// set without a CORS preflight, which this API never grants.
	s.handler = guard(checked, newHostCheck(cfg.Addr), nil, func(*http.Request) bool { return true })
	return s, nil
}

// SetURL sets serve's collection URL that GET /api/session shows, once it
// listens; call it before serving.
func (s *Serve) SetURL(url string) { s.cfg.URL = url }

// ServeHTTP serves the page and the API.
func (s *Serve) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close ends the event streams, and any opened later, so that the server
// can shut down without waiting on them.
func (s *Serve) Close() { s.hub.close() }

// Stats are the per-minute counts the observer feeds.
func (s *Serve) Stats() *Stats { return s.stats }

// sameOrigin says whether the Origin header o names host (the request's
// Host): a browser sends Origin on the page's own POSTs and DELETEs, and
// on any cross-origin request.
func sameOrigin(o, host string) bool {
	u, err := url.Parse(o)
	return err == nil && u.Scheme == "http" && u.Host != "" && strings.EqualFold(u.Host, host)
}

// newSessionID returns a fresh session id: 32 random bytes.
func newSessionID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sessionKey is what the sessions are kept by: a hash of the id, so that
// neither the map's lookup time nor a memory dump gives an id away.
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return string(sum[:])
}

// lookup finds the live session id names, ending it if it idled too long;
// touch counts the call as use.
func (s *Serve) lookup(id string, touch bool) (*uiSession, bool) {
	if id == "" {
		return nil, false
	}
	key, now := sessionKey(id), s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[key]
	if !ok {
		return nil, false
	}
	if now.Sub(ss.used) >= s.cfg.SessionIdle {
		s.endLocked(key)
		return nil, false
	}
	if touch && now.After(ss.used) {
		ss.used = now
	}
	return ss, true
}

// endLocked ends the session of key; s.mu is held.
func (s *Serve) endLocked(key string) {
	ss, ok := s.sessions[key]
	if !ok {
		return
	}
	delete(s.sessions, key)
	s.logins = slices.DeleteFunc(s.logins, func(k string) bool { return k == key })
	close(ss.done)
}

// lockedOut says whether r's address is refused for now, and for how much
// longer (see package lockout), and logs the first refusal of a lock-out.
func (s *Serve) lockedOut(r *http.Request) (time.Duration, bool) {
	wait, first := s.limit.Locked(lockout.ClientAddr(r))
	if wait <= 0 {
		return 0, false
	}
	if first {
		s.cfg.Logger.Warn("inspector: login refused: too many wrong admin tokens from this address", "remote", r.RemoteAddr, "retryAfter", wait.String())
	}
	return wait, true
}

// refuse answers 429 for an address locked out for wait more.
func (s *Serve) refuse(w http.ResponseWriter, wait time.Duration) {
	if s.cfg.LoginFailure != nil {
		s.cfg.LoginFailure(LoginRateLimited)
	}
	w.Header().Set("Retry-After", strconv.FormatInt(lockout.RetryAfter(wait), 10))
	writeError(w, http.StatusTooManyRequests, lockout.Message(wait))
}

// failed counts a wrong admin token from r's address, locking the address
// out once it has failed lockout.Free times, and logs it (never the
// token). via says where the token came: "login" or "bearer".
func (s *Serve) failed(r *http.Request, via string) {
	failures, lock := s.limit.Failed(lockout.ClientAddr(r))
	if s.cfg.LoginFailure != nil {
		s.cfg.LoginFailure(LoginWrongToken)
	}
	args := []any{"remote", r.RemoteAddr, "via", via, "failures", failures}
	if lock > 0 {
		args = append(args, "lockedFor", lock.String())
	}
	s.cfg.Logger.Warn("inspector: wrong admin token", args...)
}

// succeeded forgets the failures of r's address.
func (s *Serve) succeeded(r *http.Request) { s.limit.Forgive(lockout.ClientAddr(r)) }

// bearer checks r's Bearer token, if it has one, under the rate limit.
// It answers (and returns handled) a 429 for a locked-out address; else
// ok says whether the token is the admin token.
func (s *Serve) bearer(w http.ResponseWriter, r *http.Request) (ok, handled bool) {
	tok, has := admin.Bearer(r)
	if !has {
		return false, false
	}
	if wait, locked := s.lockedOut(r); locked {
		s.refuse(w, wait)
		return false, true
	}
	if !s.token.Matches(tok) {
		s.failed(r, "bearer")
		return false, false
	}
	s.succeeded(r)
	return true, false
}

// authorize lets r through when it carries a live session or the admin
// token, and otherwise answers 401 (or 429) itself.
func (s *Serve) authorize(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := s.lookup(r.Header.Get(SessionHeader), true); ok {
		return true
	}
	ok, handled := s.bearer(w, r)
	if ok || handled {
		return ok
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="evfwd inspector"`)
	writeError(w, http.StatusUnauthorized, "log in with the admin token (POST /api/session, then send its session as "+SessionHeader+") or send Authorization: Bearer TOKEN")
	return false
}

// sessionInfo is the serve part of GET /api/session.
type sessionInfo struct {
	URL     string        `json:"url"`
	Store   string        `json:"store"`
	Sources []ServeSource `json:"sources"`
}

func (s *Serve) session(w http.ResponseWriter, r *http.Request) {
	_, ok := s.lookup(r.Header.Get(SessionHeader), true)
	if !ok {
		var handled bool
		if ok, handled = s.bearer(w, r); handled {
			return
		}
	}
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{"mode": "serve", "auth": false})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"mode": "serve", "auth": true, "version": s.cfg.Version, "idleMs": s.cfg.SessionIdle.Milliseconds(),
		"serve": sessionInfo{URL: s.cfg.URL, Store: s.cfg.StoreName, Sources: s.sources()}, "meta": newServeMeta(),
	})
}

// login checks the admin token, or the code of a sign-in link (signin.go),
// under the rate limit, and starts a session: an id that the page sends
// back as SessionHeader.
func (s *Serve) login(w http.ResponseWriter, r *http.Request) {
	if wait, locked := s.lockedOut(r); locked {
		s.refuse(w, wait)
		return
	}
	var req struct {
		Token string `json:"token"`
		Code  string `json:"code"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if req.Code != "" {
		if !s.signIn.redeem(req.Code, s.cfg.Now()) {
			s.failed(r, "link")
			writeError(w, http.StatusForbidden, "this sign-in link has been used or has expired: sign in with the admin token, or start serve again for a new link")
			return
		}
	} else if !s.token.Matches(req.Token) {
		s.failed(r, "login")
		writeError(w, http.StatusForbidden, "wrong admin token")
		return
	}
	s.succeeded(r)
	id, now := newSessionID(), s.cfg.Now()
	key := sessionKey(id)
	s.mu.Lock()
	for _, k := range slices.Clone(s.logins) {
		if now.Sub(s.sessions[k].used) >= s.cfg.SessionIdle {
			s.endLocked(k)
		}
	}
	if len(s.logins) >= maxSessions {
		s.endLocked(s.logins[0])
	}
	s.sessions[key] = &uiSession{used: now, done: make(chan struct{})}
	s.logins = append(s.logins, key)
	s.mu.Unlock()
	with := "admin token"
	if req.Code != "" {
		with = "sign-in link"
	}
	s.cfg.Logger.Info("inspector: logged in", "remote", r.RemoteAddr, "with", with)
	writeJSON(w, http.StatusOK, map[string]any{"session": id, "idleMs": s.cfg.SessionIdle.Milliseconds()})
}

// logout ends the session r names, if any; it is done either way (204).
// Its event streams end with it.
func (s *Serve) logout(w http.ResponseWriter, r *http.Request) {
	if id := r.Header.Get(SessionHeader); id != "" {
		s.mu.Lock()
		_, had := s.sessions[sessionKey(id)]
		s.endLocked(sessionKey(id))
		s.mu.Unlock()
		if had {
			s.cfg.Logger.Info("inspector: logged out", "remote", r.RemoteAddr)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// events streams events; a session's stream ends when the session does
// (logged out at once, idled out at the next check).
func (s *Serve) events(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(SessionHeader)
	ss, ok := s.lookup(id, false)
	if !ok {
		if tok, has := admin.Bearer(r); !has || !s.token.Matches(tok) {
			// The session ended since authorize let it in.
			writeError(w, http.StatusUnauthorized, "the session has ended")
			return
		}
		s.hub.serve(w, r) // a Bearer caller
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		tick := time.NewTicker(s.cfg.SessionCheck)
		defer tick.Stop()
		for {
			select {
			case <-ss.done:
				cancel()
				return
			case <-tick.C:
				if _, ok := s.lookup(id, false); !ok {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	s.hub.serve(w, r.WithContext(ctx))
}

// list answers deliveries newest first, a page at a time.
func (s *Serve) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.Filter{Status: store.Status(q.Get("status")), Source: q.Get("source"), Destination: q.Get("destination"),
		Endpoint: q.Get("endpoint"), Desc: true}
	if f.Status != "" && !f.Status.Valid() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("status %q: want one of %v", f.Status, store.Statuses))
		return
	}
	before, err := queryInt(q, "before", 0, 1)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := queryInt(q, "limit", DefaultPage, 1)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.Before, f.Limit = before, int(min(limit, MaxPage))
	page := f.Limit
	f.Limit++ // one more says whether there is a next page
	ds, err := s.cfg.Store.List(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "list deliveries: "+err.Error())
		return
	}
	out := struct {
		Deliveries []admin.DeliveryView `json:"deliveries"`
		Next       int64                `json:"next,omitempty"`
	}{Deliveries: make([]admin.DeliveryView, 0, min(len(ds), page))}
	if len(ds) > page {
		ds = ds[:page]
		out.Next = ds[page-1].ID
	}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, admin.ViewDelivery(d))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Serve) detail(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "delivery id "+quote(r.PathValue("id"))+": want a positive number")
		return
	}
	d, err := s.cfg.Store.Get(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no delivery %d", id))
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "get delivery: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, admin.ViewDetail(d))
}

// RetryRequest is the body of POST /api/retry: IDs, or every delivery in
// Status (failed or dead), of Source when set.
type RetryRequest struct {
	IDs    []int64      `json:"ids,omitempty"`
	Status store.Status `json:"status,omitempty"`
	Source string       `json:"source,omitempty"`
	// Destination narrows Status to one destination's deliveries.
	Destination string `json:"destination,omitempty"`
	// Endpoint narrows Status to deliveries with an attempt to this URL.
	Endpoint string `json:"endpoint,omitempty"`
}

// retry makes deliveries pending again, as `evfwd deliveries retry` does,
// and wakes the forwarder for them.
func (s *Serve) retry(w http.ResponseWriter, r *http.Request) {
	var req RetryRequest
	if !decodeBody(w, r, &req) {
		return
	}
	switch {
	case (len(req.IDs) == 0) == (req.Status == ""):
		writeError(w, http.StatusBadRequest, `give "ids" or "status" ("failed" or "dead"), not both`)
		return
	case len(req.IDs) > maxRetryIDs:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%d ids: at most %d at a time", len(req.IDs), maxRetryIDs))
		return
	case req.Status != "" && !slices.Contains(retryable(), req.Status):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("status %q: only failed or dead deliveries are retried", req.Status))
		return
	case len(req.IDs) > 0 && (req.Source != "" || req.Destination != "" || req.Endpoint != ""):
		writeError(w, http.StatusBadRequest, `"source", "destination" and "endpoint" go with "status", not with "ids"`)
		return
	}
	for _, id := range req.IDs {
		if id <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("delivery id %d: want a positive number", id))
			return
		}
	}
	n, err := s.cfg.Store.Retry(r.Context(), req.IDs, store.Filter{Status: req.Status, Source: req.Source, Destination: req.Destination, Endpoint: req.Endpoint}, s.cfg.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "retry: "+err.Error())
		return
	}
	s.cfg.Logger.Info("inspector: retry", "ids", len(req.IDs), "status", req.Status, "source", req.Source, "destination", req.Destination, "endpoint", req.Endpoint, "retried", n)
	if n > 0 {
		s.wake(req.Source)
	}
	writeJSON(w, http.StatusOK, map[string]int{"retried": n})
}

// resend sends finished deliveries again, delivered ones too, as `evfwd
// deliveries resend` does (admin.ResendRequest), and wakes the forwarder
// for them.
func (s *Serve) resend(w http.ResponseWriter, r *http.Request) {
	var req admin.ResendRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if err := req.Check(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	res, err := s.cfg.Store.Resend(r.Context(), req.IDs, req.Filter(), s.cfg.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "resend: "+err.Error())
		return
	}
	s.cfg.Logger.Info("inspector: resend", "ids", len(req.IDs), "status", req.Status, "source", req.Source, "since", req.Since, "resent", res.N, "skipped", res.Skipped)
	if res.N > 0 {
		s.wake(req.Source)
	}
	writeJSON(w, http.StatusOK, admin.ViewResent(res))
}

// wake tells the forwarder that deliveries of source ("" for every
// source) may be due now.
func (s *Serve) wake(source string) {
	if s.cfg.Wake == nil {
		return
	}
	for _, src := range s.cfg.Sources {
		if src.Webhooks && (source == "" || source == src.Name) {
			s.cfg.Wake(src.Name)
		}
	}
}

// EndpointStats is one endpoint in GET /api/stats: its health (State ""
// when none is known: the breaker is off) and its last hour.
type EndpointStats struct {
	Source    string       `json:"source"`
	URL       string       `json:"url"`
	State     store.Health `json:"state,omitempty"`
	Since     string       `json:"since,omitempty"`
	Failures  int          `json:"failures"`
	NextProbe string       `json:"nextProbe,omitempty"`
	LastError string       `json:"lastError,omitempty"`
	Minutes   []Minute     `json:"minutes"`
}

// statsHandler answers every configured endpoint (and any other that
// attempts went to), in config order.
func (s *Serve) statsHandler(w http.ResponseWriter, r *http.Request) {
	s.filled.Do(func() { s.fillStats(r.Context()) })
	var health []store.EndpointState
	if s.cfg.Health != nil {
		health = s.cfg.Health()
	} else {
		var err error
		if health, err = s.cfg.Store.Endpoints(r.Context()); err != nil {
			writeError(w, http.StatusInternalServerError, "endpoint states: "+err.Error())
			return
		}
	}
	states := make(map[Endpoint]store.EndpointState, len(health))
	for _, h := range health {
		states[Endpoint{h.Source, h.URL}] = h
	}
	var eps []Endpoint
	seen := map[Endpoint]bool{}
	for _, src := range s.sources() {
		for _, u := range src.Endpoints {
			if e := (Endpoint{src.Name, u}); !seen[e] {
				seen[e] = true
				eps = append(eps, e)
			}
		}
	}
	extra := s.stats.Seen()
	slices.SortFunc(extra, func(a, b Endpoint) int { return strings.Compare(a.Source+"\x00"+a.URL, b.Source+"\x00"+b.URL) })
	for _, e := range extra {
		if !seen[e] {
			eps = append(eps, e)
		}
	}
	out := struct {
		Endpoints    []EndpointStats    `json:"endpoints"`
		Destinations []DestinationStats `json:"destinations"`
	}{make([]EndpointStats, 0, len(eps)), s.destinationStats()}
	for _, e := range eps {
		es := EndpointStats{Source: e.Source, URL: e.URL, Minutes: s.stats.Minutes(e)}
		if h, ok := states[e]; ok {
			es.State, es.Since, es.Failures = h.State, admin.WireTime(h.Since), h.Failures
			es.NextProbe, es.LastError = admin.WireTime(h.NextProbe), h.LastError
		}
		out.Endpoints = append(out.Endpoints, es)
	}
	writeJSON(w, http.StatusOK, out)
}

// The bounds of fillStats: the newest deliveries of the hour it reads, and
// how long it may take.
const (
	fillDeliveries = 2000
	fillTimeout    = 30 * time.Second
)

// fillStats counts the attempts the store recorded in the hour before the
// inspector began, and how each round of them settled its delivery, so
// that the endpoints' and destinations' charts of a serve just restarted
// show that hour: those of the newest fillDeliveries deliveries created
// in it. A
// store that fails leaves the chart to the attempts from now on.
func (s *Serve) fillStats(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fillTimeout)
	defer cancel()
	from := s.started.Add(-StatsMinutes * time.Minute)
	ds, err := s.cfg.Store.List(ctx, store.Filter{Since: from, Desc: true, Limit: fillDeliveries})
	for i := 0; err == nil && i < len(ds); i++ {
		var d *store.Detail
		if d, err = s.cfg.Store.Get(ctx, ds[i].ID); errors.Is(err, store.ErrNotFound) {
			err = nil // pruned since the list
			continue
		} else if err != nil {
			break
		}
		for j, a := range d.Records {
			if a.Start.Before(from) || !a.Start.Before(s.started) {
				continue
			}
			last := j == len(d.Records)-1
			s.stats.add(Endpoint{d.Source, a.URL}, kindOfRecorded(a, last, d.Status), a.Latency, a.Start)
			// A round (its endpoints' attempts) settles the delivery once,
			// for its destination's chart, when its last attempt ends.
			if last || d.Records[j+1].Delivery != a.Delivery {
				lastRound := d.Records[len(d.Records)-1].Delivery == a.Delivery
				s.stats.settle(Destination{d.Source, d.Destination}, kindOfRound(lastRound, d.Status), a.Start.Add(a.Latency))
			}
		}
	}
	if err != nil {
		s.cfg.Logger.Warn("inspector: the chart's hour before the start, from the store", "err", err)
	}
}

// AttemptEvent is the data of an `attempt` event.
type AttemptEvent struct {
	Delivery  int64   `json:"delivery"`
	Source    string  `json:"source"`
	URL       string  `json:"url"`
	Endpoint  int     `json:"endpoint"`
	Status    int     `json:"status"`
	Class     string  `json:"class"`
	Error     string  `json:"error,omitempty"`
	Outcome   string  `json:"outcome"`
	Then      string  `json:"then"`
	RetryAt   string  `json:"retryAt,omitempty"`
	LatencyMs float64 `json:"latencyMs"`
	Start     string  `json:"start"`
}

// EndpointEvent is the data of an `endpoint` event.
type EndpointEvent struct {
	Source string       `json:"source"`
	URL    string       `json:"url"`
	State  store.Health `json:"state"`
}

// Attempt implements forwarder.Observer: the attempt counts in the stats
// and goes to the pages watching.
func (s *Serve) Attempt(source string, delivery int64, a webhook.Attempt) {
	s.stats.Record(source, a)
	if !s.hub.watched() {
		return
	}
	ev := AttemptEvent{Delivery: delivery, Source: source, URL: a.URL, Endpoint: a.Endpoint, Status: a.Status,
		Class: string(a.Class), Outcome: a.Outcome.String(), Then: a.Then.String(), LatencyMs: ms(a.Latency),
		Start: admin.WireTime(a.Start)}
	if a.Err != nil {
		ev.Error = a.Err.Error()
	}
	if a.Then == webhook.ThenRetry {
		ev.RetryAt = admin.WireTime(a.RetryAt)
	}
	s.publish(eventAttempt, ev)
}

// Stored tells the pages that n messages of source were stored, so that
// deliveries no attempt has reached yet (behind an open endpoint, or
// later in the queue) show up too.
func (s *Serve) Stored(source string, n int) {
	if s.hub.watched() {
		s.publish(eventStored, map[string]any{"source": source, "messages": n})
	}
}

// Finished implements forwarder.Observer: a delivery's new status is on
// record, so the pages read it now (an attempt's event comes before).
func (s *Serve) Finished(source string, delivery int64, status store.Status, _ bool) {
	if s.hub.watched() {
		s.publish(eventDelivery, DeliveryEvent{ID: delivery, Source: source, Status: status})
	}
}

// DeliveryEvent is the data of an event "delivery".
type DeliveryEvent struct {
	ID     int64        `json:"id"`
	Source string       `json:"source"`
	Status store.Status `json:"status"`
}

// EndpointState implements forwarder.EndpointObserver.
func (s *Serve) EndpointState(source, url string, state store.Health) {
	if s.hub.watched() {
		s.publish(eventEndpoint, EndpointEvent{source, url, state})
	}
}

// Skipped implements forwarder.EndpointObserver; the endpoint's state says
// it is open.
func (s *Serve) Skipped(string, string) {}

func (s *Serve) publish(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.hub.publish(name, b)
}
