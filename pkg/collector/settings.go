package collector

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The settings document. Analytics.js reads it from
// {cdnURL}/v1/projects/{writeKey}/settings before it sends anything, and
// the mobile libraries from https://{cdnHost}/projects/{writeKey}/settings
// (cdnHost ends in /v1); both then post to
// integrations["Segment.io"].apiHost. Served by evfwd, it points them back
// at evfwd, so a page or an app needs only its CDN setting changed. It
// enables no other destination, so Analytics.js loads no other code.

// How long a browser, or a CDN, may keep the document. Without
// PublicURL the document names the Host the request gave, which anyone
// can write: a shared cache that kept it would hand every page the host
// one request named, and the pages would post their events there (issue
// 43). So only the page's own browser may keep it then ("private"), and
// it varies on Host besides Origin for a cache told to keep what is
// private all the same. With PublicURL every request gets the same
// document, and a CDN may serve it.
var (
	cachePublic  = []string{"public, max-age=60"}
	cachePrivate = []string{"private, max-age=60"}
	varyHost     = []string{"Origin, Host"}
)

type settingsDoc struct {
	Integrations map[string]segmentIO `json:"integrations"`
	Plan         struct {
		Track    map[string]any `json:"track"`
		Identify map[string]any `json:"identify"`
		Group    map[string]any `json:"group"`
	} `json:"plan"`
	EdgeFunction              struct{}       `json:"edgeFunction"`
	AnalyticsNextEnabled      bool           `json:"analyticsNextEnabled"`
	MiddlewareSettings        struct{}       `json:"middlewareSettings"`
	EnabledMiddleware         struct{}       `json:"enabledMiddleware"`
	Metrics                   settingsMetric `json:"metrics"`
	LegacyVideoPluginsEnabled bool           `json:"legacyVideoPluginsEnabled"`
	RemotePlugins             []struct{}     `json:"remotePlugins"`
}

type segmentIO struct {
	APIKey                string   `json:"apiKey"`
	APIHost               string   `json:"apiHost"`
	Protocol              string   `json:"protocol"`
	UnbundledIntegrations []string `json:"unbundledIntegrations"`
	AddBundledMetadata    bool     `json:"addBundledMetadata"`
	MaybeBundledConfigIDs struct{} `json:"maybeBundledConfigIds"`
}

// settingsMetric turns off Analytics.js's reports about itself (they
// would come to /v1/m, which evfwd accepts and drops); its host is evfwd
// all the same, so that none go to Segment.
type settingsMetric struct {
	SampleRate float64 `json:"sampleRate"`
	Host       string  `json:"host"`
}

// settings serves the document of the source whose write key the path
// names.
func (h *Handler) settings(w http.ResponseWriter, r *http.Request) {
	src := h.keys.source(r.PathValue("writeKey"))
	if src == nil {
		h.unknownKey(r, r.PathValue("writeKey"), http.StatusNotFound)
		writeError(w, http.StatusNotFound, "unknown write key", nil)
		return
	}
	if !h.fromAllowed(w, r, src, false) {
		return
	}
	host, protocol := h.apiHost(r)
	doc := settingsDoc{
		Integrations: map[string]segmentIO{"Segment.io": {
			APIKey: src.WriteKey, APIHost: host, Protocol: protocol,
			UnbundledIntegrations: []string{}, AddBundledMetadata: true,
		}},
		AnalyticsNextEnabled: true,
		Metrics:              settingsMetric{Host: host},
		RemotePlugins:        []struct{}{},
	}
	doc.Plan.Track = map[string]any{"__default": map[string]any{"enabled": true, "integrations": map[string]any{}}}
	doc.Plan.Identify = map[string]any{"__default": map[string]any{"enabled": true}}
	doc.Plan.Group = map[string]any{"__default": map[string]any{"enabled": true}}
	b, _ := json.Marshal(doc)
	w.Header().Set("Content-Type", "application/json")
	if h.public != nil {
		w.Header()["Cache-Control"] = cachePublic
	} else {
		w.Header()["Cache-Control"] = cachePrivate
		w.Header()["Vary"] = varyHost
	}
	w.Write(append(b, '\n'))
}

// apiHost is where the clients are to post, as Segment writes it
// (host[:port]/v1, no scheme) and the protocol apart: from PublicURL when
// evfwd is behind a proxy, else the host the request reached.
func (h *Handler) apiHost(r *http.Request) (host, protocol string) {
	if h.public != nil {
		return h.public.Host + strings.TrimSuffix(h.public.Path, "/") + "/v1", h.public.Scheme
	}
	protocol = "http"
	if r.TLS != nil {
		protocol = "https"
	}
	return r.Host + "/v1", protocol
}

// ParsePublicURL reads public_url: an http or https URL with a host and
// at most a path, under which clients reach /v1.
func ParsePublicURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("public_url %q: want http(s)://host[:port][/path], where clients reach serve", s)
	}
	return u, nil
}
