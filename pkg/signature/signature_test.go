package signature

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

func rep(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// RFC 2202 section 3: test cases for HMAC-SHA1.
var rfc2202 = []struct {
	name      string
	key, data []byte
	want      string
}{
	{"1", rep(0x0b, 20), []byte("Hi There"), "b617318655057264e28bc0b6fb378c8ef146be00"},
	{"2", []byte("Jefe"), []byte("what do ya want for nothing?"), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"},
	{"3", rep(0xaa, 20), rep(0xdd, 50), "125d7342b9ac11cd91a39af48aa17b4f63f175d3"},
	{"4", []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25}, rep(0xcd, 50), "4c9007f4026250c6bc8414f9bf50c86c2d7235da"},
	{"5", rep(0x0c, 20), []byte("Test With Truncation"), "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"},
	{"6", rep(0xaa, 80), []byte("Test Using Larger Than Block-Size Key - Hash Key First"), "aa4ae5e15272d00e95705637ce8a3b55ed402112"},
	{"7", rep(0xaa, 80), []byte("Test Using Larger Than Block-Size Key and Larger Than One Block-Size Data"), "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"},
}

func TestSignRFC2202(t *testing.T) {
	for _, tt := range rfc2202 {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sign(tt.key, tt.data); got != tt.want {
				t.Errorf("Sign = %s, want %s", got, tt.want)
			}
			g, err := NewSigner(Segment, [][]byte{tt.key}, Params{})
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(g, iotest.OneByteReader(bytes.NewReader(tt.data)))
			if got := g.Value(); err != nil || got != tt.want || n != int64(len(tt.data)) {
				t.Errorf("Signer = %s, %d, %v; want %s, %d", got, n, err, tt.want, len(tt.data))
			}
			if err := Verify(tt.key, tt.data, strings.ToUpper(tt.want)); err != nil {
				t.Errorf("Verify(uppercase) = %v", err)
			}
		})
	}
}

func TestSignBodies(t *testing.T) {
	secret := []byte("s3cret")
	// Digests from: printf BODY | openssl dgst -sha1 -hmac s3cret
	tests := []struct {
		name string
		body []byte
		want string
	}{
		{"empty", nil, "3e48575537919d9187078407ecb88e44b1d674e4"},
		{"binary", []byte{0, 1, 2, 0xff, 0xfe}, "dcb9e9d8112f0c136a9f0350f796f4493a667bec"},
		{"utf-8 json", []byte(`{"event":"Café ☕","n":12345678901234567890.000000001}`), "544a469155bb8484961846159196483f292b00b9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sign(secret, tt.body); got != tt.want {
				t.Errorf("Sign = %s, want %s", got, tt.want)
			}
			if err := Verify(secret, tt.body, tt.want); err != nil {
				t.Errorf("Verify = %v", err)
			}
			changed := append(bytes.Clone(tt.body), ' ')
			if err := Verify(secret, changed, tt.want); !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("Verify(changed) = %v, want ErrInvalidSignature", err)
			}
			if err := Verify([]byte("other"), tt.body, tt.want); !errors.Is(err, ErrInvalidSignature) {
				t.Errorf("Verify(wrong secret) = %v, want ErrInvalidSignature", err)
			}
		})
	}
}

func TestVerifyErrors(t *testing.T) {
	key, body := []byte("k"), []byte("body")
	good := Sign(key, body)
	tests := []struct {
		sig  string
		want error
	}{
		{good, nil},
		{"  " + strings.ToUpper(good) + "\n", nil},
		{"", ErrMissing},
		{good[:39], ErrMalformed},
		{good + "0", ErrMalformed},
		{"zz" + good[2:], ErrMalformed},
		{"sha1=" + good, ErrMalformed},
		{strings.Repeat("0", 40), ErrInvalidSignature},
	}
	for _, tt := range tests {
		if err := Verify(key, body, tt.sig); !errors.Is(err, tt.want) {
			t.Errorf("Verify(%q) = %v, want %v", tt.sig, err, tt.want)
		}
	}
}

// The held-back tail of a Check: whatever the chunking, a final LF or
// CRLF added to the body is told from any other change.
func TestCheckTrailingNewlineChunked(t *testing.T) {
	key := []byte("k")
	signed := []byte(`{"type":"track"}`)
	h := http.Header{Header: {Sign(key, signed)}}
	tests := []struct {
		name string
		body string
		want Reason
	}{
		{"exact", string(signed), ReasonOK},
		{"LF added", string(signed) + "\n", ReasonTrailingNewline},
		{"CRLF added", string(signed) + "\r\n", ReasonTrailingNewline},
		{"two LF added", string(signed) + "\n\n", ReasonMismatch},
		{"other change", `{"type":"page"}` + "\n", ReasonMismatch},
		{"tiny", "x", ReasonMismatch},
		{"empty", "", ReasonMismatch},
	}
	for _, tt := range tests {
		for _, chunk := range []int{1, 2, 3, 7, 1 << 10} {
			c, err := NewCheck(Segment, h, Options{Secrets: [][]byte{key}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.CopyBuffer(c, struct{ io.Reader }{strings.NewReader(tt.body)}, make([]byte, chunk)); err != nil {
				t.Fatal(err)
			}
			if r := c.Result(); r.Reason != tt.want || r.Bytes != int64(len(tt.body)) {
				t.Errorf("%s (chunk %d): %s (len %d); want %s", tt.name, chunk, r.Reason, r.Bytes, tt.want)
			}
		}
	}
}

// BenchmarkSigner is evfwd sign's inner loop: X-Signature over 1 MiB.
func BenchmarkSigner(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1<<20)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		g, _ := NewSigner(Segment, [][]byte{[]byte("s")}, Params{})
		g.Write(body)
		g.Value()
	}
}

// TestKeyedSignsAsSign: a Keyed's signatures are Sign's, for any body,
// from many goroutines at once (its MACs are reused).
func TestKeyedSignsAsSign(t *testing.T) {
	secret := []byte("whsec-test")
	k := NewKeyed(secret)
	secret[0] = 'X' // the Keyed keeps its own copy
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				body := []byte(strings.Repeat("b", g*37+i))
				if got, want := k.Sign(body), Sign([]byte("whsec-test"), body); got != want {
					t.Errorf("body of %d bytes: Keyed.Sign %s, Sign %s", len(body), got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkSign(b *testing.B) {
	body := []byte(strings.Repeat("x", 800))
	secret := []byte("bench-secret")
	b.Run("Sign", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Sign(secret, body)
		}
	})
	b.Run("Keyed", func(b *testing.B) {
		k := NewKeyed(secret)
		b.ReportAllocs()
		for b.Loop() {
			k.Sign(body)
		}
	})
}
