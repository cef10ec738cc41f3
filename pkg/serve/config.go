// Package serve wires `evfwd serve` together: configuration and its
// validation, the store (opened from its URL by pkg/storeurl, or handed in
// ready), the collection API (pkg/collector), the admin API (pkg/admin),
// the forwarder, health and metrics endpoints, and graceful drain. The
// command stays a thin layer over it, and tests and `evfwd demo` run it
// in-process.
package serve

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/destination"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// DefaultAddr is where serve listens unless told otherwise.
const DefaultAddr = "127.0.0.1:8787"

// Config is the service's configuration, as the YAML file holds it.
type Config struct {
	Addr string `mapstructure:"addr"`
	// Store is the store's URL (see pkg/storeurl), unless Options.Store
	// hands New a ready store.
	Store   string   `mapstructure:"store"`
	Sources []Source `mapstructure:"sources"`
	// AdminToken is the bearer token of the admin API (pkg/admin); empty
	// turns the API off.
	AdminToken string `mapstructure:"admin_token"`
	// Retention is how long finished messages are kept (see
	// store.Store.Prune); 0 keeps them forever.
	Retention time.Duration `mapstructure:"retention"`
	// TLSCert and TLSKey are PEM files; with both set the service speaks
	// HTTPS only (tls.go), and Server.ReloadTLS reads them again.
	TLSCert string `mapstructure:"tls_cert"`
	TLSKey  string `mapstructure:"tls_key"`
	// PublicURL is where clients reach serve when a proxy stands in front
	// of it: the settings document that web and mobile libraries load
	// sends them there. Empty: the host each request reached.
	PublicURL string `mapstructure:"public_url"`
	// TrustedProxies are the CIDRs (or addresses) of proxies whose
	// X-Forwarded-For gives a web or mobile client's address.
	TrustedProxies []string `mapstructure:"trusted_proxies"`
	// AllowedHosts are the names, besides the address served, localhost
	// and IP addresses, that requests to /metrics, /healthz and the admin
	// API may give as their Host: serve's name behind a proxy or in a
	// cluster. Any other name is refused (421), as a DNS-rebinding page
	// would send one. The collection API answers any Host.
	AllowedHosts []string `mapstructure:"allowed_hosts"`
	// AllowPrivateEndpoints lets endpoints be link-local addresses and
	// cloud metadata services (webhook.BlockedHost), which serve
	// otherwise refuses: at start for a URL that names one, and at each
	// connection for a name that resolves to one (webhook.Options).
	// Loopback, private and public addresses are allowed either way.
	AllowPrivateEndpoints bool `mapstructure:"allow_private_endpoints"`
}

// Source is one source: its write key and its webhook destination.
type Source struct {
	Name     string `mapstructure:"name"`
	WriteKey string `mapstructure:"write_key"`
	// Kind is server (default), web or mobile: see collector.Kind.
	Kind string `mapstructure:"kind"`
	// AllowedOrigins are the origins browsers may post from (default
	// any).
	AllowedOrigins []string `mapstructure:"allowed_origins"`
	// Webhooks is the spec's destination: every message, as it is, to
	// the first of its endpoints that answers 2xx. It is the destination
	// named "webhooks".
	Webhooks Webhooks `mapstructure:"webhooks"`
	// Destinations are more webhook destinations, each choosing its
	// messages, their shape and their pace (pkg/destination).
	Destinations []destination.Config `mapstructure:"destinations"`
}

// Compile is src's destinations, compiled: its webhooks block (when
// enabled), then its destinations list, in order. It reports every
// problem, each naming its destination.
func (src *Source) Compile(allowPrivate bool) ([]*destination.Destination, error) {
	var out []*destination.Destination
	var errs []error
	if src.Webhooks.Enabled {
		problems := unjoin(src.Webhooks.Destination.Validate())
		if !allowPrivate {
			problems = append(problems, unjoin(src.Webhooks.Destination.CheckAddresses())...)
		}
		for _, e := range problems {
			errs = append(errs, fmt.Errorf("webhooks: %w", e))
		}
		out = append(out, destination.Webhooks(src.Name, src.Webhooks.Destination))
	}
	if n := len(src.Destinations) + len(out); n > destination.MaxPerSource {
		errs = append(errs, fmt.Errorf("%d destinations, at most %d are allowed", n, destination.MaxPerSource))
	}
	seen := map[string]int{}
	for i, c := range src.Destinations {
		if c.Name == destination.WebhooksName && src.Webhooks.Enabled {
			errs = append(errs, fmt.Errorf("destinations[%d]: name %q is the webhooks block's: choose another", i, c.Name))
		} else if j, dup := seen[c.Name]; dup && c.Name != "" {
			errs = append(errs, fmt.Errorf("destinations[%d]: name %q already used by destinations[%d]", i, c.Name, j))
		}
		seen[c.Name] = i
		d, err := destination.Compile(src.Name, i, c, allowPrivate)
		if err != nil {
			errs = append(errs, unjoin(err)...)
			continue
		}
		out = append(out, d)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Webhooks is a source's webhook destination settings.
type Webhooks struct {
	Enabled             bool `mapstructure:"enabled"`
	webhook.Destination `mapstructure:",squash"`
}

// Validate reports every problem, each naming its source (and endpoint,
// through pkg/webhook's validation).
func (c *Config) Validate() error {
	var errs []error
	if len(c.Sources) == 0 {
		errs = append(errs, errors.New("no sources configured (sources: [{name, write_key, webhooks}])"))
	}
	if err := CheckAdminToken(c.AdminToken); err != nil {
		errs = append(errs, err)
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention %s: want a duration of 0 (keep everything) or more", c.Retention))
	}
	if c.PublicURL != "" {
		if _, err := collector.ParsePublicURL(c.PublicURL); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := collector.ParseTrustedProxies(c.TrustedProxies); err != nil {
		errs = append(errs, err)
	}
	for _, h := range c.AllowedHosts {
		if err := checkAllowedHost(h); err != nil {
			errs = append(errs, err)
		}
	}
	names, keys := map[string]int{}, map[string]int{}
	for i, s := range c.Sources {
		where := fmt.Sprintf("sources[%d]", i)
		if s.Name == "" {
			errs = append(errs, fmt.Errorf("%s: name is required", where))
		} else {
			where = fmt.Sprintf("source %q", s.Name)
			if j, dup := names[s.Name]; dup {
				errs = append(errs, fmt.Errorf("%s: name already used by sources[%d]", where, j))
			}
			names[s.Name] = i
		}
		if s.WriteKey == "" {
			errs = append(errs, fmt.Errorf("%s: write_key is required", where))
		} else {
			if j, dup := keys[s.WriteKey]; dup {
				errs = append(errs, fmt.Errorf("%s: write_key already used by sources[%d]", where, j))
			}
			keys[s.WriteKey] = i
		}
		if _, err := collector.ParseKind(s.Kind); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		for _, o := range s.AllowedOrigins {
			if _, err := collector.CheckOrigin(o); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
			}
		}
		if _, err := s.Compile(c.AllowPrivateEndpoints); err != nil {
			for _, e := range unjoin(err) {
				errs = append(errs, fmt.Errorf("%s: %w", where, e))
			}
		}
	}
	return errors.Join(errs...)
}

// MinAdminTokenLen is the fewest characters an admin token may have.
const MinAdminTokenLen = 16

// CheckAdminToken refuses an admin token that is set but weak: under
// MinAdminTokenLen characters, or with nothing but spaces (issue 29: an
// admin API protected by one character). Empty is fine: the admin API and
// the inspector are off.
func CheckAdminToken(tok string) error {
	switch {
	case tok == "":
		return nil
	case strings.TrimSpace(tok) == "":
		return errors.New("admin_token: only whitespace; use a random token of at least 16 characters (evfwd serve init writes one; or openssl rand -hex 32)")
	case utf8.RuneCountInString(tok) < MinAdminTokenLen:
		return fmt.Errorf("admin_token: %d characters, at least %d are required; use a random token (evfwd serve init writes one; or openssl rand -hex 32)",
			utf8.RuneCountInString(tok), MinAdminTokenLen)
	}
	return nil
}

// checkAllowedHost refuses an allowed_hosts entry that is not a bare host
// name: a URL, a port or a path there would never match a Host.
func checkAllowedHost(h string) error {
	bad := func(why string) error { return fmt.Errorf("allowed_hosts %q: %s", h, why) }
	switch {
	case h == "":
		return bad("empty")
	case strings.Contains(h, "://"):
		return bad("a host name, not a URL: drop the scheme")
	case strings.ContainsAny(h, "/?#@ \t"):
		return bad("a host name, such as evfwd.internal, without path or spaces")
	case strings.Contains(h, ":") && net.ParseIP(h) == nil:
		return bad("a host name without a port: a name listed is allowed on any port")
	case net.ParseIP(h) != nil:
		return bad("IP addresses are allowed already: list names only")
	}
	return nil
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// DefaultStorePath is evfwd.db under the user's state directory
// (StateDir).
func DefaultStorePath(getenv func(string) string) string {
	return filepath.Join(StateDir(getenv), "evfwd.db")
}
