package serve

import (
	"errors"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/storeurl"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// Check is Validate plus the form of the store setting, as New would read
// it, without opening or creating the store (`evfwd serve --check`), and
// the TLS certificate and key, which it loads as New would.
func (c *Config) Check() error {
	err := c.Validate()
	if serr := storeurl.Check(c.Store); serr != nil {
		err = errors.Join(err, serr)
	}
	if _, terr := c.loadTLS(); terr != nil {
		err = errors.Join(err, terr)
	}
	return err
}

// masked is what shows of a secret that is set.
const masked = "****"

// Masked returns a copy of c fit to print: the admin token, shared and
// signing secrets and every header value become "****", passwords in the
// store URL too, endpoint URLs keep only scheme, host, port, path and query
// names (webhook.RedactURL), and write keys keep only enough to tell them
// apart (collector.MaskWriteKey).
func (c Config) Masked() Config {
	c.AdminToken = mask(c.AdminToken)
	c.Store = MaskURL(c.Store)
	c.Sources = append([]Source(nil), c.Sources...)
	for i := range c.Sources {
		s := &c.Sources[i]
		s.WriteKey = collector.MaskWriteKey(s.WriteKey)
		s.Webhooks.SharedSecret = mask(s.Webhooks.SharedSecret)
		s.Webhooks.Endpoints = maskEndpoints(s.Webhooks.Endpoints)
		s.Destinations = slices.Clone(s.Destinations)
		for j := range s.Destinations {
			d := &s.Destinations[j]
			d.SharedSecret = mask(d.SharedSecret)
			d.SharedSecrets = slices.Clone(d.SharedSecrets)
			for k := range d.SharedSecrets {
				d.SharedSecrets[k] = mask(d.SharedSecrets[k])
			}
			d.Headers = maskHeaders(d.Headers)
			d.Endpoints = maskEndpoints(d.Endpoints)
		}
	}
	return c
}

// maskEndpoints is eps with their credentials masked: in the URL, the
// signing secret and the headers' values.
func maskEndpoints(eps []webhook.Endpoint) []webhook.Endpoint {
	eps = slices.Clone(eps)
	for j := range eps {
		ep := &eps[j]
		ep.URL = webhook.RedactURL(ep.URL)
		ep.SigningSecret = mask(ep.SigningSecret)
		ep.Headers = maskHeaders(ep.Headers)
	}
	return eps
}

func maskHeaders(h map[string]string) map[string]string {
	h = maps.Clone(h)
	for name, v := range h {
		h[name] = mask(v)
	}
	return h
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return masked
}

// MaskURL hides the passwords in a URL: the one after user: and the value
// of any query parameter whose name holds "password". A URL that does not
// parse keeps only its scheme and what follows its last "@".
func MaskURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		scheme, rest, ok := strings.Cut(s, "://")
		if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
			return scheme + "://" + masked + rest[at:]
		}
		return s
	}
	// url escapes "*": mask with a word it leaves alone, then replace it.
	const hidden = "evfwdMASKEDevfwd"
	changed := false
	if _, ok := u.User.Password(); ok {
		u.User, changed = url.UserPassword(u.User.Username(), hidden), true
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, p := range params {
			if name, _, ok := strings.Cut(p, "="); ok && strings.Contains(strings.ToLower(name), "password") {
				params[i], changed = name+"="+hidden, true
			}
		}
		u.RawQuery = strings.Join(params, "&")
	}
	if !changed {
		return s
	}
	return strings.ReplaceAll(u.String(), hidden, masked)
}
