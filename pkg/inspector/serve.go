package inspector

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// The serve inspector's limits.
const (
	// SessionCookie holds the session id that POST /api/session gives.
	SessionCookie = "evfwd_ui"
	// DefaultPage and MaxPage bound GET /api/deliveries.
	DefaultPage = 100
	MaxPage     = 1000
	// maxSessions bounds the sessions kept; a login beyond it ends the
	// oldest.
	maxSessions = 64
	// maxRetryIDs bounds the ids of one POST /api/retry.
	maxRetryIDs = 1000
)

// ServeSource is a source as GET /api/session shows it.
type ServeSource struct {
	Name     string `json:"name"`
	Webhooks bool   `json:"webhooks"`
	// Endpoints are its webhook URLs, in order, as configured: the values
	// GET /api/deliveries?endpoint= takes.
	Endpoints []string `json:"endpoints"`
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
	// Now is the clock of retries and of the per-minute stats (default
	// time.Now).
	Now func() time.Time
	// Wake, when set, tells the forwarder that source's deliveries may
	// be due now (forwarder.Notify), after a retry.
	Wake func(source string)
	// Health, when set, gives the endpoints' live health
	// (forwarder.Health); without it GET /api/stats reads the states the
	// store recorded.
	Health func() []store.EndpointState
	// Logger gets a line per retry and per login (default: none).
	Logger *slog.Logger
}

// Serve is the inspector of `evfwd serve --ui`: an http.Handler for its
// own listener, and the forwarder's observer (Attempt, Finished,
// EndpointState, Skipped) that feeds its stats and event stream.
type Serve struct {
	cfg     ServeConfig
	token   admin.Token
	bearer  string // the CSRF token of Bearer callers, one per process
	stats   *Stats
	hub     *hub
	handler http.Handler

	mu       sync.Mutex
	sessions map[string]string // session id → its CSRF token
	logins   []string          // session ids, oldest first
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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Serve{
		cfg: cfg, token: admin.NewToken(cfg.Token), bearer: newToken(),
		stats: NewStats(cfg.Now), hub: newHub(), sessions: map[string]string{},
	}
	mux := http.NewServeMux()
	mux.Handle("/", Assets())
	mux.HandleFunc("GET /api/session", s.session)
	mux.HandleFunc("POST /api/session", s.login)
	mux.HandleFunc("GET /api/deliveries", s.list)
	mux.HandleFunc("GET /api/deliveries/{id}", s.detail)
	mux.HandleFunc("POST /api/retry", s.retry)
	mux.HandleFunc("GET /api/stats", s.statsHandler)
	mux.HandleFunc("GET /api/events", s.hub.serve)
	mux.HandleFunc("/api/", noAPI)
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api/session" {
			if _, ok := s.caller(r); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="evfwd inspector"`)
				writeError(w, http.StatusUnauthorized, "log in with the admin token (POST /api/session) or send Authorization: Bearer TOKEN")
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
	// A caller without the token gets its 401 rather than a CSRF 403;
	// logging in needs no CSRF token (there is no session yet).
	exempt := func(r *http.Request) bool {
		if r.URL.Path == "/api/session" {
			return true
		}
		_, ok := s.caller(r)
		return !ok
	}
	csrf := func(r *http.Request) string { c, _ := s.caller(r); return c }
	s.handler = guard(authed, newHostCheck(cfg.Addr), csrf, exempt)
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

// caller says whether r carries the admin token, as a session cookie or
// a bearer token, and with which CSRF token its POSTs must come: the
// session's, or the process's one for bearer callers.
func (s *Serve) caller(r *http.Request) (csrf string, ok bool) {
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		s.mu.Lock()
		csrf, ok = s.sessions[c.Value]
		s.mu.Unlock()
		if ok {
			return csrf, true
		}
	}
	if tok, ok := admin.Bearer(r); ok && s.token.Matches(tok) {
		return s.bearer, true
	}
	return "", false
}

// sessionInfo is the serve part of GET /api/session.
type sessionInfo struct {
	URL     string        `json:"url"`
	Store   string        `json:"store"`
	Sources []ServeSource `json:"sources"`
}

func (s *Serve) session(w http.ResponseWriter, r *http.Request) {
	csrf, ok := s.caller(r)
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{"mode": "serve", "auth": false})
		return
	}
	sources := s.cfg.Sources
	if sources == nil {
		sources = []ServeSource{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"mode": "serve", "auth": true, "csrf": csrf, "version": s.cfg.Version,
		"serve": sessionInfo{URL: s.cfg.URL, Store: s.cfg.StoreName, Sources: sources},
	})
}

// login checks the admin token and starts a session: a cookie for this
// address, and the session's CSRF token.
func (s *Serve) login(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Token string `json:"token"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if !s.token.Matches(req.Token) {
		s.cfg.Logger.Warn("inspector: login with a wrong admin token", "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "wrong admin token")
		return
	}
	id, csrf := newToken(), newToken()
	s.mu.Lock()
	if len(s.logins) >= maxSessions {
		delete(s.sessions, s.logins[0])
		s.logins = s.logins[1:]
	}
	s.sessions[id] = csrf
	s.logins = append(s.logins, id)
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	s.cfg.Logger.Info("inspector: logged in", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"csrf": csrf})
}

// list answers deliveries newest first, a page at a time.
func (s *Serve) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.Filter{Status: store.Status(q.Get("status")), Source: q.Get("source"), Endpoint: q.Get("endpoint"), Desc: true}
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
	case req.Status != "" && req.Status != store.Failed && req.Status != store.Dead:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("status %q: only failed or dead deliveries are retried", req.Status))
		return
	case len(req.IDs) > 0 && (req.Source != "" || req.Endpoint != ""):
		writeError(w, http.StatusBadRequest, `"source" and "endpoint" go with "status", not with "ids"`)
		return
	}
	for _, id := range req.IDs {
		if id <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("delivery id %d: want a positive number", id))
			return
		}
	}
	n, err := s.cfg.Store.Retry(r.Context(), req.IDs, store.Filter{Status: req.Status, Source: req.Source, Endpoint: req.Endpoint}, s.cfg.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "retry: "+err.Error())
		return
	}
	s.cfg.Logger.Info("inspector: retry", "ids", len(req.IDs), "status", req.Status, "source", req.Source, "endpoint", req.Endpoint, "retried", n)
	if n > 0 && s.cfg.Wake != nil {
		for _, src := range s.cfg.Sources {
			if src.Webhooks && (req.Source == "" || req.Source == src.Name) {
				s.cfg.Wake(src.Name)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"retried": n})
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
	for _, src := range s.cfg.Sources {
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
		Endpoints []EndpointStats `json:"endpoints"`
	}{make([]EndpointStats, 0, len(eps))}
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
	s.publish("attempt", ev)
}

// Stored tells the pages that n messages of source were stored, so that
// deliveries no attempt has reached yet (behind an open endpoint, or
// later in the queue) show up too.
func (s *Serve) Stored(source string, n int) {
	if s.hub.watched() {
		s.publish("stored", map[string]any{"source": source, "messages": n})
	}
}

// Finished implements forwarder.Observer: a delivery's new status is on
// record, so the pages read it now (an attempt's event comes before).
func (s *Serve) Finished(source string, delivery int64, status store.Status, _ bool) {
	if s.hub.watched() {
		s.publish("delivery", DeliveryEvent{ID: delivery, Source: source, Status: status})
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
		s.publish("endpoint", EndpointEvent{source, url, state})
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
