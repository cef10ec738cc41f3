package webhook

import (
	"net"
	"net/url"
	"strings"
)

// MissingScheme catches the commonest slip in a URL someone typed, one
// without its scheme ("127.0.0.1:9100/x", "localhost:3000/hooks"), which
// url.Parse either refuses in words about path segments or reads as a URL
// of scheme "localhost", or with its scheme but not the // after it. It
// returns raw as it may be shown (RedactURL: an error may end up in a CI
// log) and the fix in words, http:// for a local or LAN host and https://
// for a domain name ("no scheme; did you mean http://127.0.0.1:9100/x?");
// ok is false for anything else, which the caller's own checks judge.
// The URL flags (internal/cli.CheckURLScheme) and a destination's
// endpoints (Validate) share it, so a flag and a config file say the same.
func MissingScheme(raw string) (shown, fix string, ok bool) {
	if raw == "" || strings.Contains(raw, "://") {
		return "", "", false
	}
	if u, err := url.Parse(raw); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		// "http:host/x", "https:/host": the scheme is there, its // is not.
		rest := strings.TrimLeft(raw[len(u.Scheme)+1:], "/")
		want := RedactURL(u.Scheme + "://" + rest)
		return u.Scheme + ":" + strings.TrimPrefix(want, u.Scheme+"://"),
			"the // after " + u.Scheme + ": is missing; did you mean " + want + "?", true
	}
	if strings.HasPrefix(raw, "/") && !strings.HasPrefix(raw, "//") {
		return "", "", false // a path, not a slip: the caller's "must be absolute" says it
	}
	sep := "://"
	if strings.HasPrefix(raw, "//") {
		sep = ":" // "//host/x", a scheme-relative URL
	}
	scheme := "https"
	if u, err := url.Parse("http" + sep + raw); err == nil && localHost(u.Hostname()) {
		scheme = "http"
	}
	want := RedactURL(scheme + sep + raw)
	return strings.TrimPrefix(want, scheme+sep), "no scheme; did you mean " + want + "?", true
}

// localHost reports whether host is one served over plain http as a rule:
// an IP address, localhost, or a name without a dot (a LAN machine, a
// container).
func localHost(host string) bool {
	return net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") || !strings.Contains(host, ".")
}
