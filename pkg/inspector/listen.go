package inspector

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
)

// Bounds of what a Listen keeps: the last Keep requests, and no more than
// KeepBytes of their records and bodies (at least the newest one). A
// record over ListBytes is listed and streamed without its body, which is
// then kept as bytes beside it (GET /api/requests/ID/body has it).
const (
	Keep      = 1000
	KeepBytes = 64 << 20
	ListBytes = 1 << 20
)

// ListenConfig describes the listen the inspector shows.
type ListenConfig struct {
	URL       string // where listen answers, with its --path
	ForwardTo string // --forward-to, the default replay target
	Scheme    signature.Scheme
	Secrets   [][]byte
	// Tolerance is the receiver's (0 its default, negative no limit).
	Tolerance time.Duration
	Record    string // the --record file, shown on the page
	// KeepBytes bounds the bytes of records and bodies kept (0: the
	// package's KeepBytes).
	KeepBytes int
	Version   string
	// Client sends replays (default: 30 s timeout, redirects not followed,
	// RootCAs trusted).
	Client *http.Client
	// RootCAs, when set, are the certificates the default Client trusts:
	// with --tls-cert, listen's own, so that a replay to itself verifies.
	RootCAs *x509.CertPool
	Now     func() time.Time
	// Token, when set, is needed by every API call but GET /api/session,
	// as the header Authorization: Bearer TOKEN (never in a URL, where
	// logs and histories keep it; the page reads the event stream with
	// fetch to send it). listen sets it when the inspector is reachable
	// beyond loopback, or when given --ui-token.
	Token string
	// NoLoopbackReplay refuses replays to this machine's loopback
	// addresses (127.0.0.0/8, ::1, 0.0.0.0, ::, localhost), other than to
	// the origins of URL and ForwardTo, which listen's user configured. A
	// name is judged by the address connected to, with the default Client.
	NoLoopbackReplay bool
}

// Listen is the inspector of one `evfwd listen`: feed it each request with
// Add, and serve Handler on the inspector's address.
type Listen struct {
	cfg     ListenConfig
	csrf    string
	hub     *hub
	started time.Time // tells a page that ids started over

	mu      sync.Mutex
	entries []*entry // oldest first
	bytes   int
	lastID  int64
}

// entry is one request as kept: its record line with its id.
type entry struct {
	id      int64
	line    []byte // the record, with "id", no newline; without the body when raw holds it
	shown   []byte // line with its sensitive headers' values hidden (line itself when none)
	raw     []byte // the body's bytes when line is without them
	typ     string
	verdict string
}

// size is what e costs to keep.
func (e *entry) size() int {
	n := len(e.line) + len(e.raw)
	if len(e.shown) > 0 && &e.shown[0] != &e.line[0] {
		n += len(e.shown)
	}
	return n
}

// NewListen returns the inspector for the listen cfg describes.
func NewListen(cfg ListenConfig) *Listen {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Scheme == "" {
		cfg.Scheme = signature.Auto
	}
	if cfg.KeepBytes <= 0 {
		cfg.KeepBytes = KeepBytes
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{
			Timeout:       receiver.DefaultForwardTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		if cfg.RootCAs != nil || cfg.NoLoopbackReplay {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			if cfg.RootCAs != nil {
				tr.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs}
			}
			if cfg.NoLoopbackReplay {
				d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, ControlContext: refuseLoopback}
				tr.DialContext = d.DialContext
			}
			cfg.Client.Transport = tr
		}
	}
	return &Listen{cfg: cfg, csrf: newToken(), hub: newHub(), started: cfg.Now()}
}

// Add keeps r and shows it to the pages watching. It is an
// receiver.Options.OnRequest hook: r's record line and body are copied.
func (l *Listen) Add(r *receiver.Request) {
	var sensitive []string
	for _, name := range SensitiveHeaders {
		if v, ok := r.Header[name]; ok && !(len(v) == 1 && v[0] == receiver.Redacted) {
			sensitive = append(sensitive, name)
		}
	}
	l.add(r.Line(), r.Body, r.Type, string(r.Signature.Verdict), sensitive)
}

// SensitiveHeaders are the request headers that carry credentials: the
// inspector shows their values only when asked (GET
// /api/requests/ID/headers, a click on the page), never in the list, the
// event stream or a request's detail. listen --redact-header keeps a
// value out of everything.
var SensitiveHeaders = []string{"Authorization", "Cookie", "Proxy-Authorization", "X-Api-Key"}

// Hidden stands for a sensitive header's value in what the inspector shows.
const Hidden = "[hidden]"

// sensitiveOf lists the sensitive headers of a record's headers that carry
// a value (a redacted one has none left to hide).
func sensitiveOf(headers map[string]string) []string {
	var names []string
	for _, name := range SensitiveHeaders {
		if v, ok := headers[name]; ok && v != receiver.Redacted {
			names = append(names, name)
		}
	}
	return names
}

// hide returns the record line with the values of the
// sensitive headers replaced by Hidden and their names listed in
// "sensitive", the rest of the line as it was, or line when that fails.
func hide(line []byte, sensitive []string) []byte {
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return line
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return line
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return line
		}
		if key != "headers" {
			continue
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		var headers map[string]string
		if json.Unmarshal(raw, &headers) != nil {
			return line
		}
		for _, name := range sensitive {
			if _, ok := headers[name]; ok {
				headers[name] = Hidden
			}
		}
		masked, _ := json.Marshal(headers)
		names, _ := json.Marshal(sensitive)
		b := make([]byte, 0, len(line)+len(names)+16)
		b = append(b, `{"sensitive":`...)
		b = append(b, names...)
		b = append(b, ',')
		b = append(b, line[1:start]...)
		b = append(b, masked...)
		return append(b, line[end:]...)
	}
	return line
}

// Load keeps the last records of a --record file (as many as Keep and
// KeepBytes allow), in order, before the requests that arrive now. Lines
// that are not records are skipped, as are lines too long to be one.
func (l *Listen) Load(r io.Reader) error {
	// Hold only the last lines while the file streams by.
	var last [][]byte
	held := 0
	err := eachLine(r, receiver.MaxRecordLine, func(line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			return
		}
		last = append(last, bytes.Clone(line))
		held += len(line)
		for len(last) > Keep || held > l.cfg.KeepBytes && len(last) > 1 {
			held -= len(last[0])
			last[0] = nil
			last = last[1:]
		}
	})
	if err != nil {
		return err
	}
	for _, line := range last {
		rec, ok := readRecord(line)
		if !ok {
			continue
		}
		if bytes.Contains(line, legacyMark) {
			// An older evfwd's snake_case keys: the page reads today's.
			line, _ = json.Marshal(rec)
		}
		l.add(line, nil, rec.Type, string(rec.Signature.Verdict), sensitiveOf(rec.Headers))
	}
	return nil
}

// legacyMark is in every record line an evfwd before camelCase wrote.
var legacyMark = []byte(`"received_at"`)

// readRecord reads one record line, in today's form or an older one.
func readRecord(line []byte) (*receiver.Record, bool) {
	if bytes.Contains(line, legacyMark) {
		for rec, err := range receiver.ReadRecords(bytes.NewReader(line)) {
			return rec, err == nil
		}
		return nil, false
	}
	rec := &receiver.Record{}
	return rec, json.Unmarshal(line, rec) == nil && rec.Method != ""
}

// eachLine calls fn with each line of r (without its newline). A line
// longer than limit is skipped, not read into memory.
func eachLine(r io.Reader, limit int, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	skipping := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !skipping {
			if len(line)+len(chunk) > limit+1 {
				skipping, line = true, line[:0]
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if !skipping && len(line) > 0 {
			fn(bytes.TrimSuffix(line, []byte("\n")))
		}
		line, skipping = line[:0], false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// add keeps one record line (a JSON object) and publishes it. body is the
// request's body when the caller has it (else it is read from the line,
// should the line be too large to list). sensitive names the
// SensitiveHeaders it carries.
func (l *Listen) add(line, body []byte, typ, verdict string, sensitive []string) {
	line = bytes.TrimRight(line, "\n")
	l.mu.Lock()
	l.lastID++
	if typ == "" {
		typ = noType
	}
	e := &entry{id: l.lastID, typ: typ, verdict: verdict}
	e.line = withID(e.id, line)
	if len(e.line) > ListBytes {
		if body == nil {
			if rec, ok := readRecord(line); ok {
				body = rec.RawBody()
			}
		}
		e.line, e.raw = withoutBody(e.line), bytes.Clone(body)
		if e.raw == nil {
			e.raw = []byte{}
		}
	}
	e.shown = e.line
	if len(sensitive) > 0 {
		e.shown = hide(e.line, sensitive)
	}
	l.entries = append(l.entries, e)
	l.bytes += e.size()
	for len(l.entries) > Keep || l.bytes > l.cfg.KeepBytes && len(l.entries) > 1 {
		l.bytes -= l.entries[0].size()
		l.entries[0] = nil
		l.entries = l.entries[1:]
	}
	l.mu.Unlock()
	l.hub.publish(eventRequest, e.shown)
}

// withID returns the record object line with "id" as its first key.
func withID(id int64, line []byte) []byte {
	b := make([]byte, 0, len(line)+24)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	if len(line) > 2 {
		b = append(b, ',')
	}
	return append(b, line[1:]...)
}

// withoutBody drops a record's body fields and says so.
func withoutBody(line []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return line
	}
	delete(m, "body")
	delete(m, "bodyRaw")
	delete(m, "bodyBase64")
	m["bodyOmitted"] = json.RawMessage("true")
	b, _ := json.Marshal(m)
	return b
}

// timeMillis is how the API writes times.
const timeMillis = "2006-01-02T15:04:05.000Z07:00"

// SetURL sets the listen's URL (ListenConfig.URL) once its port is open,
// before Handler serves.
func (l *Listen) SetURL(url string) { l.cfg.URL = url }

// Close ends the event streams, so that the server can shut down.
func (l *Listen) Close() { l.hub.close() }

// Handler serves the page and the API for a listener at addr.
func (l *Listen) Handler(addr string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", Assets())
	mux.HandleFunc("GET /api/session", l.session)
	mux.HandleFunc("GET /api/requests", l.list)
	mux.HandleFunc("GET /api/requests/{id}", l.detail)
	mux.HandleFunc("GET /api/requests/{id}/body", l.body)
	mux.HandleFunc("GET /api/requests/{id}/headers", l.headers)
	mux.HandleFunc("GET /api/requests/{id}/request", l.requestFile)
	mux.HandleFunc("GET /api/requests/{id}/curl", l.curl)
	mux.HandleFunc("POST /api/replay", l.replay)
	mux.HandleFunc("GET /api/events", l.hub.serve)
	mux.HandleFunc("/api/", noAPI)
	var h http.Handler = mux
	var exempt func(*http.Request) bool
	if l.cfg.Token != "" {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api/session" && !l.authorized(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="evfwd listen inspector"`)
				writeError(w, http.StatusUnauthorized, "send the inspector's token (listen --ui-token, or the one listen printed) as Authorization: Bearer TOKEN")
				return
			}
			mux.ServeHTTP(w, r)
		})
		// A caller without the token gets its 401, not a CSRF 403.
		exempt = func(r *http.Request) bool { return !l.authorized(r) }
	}
	g := guard(h, newHostCheck(addr), func(*http.Request) string { return l.csrf }, exempt)
	if IsLoopback(addr) {
		return g
	}
	return servedIPsOnly(addr, g)
}

// authorized reports whether r carries the Token (true when there is none).
func (l *Listen) authorized(r *http.Request) bool {
	if l.cfg.Token == "" {
		return true
	}
	auth := r.Header.Get("Authorization")
	return len(auth) > 7 && strings.EqualFold(auth[:7], "Bearer ") && sameToken(strings.TrimSpace(auth[7:]), l.cfg.Token)
}

// IsLoopback reports whether a listener at addr (host:port, as
// net.Listener.Addr().String() gives it) is reachable from this machine
// only: its host is a loopback address or localhost. An address on every
// interface (0.0.0.0, ::, no host) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if isLocalhost(host) {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// isLocalhost reports whether host is localhost or a name under it
// (RFC 6761: they resolve to loopback).
func isLocalhost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// servedIPsOnly is the Host check of an inspector reachable beyond
// loopback: on top of guard's, a Host that is an IP address must be one
// the listener at addr answers on (for 0.0.0.0 or ::, the machine's
// interfaces' addresses), not any.
func servedIPsOnly(addr string, next http.Handler) http.Handler {
	host, _, _ := net.SplitHostPort(addr)
	bound, err := netip.ParseAddr(host)
	everywhere := host == "" || err == nil && bound.IsUnspecified()
	served := func(ip netip.Addr) bool {
		if !everywhere {
			return ip == bound.Unmap()
		}
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return false
		}
		for _, a := range addrs {
			if p, ok := a.(*net.IPNet); ok {
				if own, ok := netip.AddrFromSlice(p.IP); ok && own.Unmap() == ip {
					return true
				}
			}
		}
		return false
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			h = strings.Trim(r.Host, "[]")
		}
		if ip, err := netip.ParseAddr(h); err == nil && !served(ip.WithZone("").Unmap()) {
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Content-Security-Policy", csp)
			writeError(w, http.StatusMisdirectedRequest, "unexpected Host "+quote(r.Host)+": the inspector does not listen on that address")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (l *Listen) session(w http.ResponseWriter, r *http.Request) {
	if !l.authorized(r) {
		writeJSON(w, http.StatusOK, map[string]any{"mode": "listen", "auth": false})
		return
	}
	tol := "no limit"
	if l.cfg.Tolerance >= 0 {
		d := l.cfg.Tolerance
		if d == 0 {
			d = signature.DefaultTolerance
		}
		tol = d.String()
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"mode": "listen", "auth": true, "csrf": l.csrf, "version": l.cfg.Version, "started": l.started.UTC().Format(timeMillis),
		"listen": map[string]any{
			"url": l.cfg.URL, "forwardTo": l.cfg.ForwardTo, "scheme": l.cfg.Scheme,
			"secrets": len(l.cfg.Secrets), "tolerance": tol, "record": l.cfg.Record, "keep": Keep,
		},
		"meta": newListenMeta(),
	})
}

// list answers the kept requests, newest first, narrowed by the query.
func (l *Listen) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	typ, verdict := q.Get("type"), q.Get("verdict")
	// The record holds text JSON-escaped ("&" as \u0026): so must the
	// text sought.
	quoted := rawjson.AppendString(nil, q.Get("q"))
	text := strings.ToLower(string(quoted[1 : len(quoted)-1]))
	limit, err := queryInt(q, "limit", Keep, 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	after, err := queryInt(q, "after", 0, 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	l.mu.Lock()
	var out [][]byte
	for i := len(l.entries) - 1; i >= 0 && int64(len(out)) < limit; i-- {
		e := l.entries[i]
		if e.id <= after {
			break
		}
		switch {
		case typ != "" && e.typ != typ:
			continue
		case verdict != "" && e.verdict != verdict:
			continue
		case text != "" && !containsFold(e.shown, text):
			continue
		}
		out = append(out, e.shown)
	}
	l.mu.Unlock()
	var b bytes.Buffer
	b.WriteString(`{"requests":[`)
	for i, line := range out {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(line)
	}
	b.WriteString("]}\n")
	writeRawJSON(w, b.Bytes())
}

// containsFold reports whether line holds lower (already lower case),
// ignoring ASCII case.
func containsFold(line []byte, lower string) bool {
	return bytes.Contains(bytes.ToLower(line), []byte(lower))
}

// find returns the kept request the path's {id} names, or answers 404.
func (l *Listen) find(w http.ResponseWriter, r *http.Request) (*receiver.Record, *entry) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "request id "+quote(r.PathValue("id"))+": want a number")
		return nil, nil
	}
	l.mu.Lock()
	var e *entry
	if n := len(l.entries); n > 0 {
		// ids are consecutive: the entry is at a known place.
		if i := int(id - l.entries[0].id); i >= 0 && i < n {
			e = l.entries[i]
		}
	}
	l.mu.Unlock()
	if e == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no request %d: the inspector keeps the last %d", id, Keep))
		return nil, nil
	}
	rec := &receiver.Record{}
	if err := json.Unmarshal(e.line, rec); err != nil {
		writeError(w, http.StatusInternalServerError, "request "+strconv.FormatInt(id, 10)+": "+err.Error())
		return nil, nil
	}
	if e.raw != nil {
		rec.Body, rec.BodyRaw, rec.BodyBase64 = nil, nil, e.raw // what RawBody answers
	}
	return rec, e
}

func (l *Listen) detail(w http.ResponseWriter, r *http.Request) {
	rec, e := l.find(w, r)
	if rec == nil {
		return
	}
	check, _ := json.Marshal(l.explain(rec))
	var b bytes.Buffer
	b.WriteString(`{"request":`)
	b.Write(e.shown)
	b.WriteString(`,"check":`)
	b.Write(check)
	b.WriteString("}\n")
	writeRawJSON(w, b.Bytes())
}

func (l *Listen) body(w http.ResponseWriter, r *http.Request) {
	rec, _ := l.find(w, r)
	if rec == nil {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(rec.RawBody())
}

// headers answers a request's headers with the values of the sensitive
// ones: the page asks for them when its user clicks to see one.
func (l *Listen) headers(w http.ResponseWriter, r *http.Request) {
	rec, _ := l.find(w, r)
	if rec == nil {
		return
	}
	headers := rec.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"headers": headers})
}
