// Package signature signs and verifies webhook bodies the way the webhook
// destination does: the lowercase hex HMAC-SHA1 of the exact body bytes, keyed
// by the destination's shared secret, sent in the X-Signature header.
package signature

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"hash"
	"io"
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

// SignReader streams r through the MAC in constant memory and returns the
// lowercase hex signature and the number of bytes read.
func SignReader(secret []byte, r io.Reader) (string, int64, error) {
	m := New(secret)
	n, err := copyBody(m, r)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(m.Sum(nil)), n, nil
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

// copyBody copies with a large buffer: fewer reads per gigabyte, memory
// still constant. Wrapping r hides any WriterTo that would pick a smaller one.
func copyBody(w io.Writer, r io.Reader) (int64, error) {
	return io.CopyBuffer(w, struct{ io.Reader }{r}, make([]byte, 256<<10))
}
