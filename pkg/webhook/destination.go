package webhook

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/evfwd/evfwd/pkg/signature"
)

// MaxEndpoints is the most URLs one destination may have (spec 2.2, 8).
const MaxEndpoints = 5

// Endpoint is one configured webhook: a URL and the static headers sent
// with every request to it.
type Endpoint struct {
	// Name, when set, is how the endpoint is shown in metrics, logs,
	// errors and the inspectors (Display) instead of its URL with the
	// credentials masked: for a URL whose path is itself a secret.
	Name    string            `json:"name,omitempty" mapstructure:"name" yaml:"name,omitempty"`
	URL     string            `json:"url" mapstructure:"url" yaml:"url"`
	Headers map[string]string `json:"headers,omitempty" mapstructure:"headers" yaml:"headers,omitempty"`
	// Signing, when SigningStandard, adds Standard Webhooks headers
	// (webhook-id, webhook-timestamp, webhook-signature) signed with
	// SigningSecret, next to X-Signature, which stays as the spec says:
	// for receivers built on a Standard Webhooks library.
	Signing string `json:"signing,omitempty" mapstructure:"signing" yaml:"signing,omitempty"`
	// SigningSecret is "whsec_" and base64, as Svix shows it. Never printed.
	SigningSecret string `json:"-" mapstructure:"signing_secret" yaml:"signing_secret,omitempty"`
}

// SigningStandard is the one value of Endpoint.Signing.
const SigningStandard = "standard"

// Destination is a source's webhook destination settings (spec 2.2).
type Destination struct {
	Endpoints    []Endpoint `json:"endpoints" mapstructure:"endpoints" yaml:"endpoints"`
	SharedSecret string     `json:"-" mapstructure:"shared_secret" yaml:"shared_secret,omitempty"`
	// Scheme is how SharedSecret signs: X-Signature (segment) when empty.
	// `evfwd trigger --scheme` sets it to test a receiver built for
	// another vendor; the service leaves it, as the spec fixes X-Signature.
	Scheme signature.Scheme `json:"-" mapstructure:"-" yaml:"-"`
	// ExtraSecrets sign too, after SharedSecret, for the schemes that
	// carry several signatures (stripe, standard), as a sender rotating
	// its secret does.
	ExtraSecrets []string `json:"-" mapstructure:"-" yaml:"-"`
	// Method is the request's method: POST (the spec's, when empty), PUT
	// or PATCH, as Segment's Webhooks (Actions) offers.
	Method string `json:"method,omitempty" mapstructure:"-" yaml:"-"`
}

// Methods are the request methods a destination may use.
var Methods = []string{http.MethodPost, http.MethodPut, http.MethodPatch}

// method is the request method to send with.
func (d *Destination) method() string {
	if d.Method == "" {
		return http.MethodPost
	}
	return d.Method
}

// segment reports whether SharedSecret signs the spec's way, X-Signature
// computed once per delivery.
func (d *Destination) segment() bool { return d.Scheme == "" || d.Scheme == signature.Segment }

// ErrInvalidConfig is matched by every *ConfigError (errors.Is).
var ErrInvalidConfig = errors.New("invalid webhook destination")

// ConfigError reports one problem with a destination. Index is the
// endpoint's position (-1 for the destination as a whole), URL how it is
// shown (Endpoint.Display: never its credentials).
type ConfigError struct {
	Index  int
	URL    string
	Reason string
	// Err is the cause, when it has a type of its own (*BlockedError).
	Err error
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

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// reserved are headers the sender owns; a static header may not replace
// them (DESIGN §4). Keys are canonical.
var reserved = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Host": true, "X-Signature": true,
}

// Validate checks the settings of spec 2.2: one to five endpoints, each an
// absolute http or https URL with a host and no credentials, and static
// headers with valid names and values that do not replace a header the
// sender sets; and the signing settings: Scheme and its secrets, each
// endpoint's Signing and SigningSecret. It reports every problem found,
// joined, each naming its endpoint.
func (d *Destination) Validate() error {
	switch n := len(d.Endpoints); {
	case n == 0:
		return &ConfigError{Index: -1, Reason: "at least one webhook URL is required"}
	case n > MaxEndpoints:
		return &ConfigError{Index: -1, Reason: fmt.Sprintf("%d webhook URLs, at most %d are allowed", n, MaxEndpoints)}
	}
	errs := d.validateScheme()
	if d.Method != "" && !slices.Contains(Methods, d.Method) {
		errs = append(errs, &ConfigError{Index: -1, Reason: fmt.Sprintf("method %q: want POST, PUT or PATCH", d.Method)})
	}
	// The scheme's headers are the sender's too.
	var schemeHeaders []string
	if !d.segment() {
		schemeHeaders = d.Scheme.Headers()
	}
	// Svix's libraries read its own names before the standard ones: a
	// static one would be verified instead of what the sender signs.
	standardHeaders := append(signature.Standard.Headers(), signature.HeaderSvixID, signature.HeaderSvixTime, signature.HeaderSvix)
	for i, ep := range d.Endpoints {
		shown := ep.Display()
		if typed, _, slip := MissingScheme(ep.URL); slip && ep.Name == "" {
			// RedactURL masks the whole of a URL it cannot parse: show
			// what was typed instead, its credentials still masked.
			shown = typed
		}
		bad := func(format string, a ...any) {
			errs = append(errs, &ConfigError{Index: i, URL: shown, Reason: fmt.Sprintf(format, a...)})
		}
		if !validHeaderValue(ep.Name) || strings.TrimSpace(ep.Name) != ep.Name {
			bad("name %q: no control characters or surrounding spaces", ep.Name)
		}
		// Metrics, the breaker's state and the attempt records know an
		// endpoint by its Display: two endpoints must not share one.
		for j, other := range d.Endpoints[:i] {
			if other.Display() == ep.Display() && other.URL != ep.URL {
				bad("shown as %q like endpoints[%d] (credentials are masked): give each a name", ep.Display(), j)
				break
			}
		}
		if err := checkURL(ep.URL); err != nil {
			bad("%s", err)
		}
		switch ep.Signing {
		case "":
			if ep.SigningSecret != "" {
				bad("signing_secret is set but signing is not: add signing: standard")
			}
		case SigningStandard:
			if ep.SigningSecret == "" {
				bad("signing: standard needs a signing_secret (whsec_ followed by base64)")
			} else if _, err := signature.Key(signature.Standard, []byte(ep.SigningSecret)); err != nil {
				bad("signing_secret: %v", err)
			}
			if d.Scheme == signature.Standard {
				bad("signing: standard: the destination's scheme already sends Standard Webhooks headers")
			}
		default:
			bad("signing %q: only standard is supported (or leave it out for X-Signature alone)", ep.Signing)
		}
		for _, name := range slices.Sorted(maps.Keys(ep.Headers)) {
			canon := http.CanonicalHeaderKey(name)
			switch {
			case !validHeaderName(name):
				bad("header %q: not a valid header name", name)
			case reserved[canon] || slices.Contains(schemeHeaders, canon) ||
				(ep.Signing == SigningStandard && slices.Contains(standardHeaders, canon)):
				bad("header %q: set by the sender, it cannot be configured", name)
			case !validHeaderValue(ep.Headers[name]):
				bad("header %q: value contains a control character", name)
			}
		}
	}
	return errors.Join(errs...)
}

// validateScheme checks Scheme against the secrets it signs with.
func (d *Destination) validateScheme() []error {
	bad := func(format string, a ...any) []error {
		return []error{&ConfigError{Index: -1, Reason: fmt.Sprintf(format, a...)}}
	}
	if d.segment() {
		if len(d.ExtraSecrets) > 0 {
			return bad("an X-Signature carries one signature: give one shared secret, not %d", 1+len(d.ExtraSecrets))
		}
		return nil
	}
	if _, err := signature.ParseScheme(string(d.Scheme), false); err != nil {
		return bad("%v", err)
	}
	if d.SharedSecret == "" {
		return bad("scheme %s signs with a shared secret: none is set", d.Scheme)
	}
	// NewSigner's own checks: the count of secrets and their form.
	if _, err := signature.NewSigner(d.Scheme, d.secrets(), signature.Params{ID: "msg_check"}); err != nil {
		return bad("%v", err)
	}
	return nil
}

// secrets are the secrets Scheme signs with, in order.
func (d *Destination) secrets() [][]byte {
	out := make([][]byte, 0, 1+len(d.ExtraSecrets))
	out = append(out, []byte(d.SharedSecret))
	for _, s := range d.ExtraSecrets {
		out = append(out, []byte(s))
	}
	return out
}

func checkURL(raw string) error {
	if raw == "" {
		return errors.New("URL is required")
	}
	if _, fix, ok := MissingScheme(raw); ok {
		return errors.New(fix)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the part it refused, which may be a password
		// (https://user:pass/): say what is wrong without it.
		reason := errors.Unwrap(err).Error()
		if i := strings.IndexByte(reason, '"'); i >= 0 {
			if j := strings.LastIndexByte(reason, '"'); j > i {
				reason = reason[:i] + Masked + reason[j+1:]
			}
		}
		return fmt.Errorf("not a URL: %s", reason)
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
		return errors.New("credentials in the URL (user:password@) are not supported; use a static Authorization header")
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
