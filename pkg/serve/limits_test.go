package serve_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/fullfs"

	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// answer is a response of the collection API.
type answer struct {
	status     int
	retryAfter string
	error      string
}

// send posts a /v1/batch body with wk_web's key, gzipped when gz.
func send(t *testing.T, h *harness, body []byte, gz bool) answer {
	t.Helper()
	if gz {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
	}
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/batch", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("wk_web:")))
	if gz {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &e)
	return answer{resp.StatusCode, resp.Header.Get("Retry-After"), e.Error}
}

// sizedBatch is a /v1/batch body of exactly size bytes holding messages of
// at most per bytes, with messageIds prefix-0, prefix-1, ...
func sizedBatch(t *testing.T, prefix string, size, per int) ([]byte, []string) {
	t.Helper()
	msg := func(i, pad int) []byte {
		return fmt.Appendf(nil, `{"type":"track","userId":"u","event":"E","messageId":"%s-%d","properties":{"pad":"%s"}}`,
			prefix, i, strings.Repeat("x", pad))
	}
	body := []byte(`{"sentAt":"2024-05-01T12:00:00.123456+00:00","batch":[`)
	left := size - len(body) - len(`]}`) // for the messages and their commas
	var ids []string
	for i := 0; ; i++ {
		ids = append(ids, fmt.Sprint(prefix, "-", i))
		base := len(msg(i, 0))
		if left <= per {
			if left < base {
				t.Fatalf("sizedBatch: %d bytes left for message %d", left, i)
			}
			body = append(append(body, msg(i, left-base)...), `]}`...)
			break
		}
		n := per
		if rest := left - per - 1; rest < base+10 { // room for a last message
			n = left - 1 - (base + 10)
		}
		body = append(append(body, msg(i, n-base)...), ',')
		left -= n + 1
	}
	if len(body) != size || !json.Valid(body) {
		t.Fatalf("sizedBatch: %d bytes (want %d), valid %v", len(body), size, json.Valid(body))
	}
	return body, ids
}

// storedIDs is the messageIds of source web's deliveries.
func storedIDs(t *testing.T, h *harness) []string {
	t.Helper()
	var ids []string
	for _, d := range deliveries(t, h, store.Filter{Source: "web"}) {
		ids = append(ids, d.MessageID)
	}
	slices.Sort(ids)
	return ids
}

// TestBatchLimitThroughServe: through a running serve and its socket, a
// batch of collector.MaxBatchBytes (every official Segment library's
// largest batch is smaller) is stored, plain and gzipped; one byte more
// is refused 413 and nothing of it is stored.
func TestBatchLimitThroughServe(t *testing.T) {
	t.Parallel()
	hk := newHook(t)
	h := start(t, serve.Options{}, hk.URL)
	var want []string
	for _, gz := range []bool{false, true} {
		prefix := fmt.Sprint("gzip-", gz)
		body, ids := sizedBatch(t, prefix, collector.MaxBatchBytes, 32_768)
		if got := send(t, h, body, gz); got.status != 200 {
			t.Fatalf("%d bytes, gzip %v: %+v", len(body), gz, got)
		}
		want = append(want, ids...)
		over, _ := sizedBatch(t, prefix+"-over", collector.MaxBatchBytes+1, 32_768)
		if got := send(t, h, over, gz); got.status != 413 {
			t.Fatalf("%d bytes, gzip %v: %+v, want 413", len(over), gz, got)
		}
	}
	slices.Sort(want)
	if got := storedIDs(t, h); !slices.Equal(got, want) {
		t.Errorf("stored %d messages, want the %d of the accepted batches", len(got), len(want))
	}
}

// TestDiskFullAnswers503: serve on a SQLite file whose file system fills
// answers 503 with Retry-After, never 500, and stores nothing of what it
// refused; everything it answered 200 is stored. Once space is freed it
// answers 200 again, and the client's retry of a refused batch is stored.
func TestDiskFullAnswers503(t *testing.T) {
	t.Parallel()
	dir := fullfs.Mount(t, "4m")
	hk := newHook(t)
	h := run(t, serve.Config{
		Addr:  "127.0.0.1:0",
		Store: "sqlite://" + filepath.Join(dir, "evfwd.db"),
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true,
			Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: hk.URL}}}}}},
	}, serve.Options{Poll: 5 * time.Millisecond})

	batch := func(n int) ([]byte, []string) { return sizedBatch(t, fmt.Sprint("b", n), 80_000, 2_000) }
	var acked []string
	post := func(body []byte, ids []string) answer {
		got := send(t, h, body, false)
		switch got.status {
		case 200:
			acked = append(acked, ids...)
		case 503:
			if got.retryAfter != fmt.Sprint(collector.RetryAfterFull) || got.error != "store cannot write (full), retry later" {
				t.Fatalf("503 %+v", got)
			}
		default:
			t.Fatalf("%+v, want 200 or 503", got)
		}
		return got
	}
	post(batch(0))
	ballast := filepath.Join(dir, "ballast")
	fullfs.Fill(t, ballast, 0)
	// SQLite writes into room its WAL file has already, then fails.
	var refused [][]byte
	var refusedIDs []string
	for n := 1; len(refused) < 3; n++ {
		if n == 200 {
			t.Fatal("200 batches on a full disk and no 503")
		}
		body, ids := batch(n)
		if post(body, ids).status == 503 {
			refused = append(refused, body)
			refusedIDs = append(refusedIDs, ids...)
		}
	}
	t.Logf("on the full disk: %d messages acknowledged, %d refused", len(acked), len(refusedIDs))
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if got := post(batch(1000)); got.status != 200 {
		t.Fatalf("after space was freed: %+v", got)
	}
	slices.Sort(acked)
	if got := storedIDs(t, h); !slices.Equal(got, acked) {
		t.Fatalf("stored %d messages, want the %d acknowledged (%d refused)", len(got), len(acked), len(refusedIDs))
	}
	// The client retries what was refused.
	for _, body := range refused {
		if got := send(t, h, body, false); got.status != 200 {
			t.Fatalf("retry: %+v", got)
		}
	}
	want := slices.Concat(acked, refusedIDs)
	slices.Sort(want)
	if got := storedIDs(t, h); !slices.Equal(got, want) {
		t.Errorf("after the retries: stored %d messages, want %d", len(got), len(want))
	}
}
