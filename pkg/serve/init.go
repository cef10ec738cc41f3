package serve

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evfwd/evfwd/pkg/webhook"
)

// InitConfig is a commented config to start from, as `evfwd serve init`
// writes it: one source with a fresh write key and shared secret, whose
// webhooks go to `evfwd listen` on its default address. Every key in it is
// one the strict config reads, so it passes Config.Check as written. src is
// that source, for the caller to print its keys.
func InitConfig() (src Source, config []byte) {
	src = Source{
		// Not "web": its kind is server, the dev source's, which evfwd
		// send and track need; the comment on kind says when to change it.
		Name:     "main",
		WriteKey: "wk_" + randomHex(16),
		Webhooks: Webhooks{Enabled: true, Destination: webhook.Destination{
			SharedSecret: "whsec_" + randomHex(24),
			Endpoints:    []webhook.Endpoint{{URL: "http://127.0.0.1:8788/hooks"}},
		}},
	}
	return src, fmt.Appendf(nil, `# evfwd serve configuration: start with  evfwd serve --config FILE
# Check it first with  evfwd serve --check --config FILE  (unknown keys are refused).
# Flags and EVFWD_* variables override what is here (EVFWD_ADDR, EVFWD_STORE, ...).

# Where the collection API (the Segment HTTP Tracking API) listens.
addr: %s

# The store. Default: SQLite, evfwd.db under $XDG_STATE_HOME/evfwd. With
# postgres://user:pass@host/db several serve processes share one queue.
# store: sqlite:///var/lib/evfwd/evfwd.db

# Finished messages are kept this long, then pruned; 0 keeps everything.
retention: 168h

# The admin API (deletions, audience and trait syncs) and the inspector
# (--ui) are on when a token is set: at least 16 characters. This one is
# fresh, 32 random bytes; uncomment it, or give it as EVFWD_ADMIN_TOKEN.
# admin_token: %s

# HTTPS only, with a PEM pair (kill -HUP reloads it).
# tls_cert: cert.pem
# tls_key: key.pem

# Behind a proxy: where clients reach serve. The settings document that web
# and mobile libraries load points them there (default: the host each
# request reached).
# public_url: https://collect.example.com
# Proxies whose X-Forwarded-For gives a web or mobile client's address.
# trusted_proxies: [10.0.0.0/8]

# Endpoints on link-local addresses (169.254.0.0/16, fe80::/10) or cloud
# metadata services (169.254.169.254, metadata.google.internal, ...) are
# refused, by URL at start and by address at each connection. Loopback and
# private networks (10.0.0.0/8, ...) are called either way.
# allow_private_endpoints: true

sources:
  - name: %s
    # What clients send as their write key (EVFWD_WRITE_KEY for evfwd track and send).
    write_key: %s
    # server: timestamps kept as sent, as historical imports need. web
    # (Analytics.js) or mobile (analytics-kotlin, analytics-swift), as Segment
    # treats client-side libraries: context.ip is set from the request when
    # the message has none, and the device clock's error is taken out:
    # timestamp = receivedAt - (sentAt - timestamp), the device's own time
    # kept as originalTimestamp. Point Analytics.js's cdnURL (the apps'
    # cdnHost and apiHost: serve's host/v1) here: its settings come from
    # serve. The app libraries always use https: give serve tls_cert and
    # tls_key, or a TLS proxy and public_url.
    kind: server
    # Browsers may post from these origins only (default: any, as on Segment).
    # allowed_origins: [https://www.example.com]
    webhooks:
      enabled: true
      # X-Signature is the hex HMAC-SHA1 of each body with this secret
      # (EVFWD_SECRET for evfwd listen and verify).
      shared_secret: %s
      # Up to five URLs, tried in order; the first 2xx delivers the message.
      endpoints:
        - url: %s   # evfwd listen's default address
          # headers: { X-Env: dev }
          # Standard Webhooks headers (webhook-id, -timestamp, -signature) too,
          # beside X-Signature, for a receiver built on a Standard Webhooks
          # library; the secret is whsec_ and base64, as Svix shows it (this
          # one is fresh):
          # signing: standard
          # signing_secret: %s
`, DefaultAddr, AdminToken(), src.Name, src.WriteKey, src.Webhooks.SharedSecret, src.Webhooks.Endpoints[0].URL, standardSecret())
}

// AdminToken is a fresh admin token: the hex of 32 random bytes.
func AdminToken() string { return randomHex(32) }

// standardSecret is a fresh Standard Webhooks secret: whsec_ and the
// base64 of 24 random bytes.
func standardSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// WriteInitConfig writes InitConfig to path, readable by its owner only
// (it holds secrets), and returns its source. An existing file is refused
// (os.ErrExist) unless force, which replaces it by a rename: the file's old
// mode, 0644 say, does not carry over to the new secrets.
func WriteInitConfig(path string, force bool) (Source, error) {
	src, config := InitConfig()
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return src, err
		}
		return src, writeClose(f, config)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // 0600
	if err != nil {
		return src, err
	}
	defer os.Remove(tmp.Name()) // after a failure; renamed away otherwise
	if err := writeClose(tmp, config); err != nil {
		return src, err
	}
	return src, os.Rename(tmp.Name(), path)
}

// writeClose writes b to f, syncs and closes it.
func writeClose(f *os.File, b []byte) error {
	_, err := f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
