package inspector

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
)

// ExcerptBytes is how much of a replay's answer the inspector shows.
const ExcerptBytes = 4 << 10

// notSent are the recorded headers a copy of the request leaves out: the
// new connection and body set their own.
var notSent = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Te": true, "Trailer": true, "Upgrade": true, "Proxy-Connection": true,
	"Accept-Encoding": true, // the answer is shown as it comes, not decoded
}

// sentHeaders returns rec's headers a copy sends, in name order.
func sentHeaders(rec *receiver.Record) []string {
	var names []string
	for k := range rec.Headers {
		if !notSent[http.CanonicalHeaderKey(k)] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// target is where a copy of rec goes by default: the --forward-to URL, or
// listen's own address at the path rec came to.
func (l *Listen) target(rec *receiver.Record) string {
	if l.cfg.ForwardTo != "" {
		return l.cfg.ForwardTo
	}
	u, err := url.Parse(l.cfg.URL)
	if err != nil {
		return l.cfg.URL
	}
	u.Path, u.RawQuery = rec.Path, rec.Query
	return u.String()
}

// ReplayRequest is the body of POST /api/replay.
type ReplayRequest struct {
	ID     int64  `json:"id"`
	URL    string `json:"url,omitempty"`
	Resign bool   `json:"resign,omitempty"`
}

// ReplayResult is what came back from a replay.
type ReplayResult struct {
	URL       string            `json:"url"`
	Signed    signature.Scheme  `json:"signed,omitempty"` // the scheme it was signed afresh with
	Status    int               `json:"status"`
	LatencyMS float64           `json:"latencyMs"`
	Headers   map[string]string `json:"headers,omitempty"`
	Body      string            `json:"body,omitempty"`
	Error     string            `json:"error,omitempty"`
}

func (l *Listen) replay(w http.ResponseWriter, r *http.Request) {
	var req ReplayRequest
	if !decodeBody(w, r, &req) {
		return
	}
	r.SetPathValue("id", strconv.FormatInt(req.ID, 10))
	rec, _ := l.find(w, r)
	if rec == nil {
		return
	}
	target := req.URL
	if target == "" {
		target = l.target(rec)
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		writeError(w, http.StatusBadRequest, "url "+quote(target)+": want an http(s) URL")
		return
	}
	ctx := r.Context()
	if l.cfg.NoLoopbackReplay && !l.configured(u) {
		if loopbackHost(u.Hostname()) {
			writeError(w, http.StatusBadRequest, "url "+quote(target)+": "+errLoopbackReplay.Error())
			return
		}
		ctx = context.WithValue(ctx, refuseLoopbackKey{}, true)
	}
	body := rec.RawBody()
	out, err := http.NewRequestWithContext(ctx, rec.Method, target, bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for _, k := range sentHeaders(rec) {
		out.Header[http.CanonicalHeaderKey(k)] = []string{rec.Headers[k]}
	}
	res := ReplayResult{URL: target}
	if req.Resign {
		if res.Signed, err = l.resign(out.Header, rec, body); err != nil {
			writeError(w, http.StatusBadRequest, "resign: "+err.Error())
			return
		}
	}
	start := l.cfg.Now()
	resp, err := l.cfg.Client.Do(out)
	if errors.Is(err, errLoopbackReplay) {
		writeError(w, http.StatusBadRequest, "url "+quote(target)+": "+errLoopbackReplay.Error())
		return
	}
	if err != nil {
		res.LatencyMS = millis(l.cfg.Now().Sub(start).Seconds())
		res.Error = err.Error()
		if r.Context().Err() != nil {
			return // the page went away
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, ExcerptBytes))
	resp.Body.Close()
	res.LatencyMS = millis(l.cfg.Now().Sub(start).Seconds())
	res.Status = resp.StatusCode
	res.Headers = map[string]string{}
	for k, v := range resp.Header {
		res.Headers[k] = strings.Join(v, ", ")
	}
	res.Body = strings.ToValidUTF8(string(excerpt), "\uFFFD")
	writeJSON(w, http.StatusOK, res)
}

// errLoopbackReplay refuses a replay, under ListenConfig.NoLoopbackReplay,
// that would reach this machine's loopback addresses.
var errLoopbackReplay = errors.New("replays to this machine's loopback addresses are refused while the inspector is reachable beyond loopback (listen --allow-replay-local allows them)")

// refuseLoopbackKey marks, in a replay's context, a replay that may not
// connect to a loopback address.
type refuseLoopbackKey struct{}

// refuseLoopback is the replay client's dial check: a replay marked so is
// refused a connection to a loopback or unspecified address, whatever name
// led there.
func refuseLoopback(ctx context.Context, network, address string, _ syscall.RawConn) error {
	if ctx.Value(refuseLoopbackKey{}) == nil {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if loopbackHost(host) {
		return errLoopbackReplay
	}
	return nil
}

// loopbackHost reports whether host (a URL's, or an address dialled) names
// this machine by loopback: localhost, 127.0.0.0/8, ::1, or the
// unspecified address (a connection to 0.0.0.0 reaches this machine).
func loopbackHost(host string) bool {
	if isLocalhost(host) {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return false
	}
	ip = ip.WithZone("").Unmap()
	return ip.IsLoopback() || ip.IsUnspecified()
}

// configured reports whether u is at the origin of listen's URL or of
// --forward-to: targets listen's user chose, which a replay may reach
// wherever they are.
func (l *Listen) configured(u *url.URL) bool {
	for _, c := range []string{l.cfg.URL, l.cfg.ForwardTo} {
		if c == "" {
			continue
		}
		if cu, err := url.Parse(c); err == nil && sameURLOrigin(cu, u) {
			return true
		}
	}
	return false
}

func sameURLOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "https" {
			return "443"
		}
		return "80"
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func millis(seconds float64) float64 { return float64(int64(seconds*1e6)) / 1e3 }

// resign replaces h's signature headers with fresh ones made with the
// listen's first secret, under the scheme rec was signed with (else
// --scheme, else segment), timestamped now; a Standard Webhooks id stays.
func (l *Listen) resign(h http.Header, rec *receiver.Record, body []byte) (signature.Scheme, error) {
	if len(l.cfg.Secrets) == 0 {
		return "", fmt.Errorf("listen has no secret to sign with (give --secret or --secret-file)")
	}
	s := rec.Signature.Scheme
	if s == "" || s == signature.Auto {
		s = l.cfg.Scheme
	}
	if s == "" || s == signature.Auto {
		s = signature.Segment
	}
	secrets := l.cfg.Secrets[:1]
	if err := signature.CheckSecrets(s, secrets); err != nil {
		return "", fmt.Errorf("%s: %w", s, err)
	}
	id := h.Get(signature.HeaderStandardID)
	if id == "" {
		id = h.Get(signature.HeaderSvixID)
	}
	fields, err := signature.SignFields(s, secrets, body, signature.Params{Timestamp: l.cfg.Now(), ID: id})
	if err != nil {
		return "", err
	}
	for _, other := range signature.Schemes {
		for _, name := range signedHeaders(other, h) {
			h.Del(name)
		}
	}
	for _, f := range fields {
		h.Add(f.Name, f.Value)
	}
	return s, nil
}

// requestFile answers the request as an HTTP/1.1 message, the form
// `evfwd verify --request FILE` reads.
func (l *Listen) requestFile(w http.ResponseWriter, r *http.Request) {
	rec, e := l.find(w, r)
	if rec == nil {
		return
	}
	body := rec.RawBody()
	target := (&url.URL{Path: rec.Path}).EscapedPath()
	if rec.Query != "" {
		target += "?" + rec.Query
	}
	host := "localhost"
	if u, err := url.Parse(l.cfg.URL); err == nil && u.Host != "" {
		host = u.Host
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", rec.Method, target, host)
	for _, k := range sentHeaders(rec) {
		fmt.Fprintf(&b, "%s: %s\r\n", k, rec.Headers[k])
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	b.Write(body)
	w.Header().Set("Content-Type", "message/http")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="request-%d.http"`, e.id))
	w.Write(b.Bytes())
}

// curl answers a shell command that sends the request again, headers and
// body exact, to ?url= or where a replay goes by default.
func (l *Listen) curl(w http.ResponseWriter, r *http.Request) {
	rec, _ := l.find(w, r)
	if rec == nil {
		return
	}
	target := r.URL.Query().Get("url")
	if target == "" {
		target = l.target(rec)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, CurlCommand(rec, target))
}

// CurlCommand is a POSIX shell command that sends rec to target with curl:
// the body goes through printf (and base64 -d when it is not text), so
// that its bytes, a final newline included, arrive as they were signed.
func CurlCommand(rec *receiver.Record, target string) string {
	body := rec.RawBody()
	var b strings.Builder
	if utf8.Valid(body) && bytes.IndexByte(body, 0) < 0 {
		b.WriteString("printf %s " + shellQuote(string(body)) + " |\n")
	} else {
		b.WriteString("printf %s " + shellQuote(base64.StdEncoding.EncodeToString(body)) + " | base64 -d |\n")
	}
	// --globoff: a URL's [] and {} are the URL's, not curl's patterns.
	b.WriteString("curl -sS --globoff -X " + shellQuote(rec.Method) + " " + shellQuote(target))
	for _, k := range sentHeaders(rec) {
		h := k + ": " + rec.Headers[k]
		if strings.TrimSpace(rec.Headers[k]) == "" {
			h = k + ";" // curl's way to send a header empty; "K:" removes it
		}
		b.WriteString(" \\\n  -H " + shellQuote(h))
	}
	if rec.Header("Content-Type") == "" {
		// Without one curl would say the body is a form.
		b.WriteString(" \\\n  -H 'Content-Type:'")
	}
	b.WriteString(" \\\n  --data-binary @-\n")
	return b.String()
}

// shellQuote quotes s for a POSIX shell: in single quotes, each quote
// inside closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
