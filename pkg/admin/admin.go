// Package admin is the admin API of `evfwd serve`: an http.Handler under
// /admin/v1, behind a bearer token, that creates deletion requests and
// applies audience and computed-trait syncs through the store, and the
// Client the admin commands use.
//
//	POST /admin/v1/deletions                {"userId": "...", "sources": [...]?}  → 201 Deletion
//	GET  /admin/v1/deletions/{id}                                                 → 200 Deletion
//	POST /admin/v1/audiences/{name}/sync    NDJSON or JSON array of userIds        → 200 SyncReport
//	POST /admin/v1/traits/{name}/sync       NDJSON or JSON array of {userId,value} → 200 SyncReport
//	POST /admin/v1/deliveries/resend        {"ids": [...]} or {"status", "source"} → 200 ResentView
//
// Syncs take ?source=NAME (repeatable) to pick the sources whose webhook
// destination gets the identify messages; by default every source with
// webhooks enabled. Errors are JSON, {"error": "..."}, as the collector's.
// A wrong token counts against the client address: after 5, the address
// is answered 429 with Retry-After, whatever its token, for a delay that
// grows with each failure (package internal/lockout); a right token
// forgives it. (DESIGN §5, spec 1A and 6.)
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/internal/lockout"
	"github.com/evfwd/evfwd/pkg/audience"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// TokenEnv is the environment variable that sets serve's admin token.
const TokenEnv = "EVFWD_ADMIN_TOKEN"

// MaxSyncBytes bounds a sync request body; the list is streamed, so this
// only stops a runaway upload.
const MaxSyncBytes = 1 << 30

// syncDeadline is how long a sync request may take to upload and apply,
// and a deletion request to purge (on PostgreSQL it rewrites the messages
// table before it answers); the server's usual read and write timeouts are
// for small requests.
const syncDeadline = 30 * time.Minute

// Source is a source as the admin API sees it.
type Source struct {
	Name string
	// Webhooks is whether the source's webhook destination is enabled:
	// only those get delete notifications and sync messages.
	Webhooks bool
}

// Config is what the admin API needs from the service.
type Config struct {
	// Token is the bearer token every request must carry; "" turns the
	// API off (404 naming TokenEnv).
	Token string
	// Store is the service's store. The API uses its store.Admin methods
	// only, and is off (501) when it has none.
	Store store.Store
	// Sources are the service's sources, in config order.
	Sources []Source
	// Now is the clock of deletion requests, syncs and the rate limit of
	// wrong tokens (default time.Now).
	Now func() time.Time
	// Route, when set, names the destinations of source that take a
	// message with this webhook body (their subscriptions decide); unset,
	// every message goes to the source's webhooks destination.
	Route func(source string, body []byte) []string
	// Control, when set, serves /admin/v1/destinations and
	// /admin/v1/reload (destinations.go).
	Control Control
	// Logger gets a line per request and the API's state (default: none).
	Logger *slog.Logger
	// Queued, when set, hears of the messages a request committed to the
	// queue, n for source, once they are durable: the service counts them
	// and wakes its forwarder. n is 0 after a resend, which made stored
	// deliveries of source due again without a new message.
	Queued func(source string, n int)
	// AuthFailure, when set, hears each request refused for its token:
	// reason is AuthWrongToken or AuthRateLimited (serve counts them in
	// /metrics). A request without a token is not a failure.
	AuthFailure func(reason string)
}

// Refused tokens, AuthFailure's reasons.
const (
	// AuthWrongToken is a wrong Bearer token (403).
	AuthWrongToken = "wrong_token"
	// AuthRateLimited is a request refused (429) because its address sent
	// too many wrong tokens (see package internal/lockout).
	AuthRateLimited = "rate_limited"
)

// Handler serves /admin/.
type Handler struct {
	cfg      Config
	token    Token
	off      string // why the API is off, "" when on
	offAt    int    // the status that says so
	store    store.Admin
	limit    *lockout.Limiter // wrong tokens by client address
	mux      *http.ServeMux
	draining atomic.Bool
}

// New builds the admin API and logs whether it is on.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("admin: Config.Store is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Queued == nil {
		cfg.Queued = func(string, int) {}
	}
	if cfg.AuthFailure == nil {
		cfg.AuthFailure = func(string) {}
	}
	a := &Handler{cfg: cfg, mux: http.NewServeMux(), limit: lockout.New(cfg.Now)}
	switch st, ok := cfg.Store.(store.Admin); {
	case cfg.Token == "":
		a.off, a.offAt = "admin API is disabled: set admin_token in the config or "+TokenEnv, http.StatusNotFound
		cfg.Logger.Info("admin API off: no admin_token in the config or " + TokenEnv)
	case !ok:
		a.off, a.offAt = fmt.Sprintf("admin API needs a store that supports it; this store (%T) does not", cfg.Store), http.StatusNotImplemented
		cfg.Logger.Warn("admin API off: the store does not support it", "store", fmt.Sprintf("%T", cfg.Store))
	default:
		a.store = st
		a.token = NewToken(cfg.Token)
		cfg.Logger.Info("admin API on", "path", "/admin/v1")
	}
	a.mux.HandleFunc("POST /admin/v1/deletions", a.createDeletion)
	a.mux.HandleFunc("GET /admin/v1/deletions/{id}", a.getDeletion)
	a.mux.HandleFunc("POST /admin/v1/audiences/{name}/sync", a.sync(store.KindAudience))
	a.mux.HandleFunc("POST /admin/v1/traits/{name}/sync", a.sync(store.KindTrait))
	a.mux.HandleFunc("POST /admin/v1/deliveries/resend", a.resend)
	a.routeDestinations()
	a.mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no admin endpoint "+r.Method+" "+r.URL.Path)
	})
	return a, nil
}

// Token is the admin token as kept: its digest, so that Matches compares
// in constant time, in the length too.
type Token [sha256.Size]byte

// NewToken keeps tok.
func NewToken(tok string) Token { return sha256.Sum256([]byte(tok)) }

// Matches reports whether given is the token.
func (t Token) Matches(given string) bool {
	sum := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(sum[:], t[:]) == 1
}

// Bearer returns the token r's Authorization header carries, if any
// (the scheme's name in any case, as HTTP allows).
func Bearer(r *http.Request) (string, bool) {
	scheme, tok, found := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	return tok, found && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// Drain makes every later request 503: the service is shutting down.
func (a *Handler) Drain() { a.draining.Store(true) }

// Deletion is a deletion request as the admin API shows it.
type Deletion struct {
	ID        string `json:"id"`
	UserID    string `json:"userId"`
	CreatedAt string `json:"createdAt"`
	// Done is false while the request is still purging (after a restart,
	// in the background): its counts are then partial.
	Done    bool             `json:"done"`
	Sources []DeletionSource `json:"sources"`
}

// DeletionSource is what a deletion request did in one source. Status is
// the delete notification's delivery status ("" when none was sent: the
// source has no webhooks enabled).
type DeletionSource struct {
	Source    string       `json:"source"`
	Notified  bool         `json:"notified"`
	MessageID string       `json:"messageId,omitempty"`
	Delivery  int64        `json:"delivery,omitempty"`
	Status    store.Status `json:"status,omitempty"`
	Attempts  int          `json:"attempts"`
	LastError string       `json:"lastError,omitempty"`
	Cancelled int          `json:"cancelled"`
	Purged    int          `json:"purged"`
}

// DeletionRequest is the body of POST /admin/v1/deletions.
type DeletionRequest struct {
	UserID  string   `json:"userId"`
	Sources []string `json:"sources,omitempty"`
}

// SyncReport is the answer to a sync.
type SyncReport struct {
	Kind      store.SyncKind `json:"kind"`
	Name      string         `json:"name"`
	Trait     string         `json:"trait"`
	Sources   []string       `json:"sources"`
	First     bool           `json:"first"`
	Added     int            `json:"added"`
	Removed   int            `json:"removed"`
	Changed   int            `json:"changed"`
	Unchanged int            `json:"unchanged"`
	Messages  int            `json:"messages"`
	Millis    int64          `json:"ms"`
}

func (a *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.off != "" {
		writeError(w, a.offAt, a.off)
		return
	}
	given, ok := Bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="evfwd admin"`)
		writeError(w, http.StatusUnauthorized, "missing admin token (Authorization: Bearer ...)")
		return
	}
	addr := lockout.ClientAddr(r)
	if wait, first := a.limit.Locked(addr); wait > 0 {
		if first {
			a.cfg.Logger.Warn("admin API: refused: too many wrong admin tokens from this address", "remote", r.RemoteAddr, "retryAfter", wait.String())
		}
		a.cfg.AuthFailure(AuthRateLimited)
		w.Header().Set("Retry-After", strconv.FormatInt(lockout.RetryAfter(wait), 10))
		writeError(w, http.StatusTooManyRequests, lockout.Message(wait))
		return
	}
	if !a.token.Matches(given) {
		failures, lock := a.limit.Failed(addr)
		a.cfg.AuthFailure(AuthWrongToken)
		args := []any{"remote", r.RemoteAddr, "failures", failures}
		if lock > 0 {
			args = append(args, "lockedFor", lock.String())
		}
		a.cfg.Logger.Warn("admin API: wrong admin token", args...) // never the token
		writeError(w, http.StatusForbidden, "wrong admin token")
		return
	}
	a.limit.Forgive(addr)
	if a.draining.Load() {
		writeError(w, http.StatusServiceUnavailable, "server is shutting down")
		return
	}
	a.mux.ServeHTTP(w, r)
}

func (a *Handler) createDeletion(w http.ResponseWriter, r *http.Request) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(syncDeadline))
	var req DeletionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if req.UserID == "" {
		writeError(w, http.StatusBadRequest, "userId is required")
		return
	}
	affected, err := a.sources(req.Sources, false)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := a.cfg.Now()
	dr := store.DeletionRequest{ID: message.NewID(), UserID: req.UserID, CreatedAt: now, Sources: affected}
	for _, src := range affected {
		if !a.webhooks(src) {
			continue
		}
		m, err := queued.New(src, webhook.DeleteMessage(req.UserID, dr.ID, now), now, []string{store.DestinationWebhooks})
		if err != nil {
			// The message is ours, from a checked userId: not the client's fault.
			a.internalError(w, "create deletion", err)
			return
		}
		if a.cfg.Route != nil {
			m.Destinations = a.cfg.Route(src, m.Body)
		}
		dr.Messages = append(dr.Messages, m)
	}
	d, err := a.store.CreateDeletion(r.Context(), dr)
	if err != nil {
		a.storeError(w, "create deletion", err)
		return
	}
	for _, m := range dr.Messages {
		a.cfg.Queued(m.Source, 1)
	}
	a.cfg.Logger.Info("deletion request", "id", d.ID, "sources", len(affected), "notified", len(dr.Messages))
	w.Header().Set("Location", "/admin/v1/deletions/"+d.ID)
	writeJSON(w, http.StatusCreated, deletionJSON(d))
}

func (a *Handler) getDeletion(w http.ResponseWriter, r *http.Request) {
	d, err := a.store.Deletion(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no deletion request "+r.PathValue("id"))
		return
	}
	if err != nil {
		a.storeError(w, "read deletion", err)
		return
	}
	writeJSON(w, http.StatusOK, deletionJSON(d))
}

func deletionJSON(d *store.Deletion) Deletion {
	out := Deletion{ID: d.ID, UserID: d.UserID, CreatedAt: message.FormatTime(d.CreatedAt), Done: d.Done, Sources: []DeletionSource{}}
	for _, s := range d.Sources {
		out.Sources = append(out.Sources, DeletionSource(s))
	}
	return out
}

func (a *Handler) sync(kind store.SyncKind) http.HandlerFunc {
	class, removed := audience.ClassAudience, []byte("false")
	if kind == store.KindTrait {
		class, removed = audience.ClassTrait, []byte("null")
	}
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		name := r.PathValue("name")
		key := audience.SnakeCase(name)
		if key == "" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s name %q has no letter or digit to make a trait name of", kind, name))
			return
		}
		sources, err := a.sources(r.URL.Query()["source"], true)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(syncDeadline))
		rc.SetWriteDeadline(time.Now().Add(syncDeadline))
		now := a.cfg.Now()
		res, err := a.store.Sync(r.Context(), store.Sync{
			Kind: kind, Key: key, Name: name, Now: now, Removed: removed,
			Messages: audience.Messages(key, class, sources, now, message.NewID, a.cfg.Route),
		}, audience.Read(http.MaxBytesReader(w, r.Body, MaxSyncBytes), kind == store.KindTrait))
		var tooBig *http.MaxBytesError
		switch {
		case errors.Is(err, audience.ErrList):
			writeError(w, http.StatusBadRequest, "invalid list: "+err.Error()+"; nothing was changed")
			return
		case errors.As(err, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("list over %d bytes", tooBig.Limit))
			return
		case err != nil:
			a.storeError(w, "sync "+string(kind), err)
			return
		}
		if res.Messages > 0 {
			for _, src := range sources {
				a.cfg.Queued(src, res.Messages/len(sources))
			}
		}
		rep := SyncReport{Kind: kind, Name: name, Trait: key, Sources: sources, First: res.First, Added: res.Added,
			Removed: res.Removed, Changed: res.Changed, Unchanged: res.Unchanged, Messages: res.Messages,
			Millis: time.Since(start).Milliseconds()}
		a.cfg.Logger.Info("sync", "kind", kind, "name", name, "trait", key, "added", rep.Added, "removed", rep.Removed,
			"changed", rep.Changed, "unchanged", rep.Unchanged, "messages", rep.Messages, "ms", rep.Millis)
		writeJSON(w, http.StatusOK, rep)
	}
}

// sources checks the named sources (deduplicated, in config order) or, when
// none is named, takes all (with webhooks enabled when needWebhooks).
func (a *Handler) sources(names []string, needWebhooks bool) ([]string, error) {
	var out []string
	for _, src := range a.cfg.Sources {
		if len(names) == 0 && (!needWebhooks || src.Webhooks) || slices.Contains(names, src.Name) {
			out = append(out, src.Name)
		}
	}
	for _, n := range names {
		if !slices.Contains(out, n) {
			return nil, fmt.Errorf("unknown source %q", n)
		}
		if needWebhooks && !a.webhooks(n) {
			return nil, fmt.Errorf("source %q does not have webhooks enabled", n)
		}
	}
	return out, nil
}

func (a *Handler) webhooks(source string) bool {
	for _, s := range a.cfg.Sources {
		if s.Name == source {
			return s.Webhooks
		}
	}
	return false
}

func (a *Handler) storeError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, store.ErrBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "store is busy, retry later")
	case errors.Is(err, store.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "server is shutting down")
	default:
		a.internalError(w, what, err)
	}
}

// internalError answers 500 for a failure on the server's side; the cause
// goes to the log, not to the client.
func (a *Handler) internalError(w http.ResponseWriter, what string, err error) {
	a.cfg.Logger.Error(what, "err", err)
	writeError(w, http.StatusInternalServerError, what+" failed")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode answer")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w.Write(append(b, '\n'))
}
