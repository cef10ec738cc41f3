package message

import (
	"testing"
	"time"
)

// benchLines are NDJSON lines as `evfwd send` meets them: a replayed
// export with Unix-millisecond timestamps and messageIds, and a bare call
// that needs both filled in.
var benchLines = map[string]string{
	"replayed": `{"type":"track","userId":"u_000003","event":"Order Completed","properties":{"order_id":"o_000000003","total":3.03,"currency":"EUR","products":[{"sku":"SKU-3","price":3.03,"quantity":1}]},"context":{"ip":"203.0.113.3","locale":"en-US"},"timestamp":1714521600111,"messageId":"0b1c4b2e-7d1f-4f67-a3c4-5d2b8e0f9a11","integrations":{"All":true,"Mixpanel":false}}`,
	"bare":     `{"type":"track","userId":"user_8f14e45f","event":"Order Completed","properties":{"order_id":"ord_0042","total":129.95,"currency":"EUR","products":[{"sku":"SKU-1","price":129.95,"quantity":1}]},"context":{"ip":"203.0.113.7","locale":"en-US"}}`,
}

// BenchmarkRawLine is the per-line work of `send`: parse and check a line
// into a reused Raw, fill what it lacks, and encode it for the wire.
func BenchmarkRawLine(b *testing.B) {
	opts := &EncodeOptions{Library: LibraryJSON("evfwd", "1.0.0")}
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	newID := func() string { return "9e3779b1-0001-4001-8000-79b97f4a7c15" }
	for name, line := range benchLines {
		b.Run(name, func(b *testing.B) {
			data := []byte(line)
			var out []byte
			var r Raw
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Parse(data); err != nil {
					b.Fatal(err)
				}
				r.Fill(newID, func() time.Time { return now })
				var err error
				if out, err = r.AppendJSON(out[:0], opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
