package webhook

import (
	"net/url"
	"strings"
)

// Masked is what RedactURL shows in place of a credential.
const Masked = "****"

// RedactURL names an endpoint without the credentials its URL may carry:
// scheme, user info, host, port and path, with the user info and every
// query value replaced by "****" (https://****@hooks.example/in?token=****)
// and a fragment by "#****". Query names stay, to tell URLs apart. It is
// what metrics, logs, `serve --check`, errors and the inspectors show of an
// endpoint; only the sender uses the URL itself. A string that does not
// parse as a URL keeps only its scheme. RedactURL of its own result is
// that result.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		if scheme, _, ok := strings.Cut(raw, "://"); ok && scheme != "" && !strings.ContainsAny(scheme, "/?#@") {
			return scheme + "://" + Masked
		}
		return Masked
	}
	var b strings.Builder
	b.Grow(len(raw) + 8)
	if u.Scheme != "" {
		b.WriteString(strings.ToLower(u.Scheme))
		b.WriteByte(':')
	}
	if u.Host != "" || u.User != nil || strings.HasPrefix(raw[len(u.Scheme):], "://") {
		b.WriteString("//")
		if u.User != nil {
			b.WriteString(Masked + "@")
		}
		b.WriteString(u.Host)
	}
	b.WriteString(u.EscapedPath())
	if u.ForceQuery || u.RawQuery != "" {
		b.WriteByte('?')
		for i, p := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			switch name, _, ok := strings.Cut(p, "="); {
			case ok:
				b.WriteString(name + "=" + Masked)
			case p != "":
				// A bare value (?SECRET) is a value.
				b.WriteString(Masked)
			}
		}
	}
	if u.Fragment != "" || u.RawFragment != "" {
		b.WriteString("#" + Masked)
	}
	return b.String()
}

// Display is how metrics, logs, errors, the store's attempt records and the
// inspectors name e: its Name when set, else its URL without credentials
// (RedactURL).
func (e *Endpoint) Display() string {
	if e.Name != "" {
		return e.Name
	}
	return RedactURL(e.URL)
}
