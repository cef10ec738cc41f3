package mapping

import (
	"encoding/json"
	"testing"
)

// benchMapping is a webhook mapping of 20 fields: paths, templates, ifs,
// literals and nested objects.
const benchMapping = `{
  "event": {"@path": "$.event"},
  "user_id": {"@path": "$.userId"},
  "anonymous_id": {"@path": "$.anonymousId"},
  "message_id": {"@path": "$.messageId"},
  "timestamp": {"@path": "$.timestamp"},
  "title": {"@template": "{{event}} by {{userId}}"},
  "source": "evfwd",
  "version": {"@literal": 2},
  "order": {
    "id": {"@path": "$.properties.order_id"},
    "total": {"@path": "$.properties.total"},
    "currency": {"@if": {"exists": {"@path": "$.properties.currency"}, "then": {"@path": "$.properties.currency"}, "else": "USD"}},
    "coupon": {"@if": {"blank": {"@path": "$.properties.coupon"}, "then": {"@path": "$.properties.coupon"}, "else": "none"}},
    "first_sku": {"@path": "$.properties.products[0].sku"},
    "summary": {"@template": "{{properties.order_id}}: {{properties.total}} {{properties.currency}}"}
  },
  "device": {
    "ip": {"@path": "$.context.ip"},
    "user_agent": {"@path": "$.context.userAgent"},
    "locale": {"@path": "$.context.locale"},
    "library": {"@path": "$.context.library.name"}
  },
  "email": {"@path": "$.context.traits.email"},
  "page_url": {"@path": "$.context.page.url"}
}`

const benchMessage = `{"type":"track","event":"Order Completed","userId":"u_42","anonymousId":"a_7f3c9e1b-2d4a-4c8e-9b1f-0e6d5c4b3a29","messageId":"m_01HZX3Q8R7K2M4N6P8S0T2V4W6","timestamp":"2024-05-01T12:00:05.123Z","properties":{"order_id":"o_50314b8e9bcf000000000000","total":27.50,"revenue":25.00,"shipping":3,"tax":2,"discount":2.5,"coupon":"hasbros","currency":"USD","products":[{"product_id":"507f1f77bcf86cd799439011","sku":"45790-32","name":"Monopoly: 3rd Edition","price":19,"quantity":1,"category":"Games"},{"product_id":"505bd76785ebb509fc183733","sku":"46493-32","name":"Uno Card Game","price":3,"quantity":2,"category":"Games"}]},"context":{"ip":"203.0.113.7","locale":"en-US","userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15","library":{"name":"analytics.js","version":"2.11.1"},"page":{"path":"/checkout","url":"https://shop.example.com/checkout"},"traits":{"email":"ada@example.com"}},"integrations":{},"version":2}`

func BenchmarkApply20(b *testing.B) {
	m, err := Parse([]byte(benchMapping))
	if err != nil {
		b.Fatal(err)
	}
	msg := []byte(benchMessage)
	dst, err := m.AppendApply(nil, msg)
	if err != nil || !json.Valid(dst) {
		b.Fatalf("%v: %s", err, dst)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if dst, err = m.AppendApply(dst[:0], msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApply20Fresh(b *testing.B) {
	m, err := Parse([]byte(benchMapping))
	if err != nil {
		b.Fatal(err)
	}
	msg := []byte(benchMessage)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Apply(msg); err != nil {
			b.Fatal(err)
		}
	}
}
