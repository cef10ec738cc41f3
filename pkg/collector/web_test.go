package collector_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// The web and mobile libraries' side of the collection API, over real
// HTTP on loopback: the short paths, CORS, the settings document, and what
// a web or mobile source adds to a message.

const (
	siteKey   = "wk_site"
	appKey    = "wk_app"
	serverKey = "wk_server"
	pageFrom  = "https://www.example.com"
)

func newWebServer(t *testing.T, st *memStore, cfg collector.Config) *httptest.Server {
	t.Helper()
	cfg.Sources = []collector.Source{
		{Name: "site", WriteKey: siteKey, Kind: collector.KindWeb, AllowedOrigins: []string{pageFrom}, Destinations: []string{store.DestinationWebhooks}},
		{Name: "app", WriteKey: appKey, Kind: collector.KindMobile, Destinations: []string{store.DestinationWebhooks}},
		{Name: "backend", WriteKey: serverKey, Destinations: []string{store.DestinationWebhooks}},
	}
	cfg.Store, cfg.Now = st, func() time.Time { return now }
	h, err := collector.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// call is one request as a library sends it.
type call struct {
	method, path string
	body         string
	header       http.Header // Content-Type only when given here
	gzip         bool
	chunked      bool // no Content-Length: Transfer-Encoding: chunked
}

func (c call) send(t *testing.T, base string) (*http.Response, string) {
	t.Helper()
	body := []byte(c.body)
	if c.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	var rd io.Reader = bytes.NewReader(body)
	if c.chunked {
		rd = io.MultiReader(rd) // an unknown length
	}
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	r, err := http.NewRequest(method, base+c.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range c.header {
		r.Header[k] = vs
	}
	if c.gzip {
		r.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func basic(key string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(key+":")) }

func TestShortPathsEveryContentType(t *testing.T) {
	st := &memStore{}
	srv := newWebServer(t, st, collector.Config{})
	one := map[string]string{
		"/v1/i": `{"userId":"u","traits":{"a":1}}`,
		"/v1/t": `{"userId":"u","event":"E"}`,
		"/v1/p": `{"anonymousId":"a","name":"Home"}`,
		"/v1/s": `{"anonymousId":"a","name":"Cart"}`,
		"/v1/g": `{"userId":"u","groupId":"g"}`,
		"/v1/a": `{"userId":"u","previousId":"p"}`,
		"/v1/b": `{"batch":[{"type":"track","userId":"u","event":"E"},{"type":"screen","anonymousId":"a"}]}`,
	}
	types := map[string][]string{"/v1/i": {"identify"}, "/v1/t": {"track"}, "/v1/p": {"page"}, "/v1/s": {"screen"}, "/v1/g": {"group"}, "/v1/a": {"alias"}, "/v1/b": {"track", "screen"}}
	for _, form := range []struct {
		name        string
		contentType string
		inBody      bool // write key in the body, no Authorization
		gzip        bool
		chunked     bool
	}{
		{"text/plain, Basic (Analytics.js)", "text/plain", false, false, false},
		{"json charset, Basic", "application/json; charset=utf-8", false, false, false},
		{"no content type, key in body", "", true, false, false},
		{"text/plain gzip chunked, key in body (analytics-kotlin)", "text/plain", true, true, true},
		{"json gzip, Basic", "application/json", false, true, false},
	} {
		for path, body := range one {
			st.msgs = nil
			h := http.Header{}
			if form.contentType != "" {
				h.Set("Content-Type", form.contentType)
			}
			if form.inBody {
				body = strings.Replace(body, "{", `{"writeKey":"`+appKey+`",`, 1)
			} else {
				h.Set("Authorization", basic(appKey))
			}
			resp, got := call{path: path, body: body, header: h, gzip: form.gzip, chunked: form.chunked}.send(t, srv.URL)
			if resp.StatusCode != 200 || got != "{\"success\":true}\n" {
				t.Errorf("%s %s: %d %s", form.name, path, resp.StatusCode, got)
				continue
			}
			var gotTypes []string
			for _, m := range st.msgs {
				gotTypes = append(gotTypes, m.Type)
				if m.Source != "app" || bytes.Contains(m.Body, []byte("writeKey")) {
					t.Errorf("%s %s: stored %s from %s", form.name, path, m.Body, m.Source)
				}
			}
			if diff := cmp.Diff(types[path], gotTypes); diff != "" {
				t.Errorf("%s %s: types (-want +got)\n%s", form.name, path, diff)
			}
		}
	}
	// The path fixes the type, as /v1/track does.
	resp, got := call{path: "/v1/t", body: `{"type":"identify","userId":"u"}`, header: http.Header{"Authorization": {basic(appKey)}}}.send(t, srv.URL)
	if resp.StatusCode != 400 || !strings.Contains(got, `"field":"type"`) {
		t.Errorf("identify on /v1/t: %d %s", resp.StatusCode, got)
	}
}

func TestMetricsAcceptedNotStored(t *testing.T) {
	st := &memStore{}
	srv := newWebServer(t, st, collector.Config{})
	body := `{"series":[{"type":"Counter","metric":"analytics_js.invoke.track","value":1,"tags":{"library":"analytics.js"}}]}`
	resp, got := call{path: "/v1/m", body: body, header: http.Header{"Content-Type": {"text/plain"}, "Origin": {pageFrom}}}.send(t, srv.URL)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != pageFrom {
		t.Errorf("/v1/m: %d %s %v", resp.StatusCode, got, resp.Header)
	}
	if st.calls != 0 {
		t.Errorf("/v1/m reached the store %d times", st.calls)
	}
}

func TestCORS(t *testing.T) {
	st := &memStore{}
	var mu sync.Mutex
	var reported []string
	srv := newWebServer(t, st, collector.Config{OnError: func(status int, err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, fmt.Sprint(status, " ", err))
	}})
	t.Run("preflight", func(t *testing.T) {
		for _, path := range []string{"/v1/t", "/v1/b", "/v1/batch", "/v1/identify", "/v1/m", "/v1/projects/" + siteKey + "/settings"} {
			resp, _ := call{method: http.MethodOptions, path: path, header: http.Header{
				"Origin": {pageFrom}, "Access-Control-Request-Method": {"POST"},
				"Access-Control-Request-Headers": {"authorization,content-type,x-retry-count,x-my-header,bad header,type"},
			}}.send(t, srv.URL)
			h := resp.Header
			if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != pageFrom || h.Get("Access-Control-Max-Age") == "" ||
				!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
				t.Errorf("%s: %d %v", path, resp.StatusCode, h)
			}
			allowed := h.Get("Access-Control-Allow-Headers")
			if got, want := strings.Count(strings.ToLower(allowed), "content-type"), 1; got != want {
				t.Errorf("%s: Allow-Headers %q names Content-Type %d times", path, allowed, got)
			}
			for _, want := range []string{"Content-Type", "Authorization", "X-Retry-Count", "x-my-header", ", type"} {
				if !strings.Contains(allowed, want) {
					t.Errorf("%s: Allow-Headers %q lacks %s", path, allowed, want)
				}
			}
			if strings.Contains(allowed, "bad") {
				t.Errorf("%s: Allow-Headers %q repeats a name that is no token", path, allowed)
			}
		}
		if resp, _ := (call{method: http.MethodOptions, path: "/v1/nope", header: http.Header{"Origin": {pageFrom}}}).send(t, srv.URL); resp.StatusCode != 404 {
			t.Errorf("preflight of an unknown path: %d", resp.StatusCode)
		}
	})
	track := `{"userId":"u","event":"E"}`
	for _, tt := range []struct {
		name, origin, key, body string
		status                  int
		inError                 string
	}{
		{"allowed origin", pageFrom, siteKey, track, 200, ""},
		{"no Origin: not a browser", "", siteKey, track, 200, ""},
		{"refused origin, named", "https://evil.example", siteKey, track, 403,
			`origin \"https://evil.example\" is not allowed for source \"site\": list it in that source's allowed_origins to allow it`},
		{"refused origin, key in the body", "https://evil.example", "", `{"writeKey":"` + siteKey + `","userId":"u","event":"E"}`, 403, "evil.example"},
		{"a source without a list takes any origin", "https://evil.example", appKey, track, 200, ""},
		{"unknown write key, readable", pageFrom, "wk_nope", track, 401, "unknown write key"},
		{"invalid message, readable", pageFrom, siteKey, `{"event":"E"}`, 400, "userId"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st.msgs = nil
			h := http.Header{"Content-Type": {"text/plain"}}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			if tt.key != "" {
				h.Set("Authorization", basic(tt.key))
			}
			resp, got := call{path: "/v1/t", body: tt.body, header: h}.send(t, srv.URL)
			if resp.StatusCode != tt.status || !strings.Contains(got, tt.inError) {
				t.Errorf("%d %s, want %d with %q", resp.StatusCode, got, tt.status, tt.inError)
			}
			if tt.origin != "" && (resp.Header.Get("Access-Control-Allow-Origin") != tt.origin || resp.Header.Get("Access-Control-Expose-Headers") != "Retry-After") {
				t.Errorf("origin headers: %v", resp.Header)
			}
			if stored := len(st.msgs); (tt.status == 200) != (stored == 1) {
				t.Errorf("stored %d messages", stored)
			}
		})
	}
	// A page that keeps posting from a refused origin is logged once; an
	// unknown key too (unknownkey_test.go).
	mu.Lock()
	defer mu.Unlock()
	want := []string{`403 origin "https://evil.example" is not allowed for source "site": list it in that source's allowed_origins to allow it`,
		`401 unknown write key **** from origin "https://www.example.com", client 127.0.0.1 (reported once a minute per key)`}
	if diff := cmp.Diff(want, reported); diff != "" {
		t.Errorf("reported (-want +got)\n%s", diff)
	}
}

func TestSettingsDocument(t *testing.T) {
	type settings struct {
		Integrations map[string]struct {
			APIKey   string `json:"apiKey"`
			APIHost  string `json:"apiHost"`
			Protocol string `json:"protocol"`
		} `json:"integrations"`
		Plan    map[string]any `json:"plan"`
		Metrics struct {
			SampleRate float64 `json:"sampleRate"`
			Host       string  `json:"host"`
		} `json:"metrics"`
		RemotePlugins []any `json:"remotePlugins"`
	}
	get := func(t *testing.T, base, path string, h http.Header) (int, settings, http.Header) {
		t.Helper()
		resp, body := call{method: http.MethodGet, path: path, header: h}.send(t, base)
		var s settings
		if resp.StatusCode == 200 {
			if err := json.Unmarshal([]byte(body), &s); err != nil {
				t.Fatalf("%s: %v in %s", path, err, body)
			}
		}
		return resp.StatusCode, s, resp.Header
	}
	st := &memStore{}
	srv := newWebServer(t, st, collector.Config{})
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, path := range []string{"/v1/projects/" + siteKey + "/settings", "/projects/" + appKey + "/settings"} {
		code, s, h := get(t, srv.URL, path, http.Header{"Origin": {pageFrom}})
		seg, ok := s.Integrations["Segment.io"]
		if code != 200 || !ok || seg.APIHost != host+"/v1" || seg.Protocol != "http" || s.Metrics.Host != host+"/v1" || s.RemotePlugins == nil || s.Plan == nil {
			t.Errorf("%s: %d %+v", path, code, s)
		}
		if !strings.Contains(path, seg.APIKey) {
			t.Errorf("%s: apiKey %q", path, seg.APIKey)
		}
		// It names the Host the request gave: no shared cache may keep it
		// (issue 43).
		if h.Get("Cache-Control") != "private, max-age=60" || h.Get("Access-Control-Allow-Origin") != pageFrom || !cmp.Equal(h.Values("Vary"), []string{"Origin, Host"}) {
			t.Errorf("%s: headers %v", path, h)
		}
	}
	// Any Host a request names is what its document points at, so that
	// answer is for the one client only.
	poison, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/projects/"+siteKey+"/settings", nil)
	if err != nil {
		t.Fatal(err)
	}
	poison.Host = "evil.example"
	if resp, err := http.DefaultClient.Do(poison); err != nil {
		t.Fatal(err)
	} else {
		var s settings
		json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if seg := s.Integrations["Segment.io"]; seg.APIHost != "evil.example/v1" || resp.Header.Get("Cache-Control") != "private, max-age=60" || resp.Header.Get("Vary") != "Origin, Host" {
			t.Errorf("Host evil.example: %+v, %v", seg, resp.Header)
		}
	}
	if code, _, _ := get(t, srv.URL, "/v1/projects/wk_nope/settings", nil); code != 404 {
		t.Errorf("unknown key: %d", code)
	}
	// A refused page learns the source's name and the setting, never the
	// write key its path carries.
	resp, body := call{method: http.MethodGet, path: "/v1/projects/" + siteKey + "/settings", header: http.Header{"Origin": {"https://evil.example"}}}.send(t, srv.URL)
	if resp.StatusCode != 403 || !strings.Contains(body, `source \"site\"`) || !strings.Contains(body, "allowed_origins") || strings.Contains(body, siteKey) {
		t.Errorf("refused origin: %d %s", resp.StatusCode, body)
	}

	// With public_url every request gets the same document: a CDN may
	// keep it.
	behind := newWebServer(t, st, collector.Config{PublicURL: "https://collect.example.com/evfwd/"})
	_, s, h := get(t, behind.URL, "/v1/projects/"+appKey+"/settings", http.Header{"Origin": {pageFrom}})
	if seg := s.Integrations["Segment.io"]; seg.APIHost != "collect.example.com/evfwd/v1" || seg.Protocol != "https" {
		t.Errorf("behind a proxy: %+v", seg)
	}
	if h.Get("Cache-Control") != "public, max-age=60" || !cmp.Equal(h.Values("Vary"), []string{"Origin"}) {
		t.Errorf("behind a proxy: headers %v", h)
	}

	tlsSrv := httptest.NewUnstartedServer(srv.Config.Handler)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	resp, err = tlsSrv.Client().Get(tlsSrv.URL + "/v1/projects/" + appKey + "/settings")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	if seg := s.Integrations["Segment.io"]; seg.Protocol != "https" || seg.APIHost != strings.TrimPrefix(tlsSrv.URL, "https://")+"/v1" {
		t.Errorf("over TLS: %+v", seg)
	}
}

// TestDeviceSkewAndAddress: a web or mobile source's messages get the
// client's address and their device clock's error taken out; a server
// source's are kept as sent.
func TestDeviceSkewAndAddress(t *testing.T) {
	// The device's clock is an hour and 3.5 s fast; the event happened 5 s
	// before the request left.
	sent := now.Add(time.Hour + 3500*time.Millisecond)
	event := sent.Add(-5 * time.Second)
	ts := func(t time.Time) string { return t.Format("2006-01-02T15:04:05.000Z") }
	corrected := ts(now.Add(-5 * time.Second))
	batch := `{"batch":[` +
		`{"type":"track","event":"E","userId":"u","timestamp":"` + ts(event) + `","context":{"library":{"name":"analytics-kotlin"}}},` +
		`{"type":"track","event":"Own sentAt","userId":"u","timestamp":"` + ts(event) + `","sentAt":"` + ts(event.Add(2*time.Second)) + `"},` +
		`{"type":"track","event":"Own ip","userId":"u","timestamp":"` + ts(event) + `","context":{"ip":"192.0.2.44"}},` +
		`{"type":"track","event":"No timestamp","userId":"u"},` +
		`{"type":"track","event":"Corrected before","userId":"u","timestamp":"` + ts(event) + `","originalTimestamp":"2020-01-01T00:00:00.000Z"}` +
		`],"sentAt":"` + ts(sent) + `","writeKey":"%s"}`
	type got struct{ Event, Timestamp, OriginalTimestamp, IP string }
	read := func(msgs []store.Message) []got {
		var out []got
		for _, m := range msgs {
			o, err := rawjson.ParseObject(m.Body)
			if err != nil {
				t.Fatal(err)
			}
			var g got
			g.Event, _ = o.GetString("event")
			g.Timestamp, _ = o.GetString("timestamp")
			g.OriginalTimestamp, _ = o.GetString("originalTimestamp")
			if c, ok := o.Get("context"); ok {
				co, _ := rawjson.ParseObject(c)
				g.IP, _ = co.GetString("ip")
			}
			out = append(out, g)
		}
		return out
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, tt := range []struct {
		name    string
		key     string
		trusted []netip.Prefix
		want    []got
	}{
		{"mobile", appKey, nil, []got{
			{"E", corrected, ts(event), "127.0.0.1"},
			{"Own sentAt", ts(now.Add(-2 * time.Second)), ts(event), "127.0.0.1"},
			{"Own ip", corrected, ts(event), "192.0.2.44"},
			{"No timestamp", ts(now), "", "127.0.0.1"},
			{"Corrected before", ts(event), "2020-01-01T00:00:00.000Z", "127.0.0.1"},
		}},
		{"mobile behind a trusted proxy", appKey, trusted, []got{
			{"E", corrected, ts(event), "198.51.100.7"},
			{"Own sentAt", ts(now.Add(-2 * time.Second)), ts(event), "198.51.100.7"},
			{"Own ip", corrected, ts(event), "192.0.2.44"},
			{"No timestamp", ts(now), "", "198.51.100.7"},
			{"Corrected before", ts(event), "2020-01-01T00:00:00.000Z", "198.51.100.7"},
		}},
		{"server: kept as sent", serverKey, trusted, []got{
			{"E", ts(event), "", ""},
			{"Own sentAt", ts(event), "", ""},
			{"Own ip", ts(event), "", "192.0.2.44"},
			{"No timestamp", ts(now), "", ""},
			{"Corrected before", ts(event), "2020-01-01T00:00:00.000Z", ""},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &memStore{}
			srv := newWebServer(t, st, collector.Config{TrustedProxies: tt.trusted})
			h := http.Header{"Content-Type": {"text/plain"}, "X-Forwarded-For": {"6.6.6.6, 198.51.100.7"}}
			resp, body := call{path: "/v1/b", body: strings.Replace(batch, "%s", tt.key, 1), header: h}.send(t, srv.URL)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if diff := cmp.Diff(tt.want, read(st.msgs)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
