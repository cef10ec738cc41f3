package inspector

import (
	"crypto/sha256"
	"sync"
	"time"
)

// SignInTTL is how long a sign-in link works (once) after it is made.
const SignInTTL = 10 * time.Minute

// SignInFragment starts the address fragment that carries a sign-in
// code: http://127.0.0.1:8790/#signin=CODE. A fragment is never sent in a
// request, so the code reaches no log, proxy or Referer; the page takes it
// out of the address and history before it redeems it (api.js).
const SignInFragment = "#signin="

// signInCodes are the sign-in links made and not yet used, by the SHA-256
// of their code (as sessions are kept), with the time each stops working.
type signInCodes struct {
	mu    sync.Mutex
	codes map[[sha256.Size]byte]time.Time
}

// add keeps a fresh code, made at now, and returns it.
func (c *signInCodes) add(now time.Time) string {
	code := newSessionID()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.codes == nil {
		c.codes = map[[sha256.Size]byte]time.Time{}
	}
	for k, until := range c.codes {
		if !now.Before(until) {
			delete(c.codes, k)
		}
	}
	c.codes[sha256.Sum256([]byte(code))] = now.Add(SignInTTL)
	return code
}

// redeem says whether code is a live code, and ends it either way: a code
// works once.
func (c *signInCodes) redeem(code string, now time.Time) bool {
	if code == "" {
		return false
	}
	k := sha256.Sum256([]byte(code))
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.codes[k]
	delete(c.codes, k)
	return ok && now.Before(until)
}

// SignInLink returns a link to the page at pageURL (the inspector's URL,
// such as http://127.0.0.1:8790/) that signs a browser in once, within
// SignInTTL: the page exchanges its code for a session as a login with
// the admin token does (POST /api/session {"code": ...}). The token itself
// is in no link.
func (s *Serve) SignInLink(pageURL string) string {
	return pageURL + SignInFragment + s.signIn.add(s.cfg.Now())
}
