package message

import (
	"encoding/hex"
	"math/rand/v2"
)

// NewID returns a random (version 4) UUID: evfwd's one maker of them, for
// messageIds, deletion requests and test webhooks. The bits come from
// math/rand/v2's global generator, ChaCha8 seeded by the OS per thread:
// unpredictable enough for ids, and on the client's enqueue path cheaper
// than google/uuid: no crypto/rand read per id (nor its pool's global
// lock, uuid.EnableRandPool) and one allocation, not two
// (docs/PERFORMANCE.md).
func NewID() string {
	var u [16]byte
	a, b := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		u[i], u[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}
