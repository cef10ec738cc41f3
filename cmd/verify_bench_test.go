package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
)

// BenchmarkVerifyRecord re-checks a record file of signed requests, each
// scheme, as `evfwd verify --record` does, and reports records/s.
// bench/verify/run.sh measures the same over 100,000 requests that
// `evfwd listen --record` wrote.
func BenchmarkVerifyRecord(b *testing.B) {
	const records = 10_000
	for _, scheme := range signature.Schemes {
		secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		path := writeRecords(b, scheme, secret, records)
		b.Run(string(scheme), func(b *testing.B) {
			for b.Loop() {
				got := execute(b, testFactory(b, "", false, nil), "verify", "--record", path, "--scheme", string(scheme), "--secret", secret, "--tolerance", "0")
				if got.Code != 0 {
					b.Fatalf("%+v", got.Stderr)
				}
			}
			b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// writeRecords writes n records of webhook-sized bodies signed by scheme.
func writeRecords(b *testing.B, scheme signature.Scheme, secret string, n int) string {
	b.Helper()
	var buf bytes.Buffer
	at := time.Unix(1_700_000_000, 0)
	for i := range n {
		body := fmt.Sprintf(`{"type":"track","event":"Order Completed","userId":"u_%d","messageId":"m-%d","properties":{"total":129.95,"items":[{"sku":"a","qty":2}]},"timestamp":"2023-11-14T22:13:20Z","version":1}`, i, i)
		fs, err := signature.SignFields(scheme, [][]byte{[]byte(secret)}, []byte(body), signature.Params{Timestamp: at})
		if err != nil {
			b.Fatal(err)
		}
		rec := receiver.Record{ReceivedAt: at, Method: "POST", Path: "/hooks", Size: len(body), Status: 200,
			Headers: map[string]string{"Content-Type": "application/json"}, Body: json.RawMessage(body)}
		for _, f := range fs {
			rec.Headers[f.Name] = f.Value
		}
		line, _ := json.Marshal(rec)
		buf.Write(append(line, '\n'))
	}
	path := filepath.Join(b.TempDir(), string(scheme)+".ndjson")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}
