package collector_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/store"
)

// discard is a store that takes everything and keeps nothing, so a
// benchmark measures the collector alone.
type discard struct{}

func (discard) Ingest(context.Context, []store.Message) error { return nil }

// benchTrack is a track call as the official libraries send one.
const benchTrack = `{"type":"track","event":"Order Completed","userId":"u_%d","messageId":"9a8b7c6d-5e4f-4a3b-8c2d-%012d",` +
	`"timestamp":"2024-05-01T12:00:03.000Z","properties":{"order_id":"o_1001","revenue":99.90,"currency":"EUR",` +
	`"products":[{"sku":"sku-1","quantity":2,"price":49.95}]},"context":{"library":{"name":"analytics-node","version":"2.1.0"},"ip":"203.0.113.7"},` +
	`"integrations":{}}`

// benchBrowserTrack is a track as Analytics.js 2.0 posts one to /v1/t.
const benchBrowserTrack = `{"timestamp":"2024-05-01T12:00:03.512Z","integrations":{},"type":"track","event":"Add to Cart",` +
	`"properties":{"sku":"sku-1","price":49.95},"context":{"page":{"path":"/cart","referrer":"","search":"","title":"Cart",` +
	`"url":"https://www.example.com/cart"},"userAgent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36",` +
	`"userAgentData":{"brands":[{"brand":"Chromium","version":"156"}],"mobile":false,"platform":"Linux"},"locale":"en-GB",` +
	`"library":{"name":"analytics.js","version":"npm:next-1.84.3"},"timezone":"Europe/London"},"messageId":"ajs-next-1714564803512-0b6e4d3c-1a2b-4c5d-8e9f-0a1b2c3d4e5f",` +
	`"anonymousId":"4c7c4e1e-2b7e-4b8e-9d3f-5a6b7c8d9e0f","writeKey":"wk_web","userId":null,"sentAt":"2024-05-01T12:00:03.520Z",` +
	`"_metadata":{"bundled":["Segment.io"],"unbundled":[],"bundledIds":[]}}`

// BenchmarkCollect is the collector's work on one request: read, parse,
// check and complete each message, build what is stored.
func BenchmarkCollect(b *testing.B) {
	msgs := make([]string, 100)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(benchTrack, i, i)
	}
	for _, bc := range []struct {
		name, path, body string
		kind             collector.Kind
	}{
		{"batch100", "/v1/batch", `{"batch":[` + strings.Join(msgs, ",") + `],"sentAt":"2024-05-01T12:00:04.000Z"}`, ""},
		{"batch100-context", "/v1/batch", `{"batch":[` + strings.Join(msgs, ",") + `],"sentAt":"2024-05-01T12:00:04.000Z",` +
			`"context":{"ip":"9.9.9.9","locale":"en-GB"},"integrations":{"All":true}}`, ""},
		{"track", "/v1/track", msgs[0], ""},
		{"t-web", "/v1/t", benchBrowserTrack, collector.KindWeb},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h, err := collector.New(collector.Config{
				Sources: []collector.Source{{Name: "web", WriteKey: "wk_web", Kind: bc.kind, Destinations: []string{store.DestinationWebhooks}}},
				Store:   discard{},
				Now:     func() time.Time { return now },
			})
			if err != nil {
				b.Fatal(err)
			}
			body := []byte(bc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, bc.path, bytes.NewReader(body))
				r.SetBasicAuth("wk_web", "")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
