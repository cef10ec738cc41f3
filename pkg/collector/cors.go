package collector

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// CORS. Analytics.js posts from the page's origin with an Authorization
// header, so the browser asks first (a preflight) and then lets the page
// read only answers that name its origin. The collection API uses no
// cookies, so answering any origin opens nothing a script could not
// already do with the (public) write key; a source narrows it with
// allowed_origins, checked once the write key says which source it is.

// preflightMaxAge is how long a browser may keep a preflight's answer:
// Chromium's cap, two hours.
const preflightMaxAge = "7200"

// allowHeaders are the request headers a page may send, beside those it
// names in its preflight: what Analytics.js sends (X-Retry-Count on its
// retries) and a gzip body.
const allowHeaders = "Content-Type, Authorization, Content-Encoding, X-Retry-Count"

// withOrigin lets the page at the request's origin read the answer,
// errors included, and the Retry-After of a 429 or 503, which a
// cross-origin script cannot see unless it is exposed.
// Every answer varies with the origin, so that a cache (of the settings
// document) keeps one per page.
// The keys are canonical: assigned, not Set.
func withOrigin(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["Vary"] = varyOrigin
	origin := r.Header["Origin"]
	if len(origin) == 0 || origin[0] == "" {
		return
	}
	h["Access-Control-Allow-Origin"] = origin[:1]
	h["Access-Control-Expose-Headers"] = exposeHeaders
}

var (
	varyOrigin    = []string{"Origin"}
	exposeHeaders = []string{"Retry-After"}
)

// preflight answers a browser's OPTIONS before its POST or GET.
func preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", requestedHeaders(r.Header.Values("Access-Control-Request-Headers")))
	h.Set("Access-Control-Max-Age", preflightMaxAge)
	w.WriteHeader(http.StatusNoContent)
}

// requestedHeaders is allowHeaders plus the header names a preflight asks
// for (a page may add its own through Analytics.js's headers setting);
// only names, never anything else the request wrote there.
func requestedHeaders(asked []string) string {
	out := allowHeaders
	for _, v := range asked {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); isToken(name) && !slices.Contains(allowed, strings.ToLower(name)) {
				out += ", " + name
			}
		}
	}
	return out
}

// allowed are allowHeaders' names in lower case, as preflights send them.
var allowed = strings.Split(strings.ToLower(strings.ReplaceAll(allowHeaders, " ", "")), ",")

func isToken(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// allows says whether a request from origin may reach src: always without
// an Origin header (not a browser) or without a list.
func (s *Source) allows(origin string) bool {
	if origin == "" || len(s.AllowedOrigins) == 0 {
		return true
	}
	return slices.Contains(s.AllowedOrigins, "*") || slices.Contains(s.AllowedOrigins, strings.ToLower(origin))
}

// refuseOrigin answers 403 to a page whose origin src does not allow, and
// returns what it said: the origin, the source by its name (never its
// write key, which the settings path carries), and the setting that
// would allow it.
func refuseOrigin(w http.ResponseWriter, src *Source, origin string) error {
	err := fmt.Errorf("origin %q is not allowed for source %q: list it in that source's allowed_origins to allow it", origin, src.Name)
	writeError(w, http.StatusForbidden, err.Error(), nil)
	return err
}

// maxReported bounds the keys a reported remembers: pages from more
// origins, or with more unknown write keys, than that are not logged one
// by one.
const maxReported = 256

// reported remembers which keys (a refused source and origin, an unknown
// write key) were logged and when, so that a page that keeps posting is
// reported once, or once every every (0: once for good).
type reported[K comparable] struct {
	every time.Duration
	mu    sync.Mutex
	last  map[K]time.Time
}

// due says whether key is to be reported at now, and if so notes it.
func (r *reported[K]) due(key K, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at, ok := r.last[key]; ok && (r.every == 0 || now.Sub(at) < r.every) {
		return false
	}
	if len(r.last) >= maxReported && r.every > 0 {
		for k, at := range r.last {
			if now.Sub(at) >= r.every {
				delete(r.last, k)
			}
		}
	}
	if len(r.last) >= maxReported {
		return false
	}
	if r.last == nil {
		r.last = map[K]time.Time{}
	}
	r.last[key] = now
	return true
}

// CheckOrigin reads one entry of allowed_origins: "*", or an origin as a
// browser sends it, scheme://host[:port] with nothing after. It returns the
// form requests are compared with (lower case).
func CheckOrigin(s string) (string, error) {
	if s == "*" {
		return s, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "/") {
		return "", fmt.Errorf("allowed_origins: %q is not an origin: want scheme://host[:port], such as https://www.example.com, or *", s)
	}
	return strings.ToLower(s), nil
}
