package serve_test

// What Segment's mobile libraries send, read from their sources, and the
// tests below that replay it against a real serve (TLS, SQLite, webhooks
// to a test endpoint).
//
// analytics-kotlin, segmentio/analytics-kotlin at a14649b (release 1.25.0;
// core/.../Constants.kt:4 still says LIBRARY_VERSION 1.24.1), paths under
// core/src/main/java/com/segment/analytics/kotlin/core/:
//
//   - Upload: HTTPClient.kt:166-173 opens https://{apiHost}/b (apiHost
//     default api.segment.io/v1, Constants.kt:5), with Content-Type
//     text/plain and Content-Encoding gzip, and asks for chunked streaming;
//     HTTPClient.kt:178-196 adds User-Agent analytics-kotlin/{version}.
//     HTTPClient.kt:95-103 wraps the output in gzip because of that header;
//     any status >= 300 is an error (:109). There is no Authorization
//     header: the write key is only in the body. EventPipeline.kt:229-241
//     copies the finished batch file into the request as it is, and adds
//     X-Retry-Count on retries only (:233-236).
//   - Since 1.23.0 (commit 95aa864, "Http 2 client") the connection is
//     utilities/OkHttpURLConnection.kt: the body is buffered and handed to
//     OkHttp as a byte array (:76-83), so it goes with a Content-Length, the
//     chunked mode is ignored (:186-196), and OkHttp prefers HTTP/2
//     (HTTPClient.kt:149-153). Before 1.23 it was java.net's connection:
//     HTTP/1.1 with Transfer-Encoding: chunked.
//   - Batch file: utilities/StorageImpl.kt:37-40 and :155-176:
//     {"batch":[ev,ev,...],"sentAt":"...","writeKey":"..."}, no whitespace,
//     events joined by a bare comma. Times (utilities/DateTimeUtils.kt:10,29)
//     are UTC with milliseconds and a Z: 2024-05-01T12:59:41.207Z.
//   - Events: platform/EventPipeline.kt:128-137 encodes with defaults
//     (utilities/JSON.kt:40) and drops a blank userId and empty traits.
//     kotlinx.serialization writes constructor properties, then body ones
//     (Events.kt:163-343): e.g. track is properties, event, type, messageId,
//     anonymousId, integrations, context, userId, _metadata, timestamp.
//     messageId is a lower-case UUID (Events.kt:89). There is no page call.
//   - Context: platform/plugins/ContextPlugin.kt:40-50 puts library
//     {name analytics-kotlin, version} and instanceId; on Android
//     android/.../plugins/AndroidContextPlugin.kt:187-259 adds app, device
//     (id, manufacturer, model, name, type android), os, screen (density
//     is a float), network, locale, userAgent, timezone. No ip.
//   - Settings: HTTPClient.kt:155-164 GETs https://{cdnHost}/projects/
//     {writeKey}/settings (cdnHost default cdn-settings.segment.com/v1),
//     with Content-Type application/json; charset=utf-8 even on a GET, and
//     anything but 200 is a failure. Settings.kt:18-27 decodes leniently
//     (unknown keys ignored) into integrations, plan, edgeFunction,
//     middlewareSettings, metrics, consentSettings, autoInstrumentation,
//     all optional but each, when present, must be an object (not null).
//     platform/plugins/SegmentDestination.kt:19-24 then decodes
//     integrations["Segment.io"]: apiKey is required (no default: a
//     document without it fails), apiHost and httpConfig are optional;
//     :106-114 switches the upload host to apiHost. Telemetry.kt:349 reads
//     metrics.sampleRate as a number.
//
// analytics-swift, segmentio/analytics-swift at c9a0d63 (Version.swift:18:
// 1.9.4), paths under Sources/Segment/:
//
//   - Upload: Utilities/Networking/HTTPClient.swift:57-61 builds
//     https://{host}{path}; :71-116 posts /b on apiHost (default
//     api.segment.io/v1, :23) with uploadTask(fromFile:), so the length is
//     known (Content-Length, HTTP/2 where the server offers it; URLSession
//     adds Accept and Accept-Language); :283-295 sets Content-Type
//     application/json; charset=utf-8, User-Agent analytics-ios/{version}
//     and Accept-Encoding gzip. No Content-Encoding (the body is plain), no
//     Authorization (authorizationHeaderForWriteKey, :266, is never
//     called). Statuses 1..<300 are success (:184-187). X-Retry-Count on
//     retries (:101-107).
//   - Batch file: Utilities/Storage/Types/DirectoryStore.swift:159 starts it
//     with `{ "batch": [` (spaces included), :77-82 writes each event on
//     its own line, the second and later with a leading comma, and
//     :191-193 ends it with `],"sentAt":"...","writeKey":"..."}`; every
//     write ends in a newline (Utilities/Storage/Utilities/LineStream.swift
//     :105-107). MemoryStore.swift:114-115 uses the same envelope.
//   - Events: Types.swift:300-311 gives an upper-case UUID messageId and
//     Date().iso8601() (Utilities/iso8601.swift:10-21: UTC, milliseconds,
//     Z). They are written by JSONSafeEncoder (Utilities/JSON.swift:33-45),
//     a copy of swift-corelibs-foundation's JSONEncoder: "/" is escaped as
//     "\/", and members come in the order of Swift dictionaries, which
//     differs from process to process, so a server must not care about
//     member order. nil members are left out.
//   - Context: Plugins/Context.swift:26-153: library {name analytics-swift,
//     version}, app, device (manufacturer Apple, type ios, model, name, id),
//     os, screen (width, height), locale, timezone, network, userAgent,
//     instanceId. No ip.
//   - Settings: HTTPClient.swift:201-242 GETs https://{cdnHost}/projects/
//     {writeKey}/settings (cdnHost default cdn-settings.segment.com/v1) with
//     the same headers as the upload; a status above 300 is a failure.
//     Settings.swift:37-46 decodes every member with try?, so nothing is
//     required; Plugins/SegmentDestination.swift:72 uses
//     integrations["Segment.io"].apiHost when it is a non-empty string.
//
// Both libraries ignore "protocol" and always speak https, so the service
// here runs with TLS (a CA of the test's own), as an app would need it to.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/evfwd/evfwd/internal/tlscert/tlscerttest"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

const (
	kotlinUA    = "analytics-kotlin/1.24.1" // OkHttp, HTTP/2, 1.23 and later
	kotlinOldUA = "analytics-kotlin/1.22.0" // java.net, HTTP/1.1 chunked
	swiftUA     = "analytics-ios/1.9.4"
)

// mobileService is a service over TLS with two sources, "android"
// (wk_android) and "ios" (wk_ios), whose webhooks go to hook, on a clock
// that stays at t0: every message is received at t0.
type mobileService struct {
	*harness
	ca   *tlscerttest.CA
	hook *webhooktest.Receiver
	host string // host:port, as an app would configure it
}

// startMobile runs the service; device makes both sources kind mobile,
// else they are server sources (the default).
func startMobile(t *testing.T, device bool, publicURL string) *mobileService {
	t.Helper()
	ca := tlscerttest.NewCA(t)
	certFile, keyFile := ca.Files(t, 1)
	hk := newHook(t)
	dest := serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: hk.URL}}}}
	sources := []serve.Source{
		{Name: "android", WriteKey: "wk_android", Webhooks: dest},
		{Name: "ios", WriteKey: "wk_ios", Webhooks: dest},
	}
	if device {
		for i := range sources {
			sources[i].Kind = "mobile"
		}
	}
	cfg := serve.Config{
		Addr:      "127.0.0.1:0",
		Store:     "sqlite://" + filepath.Join(t.TempDir(), "evfwd.db"),
		Sources:   sources,
		TLSCert:   certFile,
		TLSKey:    keyFile,
		PublicURL: publicURL,
	}
	h := run(t, cfg, serve.Options{Now: webhooktest.NewClock(t0).Now, Poll: 5 * time.Millisecond})
	if !strings.HasPrefix(h.url, "https://") {
		t.Fatalf("service URL %s, want https", h.url)
	}
	return &mobileService{harness: h, ca: ca, hook: hk, host: strings.TrimPrefix(h.url, "https://")}
}

// client trusts the test's CA; h2 lets it speak HTTP/2 as OkHttp and
// URLSession do.
func (m *mobileService) client(h2 bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:    &tls.Config{RootCAs: m.ca.Pool},
		ForceAttemptHTTP2:  h2,
		DisableCompression: true, // the libraries' own Accept-Encoding is set by hand
	}}
}

// wireRecorder is a client whose TLS connections keep a copy of the
// plain bytes written, so a test can see the request as it went: headers
// and chunk framing. It speaks HTTP/1.1 only.
type wireRecorder struct {
	mu    sync.Mutex
	wrote bytes.Buffer
}

func (w *wireRecorder) client(m *mobileService) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			host, _, _ := net.SplitHostPort(addr)
			c := tls.Client(raw, &tls.Config{RootCAs: m.ca.Pool, ServerName: host, NextProtos: []string{"http/1.1"}})
			if err := c.HandshakeContext(ctx); err != nil {
				raw.Close()
				return nil, err
			}
			return recordingConn{Conn: c, w: w}, nil
		},
		DisableCompression: true,
	}}
}

func (w *wireRecorder) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.wrote.Bytes())
}

type recordingConn struct {
	net.Conn
	w *wireRecorder
}

func (c recordingConn) Write(p []byte) (int, error) {
	c.w.mu.Lock()
	c.w.wrote.Write(p)
	c.w.mu.Unlock()
	return c.Conn.Write(p)
}

// fixture reads testdata/mobile/name: a batch file exactly as the library
// leaves it on disk before it uploads it.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "mobile", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Settings, as each library reads them.

// settingsAnswer is a settings response, its body decompressed if the
// service chose gzip for the Accept-Encoding the libraries send.
type settingsAnswer struct {
	status int
	header http.Header
	body   []byte
}

func getSettings(t *testing.T, c *http.Client, url, userAgent string, extra map[string]string) settingsAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8") // both send it, on a GET
	req.Header.Set("User-Agent", userAgent)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if r, err = gzip.NewReader(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return settingsAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

// kotlinSettings fetches the settings as analytics-kotlin does (its
// cdnHost setting is cdnHost) and returns the host it will upload to.
func kotlinSettings(t *testing.T, c *http.Client, cdnHost, writeKey string) (apiHost string, a settingsAnswer) {
	t.Helper()
	a = getSettings(t, c, "https://"+cdnHost+"/projects/"+writeKey+"/settings", kotlinUA,
		map[string]string{"Accept-Encoding": "gzip"}) // OkHttp's own
	if a.status != http.StatusOK { // RequestFactory.settings: 200 or nothing
		t.Fatalf("kotlin settings: %d %s", a.status, a.body)
	}
	var doc kotlinSettingsDoc
	if err := json.Unmarshal(a.body, &doc); err != nil {
		t.Fatalf("kotlin cannot decode the settings (%v):\n%s", err, a.body)
	}
	seg, ok := doc.Integrations["Segment.io"]
	if !ok {
		t.Fatalf("kotlin settings without integrations[\"Segment.io\"]: events would go to api.segment.io:\n%s", a.body)
	}
	var s kotlinSegmentSettings
	if err := json.Unmarshal(seg, &s); err != nil {
		t.Fatalf("kotlin cannot decode integrations[\"Segment.io\"] (%v): %s", err, seg)
	}
	if !s.APIKey.set {
		t.Fatalf("integrations[\"Segment.io\"] has no apiKey, which kotlin requires: %s", seg)
	}
	if s.APIKey.s != writeKey {
		t.Errorf("apiKey %q, want %q", s.APIKey.s, writeKey)
	}
	if s.APIHost == nil {
		return "api.segment.io/v1", a // the library keeps its default
	}
	return *s.APIHost, a
}

// kotlinSettingsDoc mirrors analytics-kotlin's Settings: every member may
// be absent, but one that is present must be an object.
type kotlinSettingsDoc struct {
	Integrations        map[string]json.RawMessage `json:"integrations"`
	Plan                jsonObject                 `json:"plan"`
	EdgeFunction        jsonObject                 `json:"edgeFunction"`
	MiddlewareSettings  jsonObject                 `json:"middlewareSettings"`
	Metrics             kotlinMetrics              `json:"metrics"`
	ConsentSettings     jsonObject                 `json:"consentSettings"`
	AutoInstrumentation jsonObject                 `json:"autoInstrumentation"`
}

func (d *kotlinSettingsDoc) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil || all == nil {
		return fmt.Errorf("settings are not an object: %v", err)
	}
	if v, ok := all["integrations"]; ok {
		if err := (&jsonObject{}).UnmarshalJSON(v); err != nil {
			return fmt.Errorf("integrations: %w", err)
		}
	}
	type plain kotlinSettingsDoc
	return json.Unmarshal(b, (*plain)(d))
}

// jsonObject is a kotlinx JsonObject member without a default of null: a
// present member must be an object.
type jsonObject struct{ m map[string]json.RawMessage }

func (o *jsonObject) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		return fmt.Errorf("%.40s is not an object", b)
	}
	return json.Unmarshal(b, &o.m)
}

// kotlinMetrics is metrics, whose sampleRate Telemetry reads as a number.
type kotlinMetrics struct{ jsonObject }

func (m *kotlinMetrics) UnmarshalJSON(b []byte) error {
	if err := m.jsonObject.UnmarshalJSON(b); err != nil {
		return err
	}
	if r, ok := m.m["sampleRate"]; ok {
		if _, err := strconv.ParseFloat(strings.Trim(string(r), `"`), 64); err != nil {
			return fmt.Errorf("metrics.sampleRate %s is not a number", r)
		}
	}
	return nil
}

// kotlinSegmentSettings mirrors SegmentSettings: apiKey required,
// apiHost optional (null allowed), httpConfig an object when present.
type kotlinSegmentSettings struct {
	APIKey     requiredString `json:"apiKey"`
	APIHost    *string        `json:"apiHost"`
	HTTPConfig *jsonObject    `json:"httpConfig"`
}

type requiredString struct {
	s   string
	set bool
}

func (r *requiredString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return errors.New("null for a String")
	}
	r.set = true
	return json.Unmarshal(b, &r.s)
}

// swiftSettings fetches the settings as analytics-swift does and returns
// the host it will upload to.
func swiftSettings(t *testing.T, c *http.Client, cdnHost, writeKey string) (apiHost string, a settingsAnswer) {
	t.Helper()
	a = getSettings(t, c, "https://"+cdnHost+"/projects/"+writeKey+"/settings", swiftUA,
		map[string]string{"Accept-Encoding": "gzip", "Accept": "*/*", "Accept-Language": "en-US,en;q=0.9"})
	if a.status > 300 { // settingsFor
		t.Fatalf("swift settings: %d %s", a.status, a.body)
	}
	var doc swiftSettingsDoc
	if err := json.Unmarshal(a.body, &doc); err != nil {
		t.Fatalf("swift cannot decode the settings (%v):\n%s", err, a.body)
	}
	seg, _ := doc.Integrations["Segment.io"].(map[string]any)
	host, _ := seg["apiHost"].(string)
	if host == "" {
		t.Fatalf("integrations[\"Segment.io\"].apiHost is not a non-empty string; swift keeps api.segment.io/v1:\n%s", a.body)
	}
	return host, a
}

// swiftSettingsDoc mirrors analytics-swift's Settings: each member is
// decoded with try?, so only the document being an object matters; the
// destination reads integrations["Segment.io"]["apiHost"] as a String.
type swiftSettingsDoc struct {
	Integrations map[string]any
}

func (d *swiftSettingsDoc) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil || all == nil {
		return fmt.Errorf("settings are not an object: %v", err)
	}
	json.Unmarshal(all["integrations"], &d.Integrations) // try?
	return nil
}

// Uploads, as each library makes them.

// kotlinUpload posts body (a batch file) to https://{apiHost}/b as
// analytics-kotlin does: gzip, text/plain, no Authorization. With
// chunked it is the java.net connection of 1.22 and before (HTTP/1.1,
// Transfer-Encoding: chunked, the body written as it is compressed);
// without, OkHttp's of 1.23 and later (HTTP/2, Content-Length).
func kotlinUpload(t *testing.T, c *http.Client, apiHost string, body []byte, chunked bool) *http.Response {
	t.Helper()
	var req *http.Request
	var err error
	if chunked {
		pr, pw := io.Pipe()
		go func() {
			// Three pieces, each flushed: several chunks, as a stream
			// copied through GZIPOutputStream makes them.
			zw := gzip.NewWriter(pw)
			n := len(body) / 3
			for _, part := range [][]byte{body[:n], body[n : 2*n], body[2*n:]} {
				zw.Write(part)
				zw.Flush()
			}
			pw.CloseWithError(zw.Close())
		}()
		req, err = http.NewRequest(http.MethodPost, "https://"+apiHost+"/b", pr)
		req.Header.Set("User-Agent", kotlinOldUA)
		req.Header.Set("Accept", "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2") // the JDK's default (on a JVM)
	} else {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(body)
		zw.Close()
		req, err = http.NewRequest(http.MethodPost, "https://"+apiHost+"/b", bytes.NewReader(gz.Bytes()))
		req.Header.Set("User-Agent", kotlinUA)
		req.Header.Set("Accept-Encoding", "gzip") // OkHttp's own
	}
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// swiftUpload posts body (a batch file) to https://{apiHost}/b as
// analytics-swift's uploadTask(fromFile:) does: plain JSON with its
// length, no Authorization.
func swiftUpload(t *testing.T, c *http.Client, apiHost string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://"+apiHost+"/b", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", swiftUA)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("Accept", "*/*")
	req.Header.Set("Accept-Language", "en-US,en;q=0.9")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// accepted checks the service answered a mobile upload with success.
func accepted(t *testing.T, resp *http.Response, proto string) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	if resp.Proto != proto {
		t.Errorf("upload went over %s, want %s", resp.Proto, proto)
	}
}

// Webhooks.

// receivedAt is the service's clock at every request.
const receivedAt = "2024-05-01T12:00:00.000Z"

// sentBatch is a batch file, its events kept as sent.
type sentBatch struct {
	Batch  []json.RawMessage `json:"batch"`
	SentAt string            `json:"sentAt"`
}

func parseBatch(t *testing.T, body []byte) sentBatch {
	t.Helper()
	var b sentBatch
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// ms formats a time as timestamps are on the webhook wire.
func ms(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// checkWebhooks waits for one webhook per event of body and compares
// each, field by field, with what was sent. device says the source is
// client-side: context.ip is the loopback client's, and timestamp is the
// device's moved by its clock's error (sentAt against receivedAt), the
// device's own kept as originalTimestamp. Otherwise both are untouched.
// want, when set, gives the corrected timestamp of each messageId.
func checkWebhooks(t *testing.T, m *mobileService, body []byte, device bool, want map[string]string) {
	t.Helper()
	sent := parseBatch(t, body)
	n := len(sent.Batch)
	waitFor(t, fmt.Sprintf("%d webhooks", n), func() bool { return len(m.hook.Requests()) >= n })
	waitFor(t, "deliveries delivered", func() bool {
		return len(deliveries(t, m.harness, store.Filter{Status: store.Delivered})) == n
	})
	got := map[string]webhooktest.Request{}
	for _, r := range m.hook.Requests() {
		var id struct{ MessageID string }
		if err := json.Unmarshal(r.Body, &id); err != nil {
			t.Fatalf("webhook body: %v\n%s", err, r.Body)
		}
		if _, dup := got[id.MessageID]; dup {
			t.Errorf("messageId %s delivered twice", id.MessageID)
		}
		got[id.MessageID] = r
	}
	if len(got) != n {
		t.Errorf("%d webhooks, want %d", len(got), n)
	}
	sentAtDevice, err := time.Parse(time.RFC3339Nano, sent.SentAt)
	if err != nil {
		t.Fatal(err)
	}
	rcv, _ := time.Parse(time.RFC3339Nano, receivedAt)
	for i, ev := range sent.Batch {
		var msg map[string]any
		dec := json.NewDecoder(bytes.NewReader(ev))
		dec.UseNumber()
		if err := dec.Decode(&msg); err != nil {
			t.Fatal(err)
		}
		id, typ := msg["messageId"].(string), msg["type"].(string)
		r, ok := got[id]
		if !ok {
			t.Errorf("event %d (%s %s): no webhook", i, typ, id)
			continue
		}
		if r.Header.Get("X-Signature") != sign(r.Body) {
			t.Errorf("%s: X-Signature %q, independent HMAC %q", id, r.Header.Get("X-Signature"), sign(r.Body))
		}
		if prefix := `{"type":"` + typ + `","version":1,`; !bytes.HasPrefix(r.Body, []byte(prefix)) {
			t.Errorf("%s: body starts %.40s, want %s", id, r.Body, prefix)
		}

		// The expected webhook: the event as sent, plus version and
		// receivedAt; alias renames its ids (DESIGN §4). _metadata (the
		// library's note to Segment on its bundled destinations) stays
		// behind, as on Segment.
		exp := map[string]any{}
		for k, v := range msg {
			exp[k] = v
		}
		delete(exp, "_metadata")
		exp["version"] = json.Number("1")
		exp["receivedAt"] = receivedAt
		ts := msg["timestamp"].(string)
		if device {
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				t.Fatal(err)
			}
			exp["originalTimestamp"] = ts
			exp["timestamp"] = ms(rcv.Add(at.Sub(sentAtDevice)))
			if w, ok := want[id]; ok && w != exp["timestamp"] {
				t.Fatalf("test table: %s corrects to %s, table says %s", id, exp["timestamp"], w)
			}
			ctx := map[string]any{"ip": "127.0.0.1"}
			for k, v := range msg["context"].(map[string]any) {
				ctx[k] = v
			}
			exp["context"] = ctx
		}
		if typ == "alias" {
			exp["User ID"], exp["Previous ID"] = exp["userId"], exp["previousId"]
			delete(exp, "userId")
			delete(exp, "previousId")
		}
		var hookMsg map[string]any
		dec = json.NewDecoder(bytes.NewReader(r.Body))
		dec.UseNumber()
		if err := dec.Decode(&hookMsg); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(exp, hookMsg); diff != "" {
			t.Errorf("%s %s: webhook differs from what was sent (-want +got):\n%s\nbody %s", typ, id, diff, r.Body)
		}

		// Byte for byte: every member but the rewritten ones keeps the
		// bytes the library wrote ("\/", 15.0, 2.625, "Zoë").
		var sentRaw, hookRaw, sentCtx, hookCtx map[string]json.RawMessage
		json.Unmarshal(ev, &sentRaw)
		json.Unmarshal(r.Body, &hookRaw)
		for k, v := range sentRaw {
			hk := k
			switch {
			case k == "timestamp" && device:
				continue
			case k == "_metadata":
				if w, ok := hookRaw[k]; ok {
					t.Errorf("%s: _metadata forwarded: %s", id, w)
				}
				continue
			case k == "context":
				json.Unmarshal(v, &sentCtx)
				json.Unmarshal(hookRaw[k], &hookCtx)
				for ck, cv := range sentCtx {
					if !bytes.Equal(cv, hookCtx[ck]) {
						t.Errorf("%s: context.%s is %s on the webhook, sent %s", id, ck, hookCtx[ck], cv)
					}
				}
				continue
			case typ == "alias" && k == "userId":
				hk = "User ID"
			case typ == "alias" && k == "previousId":
				hk = "Previous ID"
			}
			if !bytes.Equal(v, hookRaw[hk]) {
				t.Errorf("%s: %s is %s on the webhook, sent %s", id, hk, hookRaw[hk], v)
			}
		}
		if device && string(hookRaw["originalTimestamp"]) != strconv.Quote(ts) {
			t.Errorf("%s: originalTimestamp %s, sent timestamp %q", id, hookRaw["originalTimestamp"], ts)
		}
	}
}

// The device clocks in the fixtures are an hour fast: the service
// receives at 12:00:00.000 what the device stamped around 13:00.
// kotlinCorrected is each kotlin event's time on the service's clock:
// receivedAt - (sentAt 13:00:02.250 - timestamp).
var kotlinCorrected = map[string]string{
	"9a8f6c1e-2b3d-4e5f-8a7b-6c5d4e3f2a10": "2024-05-01T11:59:27.754Z", // 12:59:30.004, 32.246 s before sentAt
	"1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9": "2024-05-01T11:59:38.957Z", // 12:59:41.207
	"7c6b5a49-3827-4615-9a0b-c1d2e3f4a5b6": "2024-05-01T11:59:50.630Z", // 12:59:52.880
	"e4d3c2b1-a09f-4e8d-9c7b-6a5f4e3d2c1b": "2024-05-01T11:59:55.765Z", // 12:59:58.015
	"a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d": "2024-05-01T11:59:57.181Z", // 12:59:59.431
	"0f9e8d7c-6b5a-4493-a827-1605f4e3d2c1": "2024-05-01T11:59:58.752Z", // 13:00:01.002
}

// TestMobileKotlinUpload replays analytics-kotlin: settings from the
// service, then the batch file to the apiHost they name, in the forms of
// both connection implementations the library has had.
func TestMobileKotlinUpload(t *testing.T) {
	t.Parallel()
	body := fixture(t, "kotlin-batch.json")
	t.Run("1.22 java.net HTTP/1.1 chunked", func(t *testing.T) {
		m := startMobile(t, true, "")
		c := m.client(false)
		defer c.CloseIdleConnections()
		apiHost, _ := kotlinSettings(t, c, m.host+"/v1", "wk_android")
		if apiHost != m.host+"/v1" {
			t.Fatalf("settings apiHost %q, want %q", apiHost, m.host+"/v1")
		}
		var wire wireRecorder
		wc := wire.client(m)
		defer wc.CloseIdleConnections()
		accepted(t, kotlinUpload(t, wc, apiHost, body, true), "HTTP/1.1")
		head, rest, _ := bytes.Cut(wire.bytes(), []byte("\r\n\r\n"))
		head = append(head, "\r\n"...)
		for _, want := range []string{
			"POST /v1/b HTTP/1.1\r\n", "\r\nTransfer-Encoding: chunked", "\r\nContent-Encoding: gzip",
			"\r\nContent-Type: text/plain\r\n", "\r\nUser-Agent: " + kotlinOldUA,
		} {
			if !strings.Contains(string(head), want) {
				t.Errorf("request head lacks %q:\n%s", want, head)
			}
		}
		if strings.Contains(string(head), "Authorization") || strings.Contains(string(head), "Content-Length") {
			t.Errorf("request head has Authorization or Content-Length:\n%s", head)
		}
		if chunks := countChunks(t, rest); chunks < 2 {
			t.Errorf("body went in %d chunks, want several", chunks)
		}
		checkWebhooks(t, m, body, true, kotlinCorrected)
	})
	t.Run("1.23+ OkHttp HTTP/2", func(t *testing.T) {
		m := startMobile(t, true, "")
		c := m.client(true)
		defer c.CloseIdleConnections()
		apiHost, _ := kotlinSettings(t, c, m.host+"/v1", "wk_android")
		accepted(t, kotlinUpload(t, c, apiHost, body, false), "HTTP/2.0")
		checkWebhooks(t, m, body, true, kotlinCorrected)
	})
}

// countChunks reads a chunked body and counts its data chunks.
func countChunks(t *testing.T, b []byte) int {
	t.Helper()
	r := bufio.NewReader(bytes.NewReader(b))
	n := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("chunked body: %v after %d chunks", err, n)
		}
		size, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(line, ";", 2)[0]), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q: %v", line, err)
		}
		if size == 0 {
			return n
		}
		n++
		if _, err := r.Discard(int(size) + 2); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMobileSwiftUpload replays analytics-swift: settings from the
// service, then the batch file as DirectoryStore wrote it (with its
// spaces and newlines, members in dictionary order, "/" escaped).
func TestMobileSwiftUpload(t *testing.T) {
	t.Parallel()
	body := fixture(t, "swift-batch.json")
	m := startMobile(t, true, "")
	c := m.client(true)
	defer c.CloseIdleConnections()
	apiHost, _ := swiftSettings(t, c, m.host+"/v1", "wk_ios")
	if apiHost != m.host+"/v1" {
		t.Fatalf("settings apiHost %q, want %q", apiHost, m.host+"/v1")
	}
	accepted(t, swiftUpload(t, c, apiHost, body), "HTTP/2.0")
	checkWebhooks(t, m, body, true, nil)
}

// TestMobileServerSourceKeepsTimestamps sends the same uploads to server
// sources: timestamps stay the device's, and neither originalTimestamp
// nor context.ip is added (checkWebhooks compares every field).
func TestMobileServerSourceKeepsTimestamps(t *testing.T) {
	t.Parallel()
	for _, lib := range []string{"kotlin", "swift"} {
		t.Run(lib, func(t *testing.T) {
			m := startMobile(t, false, "")
			c := m.client(true)
			defer c.CloseIdleConnections()
			body := fixture(t, lib+"-batch.json")
			if lib == "kotlin" {
				accepted(t, kotlinUpload(t, c, m.host+"/v1", body, false), "HTTP/2.0")
			} else {
				accepted(t, swiftUpload(t, c, m.host+"/v1", body), "HTTP/2.0")
			}
			checkWebhooks(t, m, body, false, nil)
		})
	}
}

// TestMobileSettings fetches the settings document as each library does,
// at the cdnHost an app sets (host:port/v1, and host:port for a cdnHost
// without /v1), decodes it as each library would, and checks it sends
// them back to the service; an unknown write key gets 404 and the answer
// may be cached only briefly.
func TestMobileSettings(t *testing.T) {
	t.Parallel()
	m := startMobile(t, true, "")
	c := m.client(true)
	defer c.CloseIdleConnections()
	maxAge := regexp.MustCompile(`max-age=(\d+)`)
	for _, cdnHost := range []string{m.host + "/v1", m.host} {
		for _, lib := range []struct {
			name  string
			fetch func(*testing.T, *http.Client, string, string) (string, settingsAnswer)
			key   string
		}{{"kotlin", kotlinSettings, "wk_android"}, {"swift", swiftSettings, "wk_ios"}} {
			t.Run(lib.name+" cdnHost="+strings.Replace(cdnHost, m.host, "host:port", 1), func(t *testing.T) {
				apiHost, a := lib.fetch(t, c, cdnHost, lib.key)
				if apiHost != m.host+"/v1" {
					t.Errorf("apiHost %q, want %q: the upload would go to https://%s/b", apiHost, m.host+"/v1", apiHost)
				}
				var doc struct {
					Integrations map[string]struct{ APIKey, APIHost, Protocol string }
				}
				json.Unmarshal(a.body, &doc)
				if seg := doc.Integrations["Segment.io"]; seg.Protocol != "https" || seg.APIKey != lib.key {
					t.Errorf(`integrations["Segment.io"] %+v, want protocol https, apiKey %s`, seg, lib.key)
				}
				if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Errorf("Content-Type %q", ct)
				}
				cc := a.header.Get("Cache-Control")
				if sm := maxAge.FindStringSubmatch(cc); sm == nil {
					t.Errorf("Cache-Control %q has no max-age", cc)
				} else if age, _ := strconv.Atoi(sm[1]); age <= 0 || age > 3600 {
					t.Errorf("Cache-Control %q: want a short max-age", cc)
				}
				unknown := getSettings(t, c, "https://"+cdnHost+"/projects/wk_nope/settings", kotlinUA, nil)
				if unknown.status != http.StatusNotFound {
					t.Errorf("unknown write key: %d %s, want 404", unknown.status, unknown.body)
				}
			})
		}
	}
	// Behind a proxy, public_url names the host the apps reach.
	p := startMobile(t, true, "https://collect.example.com")
	pc := p.client(true)
	defer pc.CloseIdleConnections()
	for _, fetch := range []func(*testing.T, *http.Client, string, string) (string, settingsAnswer){kotlinSettings, swiftSettings} {
		if apiHost, _ := fetch(t, pc, p.host+"/v1", "wk_android"); apiHost != "collect.example.com/v1" {
			t.Errorf("with public_url: apiHost %q, want collect.example.com/v1", apiHost)
		}
	}
}
