// Command gen writes N mixed NDJSON calls of about 350 bytes each (all six
// types, realistic fields) to stdout, deterministically.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
)

func main() {
	n := flag.Int("n", 1_000_000, "lines")
	flag.Parse()
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	for i := 0; i < *n; i++ {
		u := i % 50_000
		ts := 1714521600000 + int64(i)*37
		switch i % 10 {
		case 0:
			fmt.Fprintf(w, `{"type":"identify","userId":"u_%06d","traits":{"email":"user%06d@example.com","name":"User Number %d","plan":"pro","seats":%d,"createdAt":"2024-04-02T09:15:00Z"},"context":{"ip":"203.0.113.%d","locale":"en-US"},"timestamp":%d,`, u, u, u, i%40, i%250, ts)
		case 1, 2:
			fmt.Fprintf(w, `{"type":"page","anonymousId":"a_%08x","name":"Pricing","category":"Marketing","properties":{"url":"https://shop.example/pricing?ref=%d","referrer":"https://www.google.com/","title":"Pricing - Example Shop"},"context":{"ip":"198.51.100.%d"},"timestamp":%d,`, uint32(i*2654435761), i, i%250, ts)
		case 3, 4, 5, 6:
			fmt.Fprintf(w, `{"type":"track","userId":"u_%06d","event":"Order Completed","properties":{"order_id":"o_%09d","total":%d.%02d,"currency":"EUR","products":[{"product_id":"sku-%d","quantity":%d}],"coupon":null},"context":{"ip":"203.0.113.%d"},"timestamp":%d,`, u, i, i%500, i%100, i%9000, 1+i%3, i%250, ts)
		case 7:
			fmt.Fprintf(w, `{"type":"screen","userId":"u_%06d","name":"Checkout","category":"Shop","properties":{"step":%d,"variant":"B"},"context":{"app":{"name":"Example Shop","version":"5.3.1"},"device":{"model":"iPhone15,2","type":"ios"},"os":{"name":"iOS","version":"17.4.1"}},"timestamp":%d,`, u, i%4, ts)
		case 8:
			fmt.Fprintf(w, `{"type":"group","userId":"u_%06d","groupId":"g_%05d","traits":{"name":"Company %d Inc","industry":"Manufacturing","employees":%d,"plan":"enterprise","website":"https://company%d.example"},"timestamp":%d,`, u, u%5000, u%5000, 10+i%990, u%5000, ts)
		case 9:
			fmt.Fprintf(w, `{"type":"alias","previousId":"a_%08x","userId":"u_%06d","context":{"ip":"203.0.113.%d","userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko)"},"timestamp":%d,`, uint32(i*2654435761), u, i%250, ts)
		}
		// Exports carry their messageIds and integrations.
		fmt.Fprintf(w, `"messageId":"%08x-%04x-4%03x-8%03x-%012x","integrations":{"All":true,"Mixpanel":false}}`+"\n",
			uint32(i*2654435761), i%0xffff, i%0xfff, (i/7)%0xfff, uint64(i)*11400714819323198485%(1<<48))
	}
}
