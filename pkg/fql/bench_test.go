package fql

import (
	"fmt"
	"testing"
)

// benchMessage is a typical track call's webhook body, about 1 KB.
var benchMessage = []byte(`{"anonymousId":"a1b2c3d4-e5f6-4711-8899-aabbccddeeff","channel":"server","context":{"ip":"203.0.113.7","library":{"name":"analytics-node","version":"2.1.0"},"locale":"en-US","page":{"path":"/checkout/confirm","referrer":"https://www.example.com/cart","title":"Confirm your order","url":"https://www.example.com/checkout/confirm?step=3"},"userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15","campaign":{"name":"summer-sale","source":"newsletter"}},"event":"Order Completed","integrations":{},"messageId":"api-2hQk3v9x8Yp0Lm4NbT6rW1sZcDe","originalTimestamp":"2026-11-28T12:00:05.123Z","properties":{"checkout_id":"fksdjfsdjfisjf9sdfjsd9f","order_id":"50314b8e9bcf000000000000","affiliation":"Google Store","total":127.5,"subtotal":112.5,"revenue":115,"shipping":7,"tax":8.5,"discount":2.5,"coupon":"hasbros","currency":"USD","products":[{"product_id":"507f1f77bcf86cd799439011","sku":"45790-32","name":"Monopoly: 3rd Edition","price":19,"quantity":1,"category":"Games"},{"product_id":"505bd76785ebb509fc183733","sku":"46493-32","name":"Uno Card Game","price":3,"quantity":2,"category":"Games"}]},"receivedAt":"2026-11-28T12:00:05.456Z","sentAt":"2026-11-28T12:00:05.300Z","timestamp":"2026-11-28T12:00:05.123Z","type":"track","userId":"user_42","version":2}`)

// benchConditions are 50 subscriptions as users write them.
func benchConditions(tb testing.TB) []*Condition {
	var srcs []string
	events := []string{"Order Completed", "Product Viewed", "Signed Up", "Checkout Started", "Cart Viewed"}
	for i := range 50 {
		e := events[i%len(events)]
		var s string
		switch i % 10 {
		case 0:
			s = `type = "track"`
		case 1:
			s = fmt.Sprintf(`type = "track" and event = "%s"`, e)
		case 2:
			s = fmt.Sprintf(`event = "%s" and properties.total > %d`, e, 50+i)
		case 3:
			s = `match(event, "Order *")`
		case 4:
			s = `contains(context.page.url, "/checkout")`
		case 5:
			s = fmt.Sprintf(`(type = "page" or type = "screen") and name = "Home %d"`, i)
		case 6:
			s = fmt.Sprintf(`type = "identify" or event = "%s"`, e)
		case 7:
			s = `properties.currency = "USD" and properties.revenue >= 100 and !contains(userId, "test")`
		case 8:
			s = `properties.coupon != null and match(context.campaign.source, "news*")`
		case 9:
			s = fmt.Sprintf(`properties.products.length >= 2 or properties.products.\0.category = "Toys %d"`, i)
		}
		c, err := Parse(s)
		if err != nil {
			tb.Fatalf("Parse(%q): %v", s, err)
		}
		srcs = append(srcs, s)
		_ = c
	}
	conds := make([]*Condition, len(srcs))
	for i, s := range srcs {
		conds[i], _ = Parse(s)
	}
	return conds
}

func BenchmarkSetDecide50(b *testing.B) {
	conds := benchConditions(b)
	set := NewSet(conds)
	out := make([]bool, len(conds))
	b.SetBytes(int64(len(benchMessage)))
	b.ReportAllocs()
	for b.Loop() {
		set.Decide(benchMessage, out)
	}
}

func BenchmarkMatch(b *testing.B) {
	c, err := Parse(`type = "track" and event = "Order Completed" and properties.total > 100`)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchMessage)))
	b.ReportAllocs()
	for b.Loop() {
		if !c.Match(benchMessage) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(`(type = "track" or type = "page") and match(event, "Order *") and properties.total >= 100.5`); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSetDecideBench(t *testing.T) {
	// The benchmark's conditions decide the message as written.
	conds := benchConditions(t)
	out := make([]bool, len(conds))
	NewSet(conds).Decide(benchMessage, out)
	for i, c := range conds {
		if got := c.Match(benchMessage); got != out[i] {
			t.Errorf("%q: Match %v, Set %v", c, got, out[i])
		}
	}
	if !out[0] || out[1] || !out[3] || !out[4] || !out[7] || !out[8] || !out[9] {
		t.Errorf("decisions %v", out)
	}
}
