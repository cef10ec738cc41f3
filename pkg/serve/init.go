package serve

import (
	"fmt"
	"os"
)

// InitConfig is a commented config to start from, as `evfwd serve init`
// writes it: one source with a fresh write key and shared secret, whose
// webhooks go to `evfwd listen` on its default address. Every key in it is
// one the strict config reads, so it passes Config.Check as written.
func InitConfig() []byte {
	return fmt.Appendf(nil, `# evfwd serve configuration: start with  evfwd serve --config FILE
# Check it first with  evfwd serve --check --config FILE  (unknown keys are refused).
# Flags and EVFWD_* variables override what is here (EVFWD_ADDR, EVFWD_STORE, ...).

# Where the collection API (the Segment HTTP Tracking API) listens.
addr: %s

# The store. Default: SQLite, evfwd.db under $XDG_STATE_HOME/evfwd. With
# postgres://user:pass@host/db several serve processes share one queue.
# store: sqlite:///var/lib/evfwd/evfwd.db

# Finished messages are kept this long, then pruned; 0 keeps everything.
retention: 168h

# The admin API (deletions, audience and trait syncs) is on when a token is
# set; prefer EVFWD_ADMIN_TOKEN to writing it here.
# admin_token: change-me

# HTTPS only, with a PEM pair (kill -HUP reloads it).
# tls_cert: cert.pem
# tls_key: key.pem

sources:
  - name: web
    # What clients send as their write key (EVFWD_WRITE_KEY for evfwd track and send).
    write_key: wk_%s
    webhooks:
      enabled: true
      # X-Signature is the hex HMAC-SHA1 of each body with this secret
      # (EVFWD_SECRET for evfwd listen and verify).
      shared_secret: whsec_%s
      # Up to five URLs, tried in order; the first 2xx delivers the message.
      endpoints:
        - url: http://127.0.0.1:8788/hooks   # evfwd listen's default address
          # headers: { X-Env: dev }
`, DefaultAddr, randomHex(16), randomHex(24))
}

// WriteInitConfig writes InitConfig to path, readable by its owner only
// (it holds secrets). An existing file is refused (os.ErrExist) unless
// force.
func WriteInitConfig(path string, force bool) error {
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(InitConfig())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
