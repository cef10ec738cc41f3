package cli

import (
	"net"
	"net/url"
	"strings"

	"github.com/evfwd/evfwd/pkg/webhook"
)

// CheckURLScheme catches the commonest slip in a URL flag, a value
// without its scheme ("127.0.0.1:9100/x", "localhost:3000/hooks"), which
// url.Parse either refuses in words about path segments or reads as a URL
// of scheme "localhost", or with its scheme but not the // after it. It
// returns a usage error that says what to type (http:// for a local or LAN
// host, https:// for a domain name), and nil for anything else: the
// caller's own checks follow. Shown URLs are redacted (webhook.RedactURL):
// an error may end up in a CI log.
func CheckURLScheme(flag, raw string) error {
	if raw == "" || strings.Contains(raw, "://") {
		return nil
	}
	if u, err := url.Parse(raw); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		// "http:host/x", "https:/host": the scheme is there, its // is not.
		rest := strings.TrimLeft(raw[len(u.Scheme)+1:], "/")
		want := webhook.RedactURL(u.Scheme + "://" + rest)
		return UsageErrorf("%s %s:%s: the // after %s: is missing; did you mean %s?", flag, u.Scheme, strings.TrimPrefix(want, u.Scheme+"://"), u.Scheme, want)
	}
	scheme := "https"
	if u, err := url.Parse("http://" + raw); err == nil && localHost(u.Hostname()) {
		scheme = "http"
	}
	want := webhook.RedactURL(scheme + "://" + raw)
	return UsageErrorf("%s %s: no scheme; did you mean %s?", flag, strings.TrimPrefix(want, scheme+"://"), want)
}

// localHost reports whether host is one served over plain http as a rule:
// an IP address, localhost, or a name without a dot (a LAN machine, a
// container).
func localHost(host string) bool {
	return net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") || !strings.Contains(host, ".")
}
