package webhook

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// MaxEndpoints is the most URLs one destination may have (spec 2.2, 8).
const MaxEndpoints = 5

// Endpoint is one configured webhook: a URL and the static headers sent
// with every request to it.
type Endpoint struct {
	URL     string            `json:"url" mapstructure:"url" yaml:"url"`
	Headers map[string]string `json:"headers,omitempty" mapstructure:"headers" yaml:"headers,omitempty"`
}

// Destination is a source's webhook destination settings (spec 2.2).
type Destination struct {
	Endpoints    []Endpoint `json:"endpoints" mapstructure:"endpoints" yaml:"endpoints"`
	SharedSecret string     `json:"-" mapstructure:"shared_secret" yaml:"shared_secret,omitempty"`
}

// ErrInvalidConfig is matched by every *ConfigError (errors.Is).
var ErrInvalidConfig = errors.New("invalid webhook destination")

// ConfigError reports one problem with a destination. Index is the
// endpoint's position (-1 for the destination as a whole), URL its URL.
type ConfigError struct {
	Index  int
	URL    string
	Reason string
}

func (e *ConfigError) Error() string {
	if e.Index < 0 {
		return "endpoints: " + e.Reason
	}
	if e.URL == "" {
		return fmt.Sprintf("endpoints[%d]: %s", e.Index, e.Reason)
	}
	return fmt.Sprintf("endpoints[%d] (%s): %s", e.Index, e.URL, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// reserved are headers the sender owns; a static header may not replace
// them (DESIGN §4). Keys are canonical.
var reserved = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Host": true, "X-Signature": true,
}

// Validate checks the settings of spec 2.2: one to five endpoints, each an
// absolute http or https URL with a host and no credentials, and static
// headers with valid names and values that do not replace a header the
// sender sets. It reports every problem found, joined, each naming its
// endpoint.
func (d *Destination) Validate() error {
	switch n := len(d.Endpoints); {
	case n == 0:
		return &ConfigError{Index: -1, Reason: "at least one webhook URL is required"}
	case n > MaxEndpoints:
		return &ConfigError{Index: -1, Reason: fmt.Sprintf("%d webhook URLs, at most %d are allowed", n, MaxEndpoints)}
	}
	var errs []error
	for i, ep := range d.Endpoints {
		bad := func(format string, a ...any) {
			errs = append(errs, &ConfigError{Index: i, URL: ep.URL, Reason: fmt.Sprintf(format, a...)})
		}
		if err := checkURL(ep.URL); err != nil {
			bad("%s", err)
		}
		for _, name := range slices.Sorted(maps.Keys(ep.Headers)) {
			switch {
			case !validHeaderName(name):
				bad("header %q: not a valid header name", name)
			case reserved[http.CanonicalHeaderKey(name)]:
				bad("header %q: set by the sender, it cannot be configured", name)
			case !validHeaderValue(ep.Headers[name]):
				bad("header %q: value contains a control character", name)
			}
		}
	}
	return errors.Join(errs...)
}

func checkURL(raw string) error {
	if raw == "" {
		return errors.New("URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", errors.Unwrap(err))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return errors.New("URL must be absolute, including http:// or https://")
	default:
		return fmt.Errorf("scheme %q: only http and https are supported", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("URL has no host")
	}
	if u.User != nil {
		return errors.New("credentials in the URL are not supported; use a static Authorization header")
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validHeaderValue rejects what would split or corrupt a header line:
// control characters other than horizontal tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
