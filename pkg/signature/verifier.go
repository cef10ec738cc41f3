package signature

import (
	"bytes"
	"crypto/hmac"
	"hash"
)

// Verifier is an io.Writer that streams a body through the MAC and, at the
// end, says whether it matched and, when it did not, whether the body minus
// a final newline would have (the commonest way a body gets changed on its
// way through an editor or a shell). It costs one MAC pass, not two: the
// last two bytes are held back and the MAC state is cloned at the end.
type Verifier struct {
	mac  hash.Hash
	tail []byte // at most the last two bytes written, not yet in mac
	n    int64
}

// NewVerifier returns a Verifier keyed by secret.
func NewVerifier(secret []byte) *Verifier {
	return &Verifier{mac: New(secret), tail: make([]byte, 0, 2)}
}

// Write feeds body bytes; it never fails.
func (v *Verifier) Write(p []byte) (int, error) {
	v.n += int64(len(p))
	all := len(v.tail) + len(p)
	if all <= 2 {
		v.tail = append(v.tail, p...)
		return len(p), nil
	}
	// Flush everything but the last two bytes of tail+p into the MAC.
	keep := 2
	fromTail := len(v.tail) - max(0, keep-len(p)) // tail bytes to flush
	if fromTail > 0 {
		v.mac.Write(v.tail[:fromTail])
	}
	if len(p) >= keep {
		v.mac.Write(p[:len(p)-keep])
		v.tail = append(v.tail[:0], p[len(p)-keep:]...)
	} else {
		v.tail = append(v.tail[:0], v.tail[fromTail:]...)
		v.tail = append(v.tail, p...)
	}
	return len(p), nil
}

// Len is the number of body bytes written.
func (v *Verifier) Len() int64 { return v.n }

// Sum returns the raw MAC of everything written.
func (v *Verifier) Sum() []byte { return v.sum(v.tail) }

func (v *Verifier) sum(tail []byte) []byte {
	h := v.mac
	if c, ok := h.(hash.Cloner); ok {
		if cl, err := c.Clone(); err == nil {
			h = cl
		}
	}
	h.Write(tail)
	return h.Sum(nil)
}

// Check compares sig with the MAC of the body written so far, in constant
// time. On ErrInvalidSignature, trailingNewline reports that the body
// without its final "\n" or "\r\n" would have verified.
func (v *Verifier) Check(sig string) (trailingNewline bool, err error) {
	err = check(v.Sum(), sig)
	if err != ErrInvalidSignature {
		return false, err
	}
	var trimmed []byte
	switch {
	case bytes.HasSuffix(v.tail, []byte("\r\n")):
		trimmed = v.tail[:len(v.tail)-2]
	case bytes.HasSuffix(v.tail, []byte("\n")):
		trimmed = v.tail[:len(v.tail)-1]
	default:
		return false, err
	}
	want, _ := Decode(sig)
	return hmac.Equal(v.sum(trimmed), want), err
}
