package collector

import (
	"crypto/sha256"
	"crypto/subtle"
	"unsafe"
)

// keyIndex finds a source by its write key without telling, by how long
// it takes, how much of a wrong key is right (issue 29): the sources are
// found by the SHA-256 of their key, whose bytes a caller cannot steer,
// and the key found is then compared with the one given in constant time,
// as the admin token is.
type keyIndex map[[sha256.Size]byte]*Source

// add indexes s; it reports the source already there with the same key.
func (k keyIndex) add(s *Source) (other *Source, dup bool) {
	sum := sha256.Sum256([]byte(s.WriteKey))
	if other, dup = k[sum]; dup {
		return other, true
	}
	k[sum] = s
	return nil, false
}

// source returns the source whose write key is key, nil when none is.
func (k keyIndex) source(key string) *Source {
	if key == "" {
		return nil
	}
	// Sum256 only reads its input: the key's bytes serve as they are,
	// where a conversion would copy a key longer than 32 bytes to the heap.
	src := k[sha256.Sum256(unsafe.Slice(unsafe.StringData(key), len(key)))]
	if src == nil || !sameKey(src.WriteKey, key) {
		return nil
	}
	return src
}

// sameKey is subtle.ConstantTimeCompare for strings, without copying
// them to byte slices: its time depends on the lengths only.
func sameKey(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return subtle.ConstantTimeByteEq(v, 0) == 1
}
