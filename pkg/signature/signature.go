// Package signature signs and verifies webhook bodies. The webhook
// destination's own scheme is the lowercase hex HMAC-SHA1 of the exact body
// bytes, keyed by the shared secret, in X-Signature: Sign, Verify and New
// are its shortcuts. Every other vendor's scheme (Scheme: GitHub, Stripe,
// Standard Webhooks, Slack, Shopify) goes through Signer and Check, which
// also take several secrets, judge signed timestamps and say why a
// signature fails (Reason).
package signature

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"hash"
	"sync"
)

// Header is the HTTP header that carries the signature.
const Header = "X-Signature"

// Algorithm names the MAC for machine-readable output.
const Algorithm = "hmac-sha1"

// Size is the length in bytes of a raw signature; HexSize of its hex form.
const (
	Size    = sha1.Size
	HexSize = 2 * Size
)

var (
	// ErrInvalidSignature reports a well-formed signature that does not
	// match the body under the secret.
	ErrInvalidSignature = errors.New("signature does not match")
	// ErrMalformed reports a signature that is not 40 hex digits.
	ErrMalformed = errors.New("signature is not 40 hex digits")
	// ErrMissing reports a request without an X-Signature header.
	ErrMissing = errors.New("X-Signature header missing")
)

// New returns a streaming MAC keyed by secret; write the body to it and
// call Sum(nil) for the raw signature.
func New(secret []byte) hash.Hash { return hmac.New(sha1.New, secret) }

// Sign returns the lowercase hex signature of body.
func Sign(secret, body []byte) string {
	m := New(secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Keyed signs bodies with one secret, as Sign does, reusing its MACs: a
// MAC keyed once and reset costs no allocation and no key schedule per
// body. Safe for concurrent use.
type Keyed struct{ macs sync.Pool }

// NewKeyed returns the Keyed of secret.
func NewKeyed(secret []byte) *Keyed {
	secret = append([]byte(nil), secret...)
	k := &Keyed{}
	k.macs.New = func() any { return New(secret) }
	return k
}

// Sum appends the raw signature of body to dst.
func (k *Keyed) Sum(dst, body []byte) []byte {
	m := k.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(body)
	dst = m.Sum(dst)
	k.macs.Put(m)
	return dst
}

// Sign returns the lowercase hex signature of body.
func (k *Keyed) Sign(body []byte) string {
	var sum [Size]byte
	return hex.EncodeToString(k.Sum(sum[:0], body))
}

// Decode parses a hex signature, upper- or lower-case, surrounding spaces
// ignored. It returns ErrMalformed for anything but 40 hex digits.
func Decode(sig string) ([]byte, error) {
	sig = trimSpace(sig)
	if len(sig) != HexSize {
		return nil, ErrMalformed
	}
	raw, err := hex.DecodeString(sig)
	if err != nil {
		return nil, ErrMalformed
	}
	return raw, nil
}

// Verify checks sig against body in constant time. It returns nil,
// ErrMissing (empty sig), ErrMalformed or ErrInvalidSignature.
func Verify(secret, body []byte, sig string) error {
	m := New(secret)
	m.Write(body)
	return check(m.Sum(nil), sig)
}

func check(mac []byte, sig string) error {
	if trimSpace(sig) == "" {
		return ErrMissing
	}
	want, err := Decode(sig)
	if err != nil {
		return err
	}
	if !hmac.Equal(mac, want) {
		return ErrInvalidSignature
	}
	return nil
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\r' || s[len(s)-1] == '\n') {
		s = s[:len(s)-1]
	}
	return s
}
