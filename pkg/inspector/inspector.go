// Package inspector is the local page in the browser that `evfwd listen
// --ui` and `evfwd serve --ui` serve, and the HTTP API behind it
// (docs/INSPECTOR.md): the requests a listen received, live, with their
// signature checks, replay and diff; the deliveries a serve made, with
// their attempts, retries and a per-minute chart per endpoint.
//
// The page (ui/) is embedded in the binary and loads nothing from the
// network. The API trusts nobody it need not: every request must name the
// address served as its Host (no DNS rebinding). listen's POSTs carry a
// CSRF token that only a page of its origin can read; serve's calls carry
// a session (or the admin token) as a header, never a cookie, which no
// page of another origin, nor of another port, can make a browser send.
package inspector

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/evfwd/evfwd/internal/hostcheck"
)

//go:embed ui
var uiFiles embed.FS

// Assets serves the page: index.html at /, the rest under /assets/.
func Assets() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp) // also set by guard; Assets may be served alone
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.URL.Path != "/" && !strings.HasPrefix(r.URL.Path, "/assets/") {
			http.NotFound(w, r)
			return
		}
		r2 := *r
		r2.URL = new(*r.URL)
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/assets")
		if t := assetType(r2.URL.Path); t != "" {
			h.Set("Content-Type", t)
		}
		files.ServeHTTP(w, &r2)
	})
}

// assetType is the Content-Type of a file of the page, by its extension:
// set here, not looked up in the system's MIME table, which may give .js
// another type or none, since a browser runs a module script only when
// its type is JavaScript's (and nosniff forbids guessing).
func assetType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return ""
}

// csp lets the page run only its own script and style (its ES modules,
// loaded and imported from this origin), and be framed by no one; on the API's answers it keeps a browser from running any of them.
const csp = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// newToken returns a fresh random token for CSRF and sessions.
func newToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameToken compares two tokens in constant time.
func sameToken(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// CSRFHeader carries the session's CSRF token on every POST.
const CSRFHeader = "X-CSRF-Token"

// hostCheck says whether a request's Host names the listener at addr (as
// net.Listener.Addr().String() gives it): the same port, and for host an
// IP address, localhost, or addr's own host. A DNS name other than those
// is what a rebinding attack sends (a page of evil.example whose name
// now points at 127.0.0.1), so it is refused. The logic is
// internal/hostcheck's, which serve's /metrics, /healthz and admin API use
// too.
type hostCheck struct{ hostcheck.Check }

func newHostCheck(addr string) hostCheck {
	// No port in the Host: the scheme's, which for this plain-HTTP server is 80.
	return hostCheck{hostcheck.New(addr, "80")}
}

func (c hostCheck) allows(hostport string) bool { return c.Allows(hostport) }

// DialAddr is where a browser on this host reaches a listener at addr:
// loopback when it listens on every address (0.0.0.0 or ::).
func DialAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// guard refuses requests that name another Host (421), and POSTs without
// the CSRF token csrf gives for the request (403) unless exempt says so.
func guard(next http.Handler, hosts hostCheck, csrf func(*http.Request) string, exempt func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", csp)
		if !hosts.allows(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, "unexpected Host "+quote(r.Host)+": open the inspector at the address evfwd printed")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && (exempt == nil || !exempt(r)) {
			want := csrf(r)
			if want == "" || !sameToken(r.Header.Get(CSRFHeader), want) {
				writeError(w, http.StatusForbidden, "missing or wrong "+CSRFHeader+" header (GET /api/session gives it)")
				return
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				writeError(w, http.StatusUnsupportedMediaType, "send the body as Content-Type: application/json")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeStatusJSON(w, status, append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	writeStatusJSON(w, status, append(b, '\n'))
}

// noAPI answers a call the API does not have.
func noAPI(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "no inspector API "+r.Method+" "+r.URL.Path)
}

// writeRawJSON answers 200 with b, JSON already encoded.
func writeRawJSON(w http.ResponseWriter, b []byte) { writeStatusJSON(w, http.StatusOK, b) }

func writeStatusJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

// queryInt reads a query parameter that is a number from least, def when
// absent.
func queryInt(q url.Values, name string, def, least int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < least {
		return 0, fmt.Errorf("%s %s: want a number from %d", name, quote(v), least)
	}
	return n, nil
}

// decodeBody reads a small JSON request body into v, refusing unknown
// fields so that a typo is an error rather than a default.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "request body: more than one JSON value")
		return false
	}
	return true
}
