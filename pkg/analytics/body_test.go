package analytics_test

import (
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/google/go-cmp/cmp"
)

// BatchBody is byte for byte the body the client sends, for one message
// and for several.
func TestBatchBodyIsTheRequest(t *testing.T) {
	var msgs []*message.Raw
	for _, l := range []string{
		`{"type":"track","userId":"u","event":"Paid","properties":{"amount":12345678901234567890.000000001},"messageId":"m-1","timestamp":"2024-05-01T12:00:00Z"}`,
		`{"type":"identify","anonymousId":"a","traits":{"x":[1.10]},"messageId":"m-2","timestamp":"2024-05-01T14:00:00+02:00"}`,
		`{"type":"alias","userId":"u","previousId":"a","messageId":"m-3","timestamp":"2024-05-01"}`,
	} {
		r, err := message.ParseRaw([]byte(l))
		must(t, err)
		msgs = append(msgs, r)
	}
	g := newGate()
	rec := newRecorder(t, holdFirst(g))
	cfg := testConfig(rec, nil)
	cfg.Version = "1.2.3"
	c := newClient(t, cfg)
	must(t, c.Enqueue(msgs[0]))
	rec.waitArrival(0) // the first message goes alone
	must(t, c.Enqueue(msgs[1]))
	must(t, c.Enqueue(msgs[2]))
	g.open()
	flush(t, c)
	var sent, built []string
	for _, r := range rec.requests() {
		sent = append(sent, string(r.Body))
	}
	for _, batch := range [][]*message.Raw{msgs[:1], msgs[1:]} {
		b, err := analytics.BatchBody("1.2.3", fixedNow, batch...)
		must(t, err)
		built = append(built, string(b))
	}
	if diff := cmp.Diff(sent, built); diff != "" {
		t.Errorf("mismatch (-sent +BatchBody):\n%s", diff)
	}
}

func TestBatchBodyRefuses(t *testing.T) {
	big, err := message.ParseRaw([]byte(`{"type":"track","userId":"u","event":"E","properties":{"blob":"` + strings.Repeat("x", 40_000) + `"}}`))
	must(t, err)
	if _, err := analytics.BatchBody("", fixedNow, big); !strings.Contains(err.Error(), "over the 32768-byte limit") {
		t.Errorf("oversized message: got %v", err)
	}
	ok, err := message.ParseRaw([]byte(`{"type":"track","userId":"u","event":"E","properties":{"blob":"` + strings.Repeat("x", 30_000) + `"}}`))
	must(t, err)
	msgs := make([]*message.Raw, 20) // 600 KB
	for i := range msgs {
		msgs[i] = ok
	}
	if _, err := analytics.BatchBody("", fixedNow, msgs...); err == nil || !strings.Contains(err.Error(), "over the 500000-byte limit") {
		t.Errorf("oversized body: got %v", err)
	}
}
