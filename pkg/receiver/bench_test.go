package receiver

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/evfwd/evfwd/pkg/signature"
)

// benchBody is a ~400-byte track message like bench/listen sends.
const benchBody = `{"type":"track","version":1,"messageId":"4f1d5b7e-9a1c-4b8e-8d2a-3c6f0e9b7a21","userId":"u_42","anonymousId":"a_7f3c","event":"Order Completed","properties":{"order_id":"o_1001","total":129.95,"currency":"EUR","coupon":"SPRING","items":3},"context":{"ip":"203.0.113.7","library":{"name":"evfwd","version":"0.1.0"},"userAgent":"Mozilla/5.0 (X11; Linux x86_64)"},"timestamp":"2024-05-01T12:00:00.123Z"}`

// discardWriter is a ResponseWriter that keeps nothing, so the benchmark
// measures the Handler alone.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkHandler is one signed request through verify, shape check,
// dedup, record and report, as `listen --secret --record -o json` runs it.
func BenchmarkHandler(b *testing.B) {
	body := []byte(benchBody)
	sig := signature.Sign(secret, body)
	out := NewLineWriter(io.Discard)
	defer out.Close()
	h, err := New(Options{Secrets: [][]byte{secret}, Record: io.Discard, OnRequest: func(r *Request) { out.WriteLine(r.Line()) }})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	serveLoop(b, h, body, []signature.Field{{Name: signature.Header, Value: sig}})
}

// serveLoop has h answer a POST of body with headers fs, b.N times.
func serveLoop(b *testing.B, h *Handler, body []byte, fs []signature.Field) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r, _ := http.NewRequest("POST", "http://x/hooks", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("User-Agent", "evfwd-webhooks/bench")
		for _, f := range fs {
			r.Header.Set(f.Name, f.Value)
		}
		h.ServeHTTP(&discardWriter{h: http.Header{}}, r)
	}
}

func BenchmarkCheckShape(b *testing.B) {
	body := []byte(benchBody)
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckShape(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandlerSchemes is BenchmarkHandler's request signed with each
// scheme, verified under auto (segment's takes the pooled-MAC path).
func BenchmarkHandlerSchemes(b *testing.B) {
	body := []byte(benchBody)
	for _, s := range signature.Schemes {
		b.Run(string(s), func(b *testing.B) {
			sec := []byte(schemeSecrets[s][0])
			fs, err := signature.SignFields(s, [][]byte{sec}, body, signature.Params{Timestamp: signedAt, ID: "msg_bench"})
			if err != nil {
				b.Fatal(err)
			}
			h, err := New(Options{Secrets: [][]byte{sec}, Record: io.Discard, Now: at(signedAt)})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			serveLoop(b, h, body, fs)
		})
	}
}
