package rawjson

import (
	"strings"
	"testing"
)

// scanStringCases are the strings a typical analytics event holds.
var scanStringCases = []struct{ name, s string }{
	{"key", `"userId"`},
	{"url", `"https://shop.example.com/checkout/confirm"`},
	{"text", `"` + strings.Repeat("The quick brown fox jumps over the lazy dog. ", 5)[:200] + `"`},
	{"utf8", `"Café Zürich – 東京 order confirmed, thank you! ✓"`},
	{"escaped", `"line one\nline \"two\"\tand \u00e9 three"`},
	{"json", `"{\"sku\":\"SKU-1\",\"qty\":2,\"tags\":[\"a\",\"b\"]}"`},
}

func BenchmarkScanString(b *testing.B) {
	for _, c := range scanStringCases {
		b.Run(c.name, func(b *testing.B) {
			// Followed by the rest of a message, as ParseObject meets it.
			in := []byte(c.s + `,"next":1}`)
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				if end, err := ScanString(in, 0); err != nil || end != len(c.s) {
					b.Fatal(end, err)
				}
			}
		})
	}
}
