package cli

import "github.com/evfwd/evfwd/pkg/webhook"

// CheckURLScheme catches a URL flag's value typed without its scheme
// ("127.0.0.1:9100/x") or its // (webhook.MissingScheme, which a config
// file's webhook endpoints share): a usage error that says what to type,
// with credentials masked. It returns nil for anything else: the
// caller's own checks follow.
func CheckURLScheme(flag, raw string) error {
	if shown, fix, ok := webhook.MissingScheme(raw); ok {
		return UsageErrorf("%s %s: %s", flag, shown, fix)
	}
	return nil
}
