package cmd

import (
	"strings"
	"testing"
)

// Counts in text output agree with their nouns: one delivery, not
// "1 deliveries".
func TestDeliveriesTextAgreesInNumber(t *testing.T) {
	path, _ := fixedStore(t)
	env := map[string]string{"EVFWD_STORE": "sqlite://" + path}
	res := execute(t, testFactory(t, "", false, env), "deliveries", "retry", "1")
	if res.Code != 0 || res.Stdout != "1 delivery scheduled for retry\n" {
		t.Errorf("retry: code %d, stdout %q; want 0 and 1 delivery scheduled for retry", res.Code, res.Stdout)
	}
	res = execute(t, testFactory(t, "", false, env), "deliveries", "prune", "--older-than", "1h")
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, "pruned 0 messages (0 deliveries, 0 attempts) received before ") {
		t.Errorf("prune: code %d, stdout %q", res.Code, res.Stdout)
	}
}

func TestPlural(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{{0, "0 attempts"}, {1, "1 attempt"}, {2, "2 attempts"}, {1234567, "1,234,567 attempts"}} {
		if got := plural(tt.n, "attempt", "attempts"); got != tt.want {
			t.Errorf("plural(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestSendOneBadLineAgreesInNumber(t *testing.T) {
	file := writeFile(t, "one.ndjson", "not json\n")
	res := execute(t, clientFactory(t, "", newCollectServer(t, nil)), "send", file)
	if res.Code != 1 || !strings.HasSuffix(res.Stderr, "error: 1 of 1 line not accepted (1 rejected as bad input, 0 not delivered)\n") {
		t.Errorf("exit %d, stderr %q", res.Code, res.Stderr)
	}
	if !strings.Contains(res.Stdout, ": 1 line from ") {
		t.Errorf("summary %q, want it to count 1 line", res.Stdout)
	}
}

// trigger counts tries of the one message, and requests only when a try
// went on to further URLs: "3 deliveries" misread as three messages.
func TestTriggerCountsTriesAndRequests(t *testing.T) {
	a, b := newEndpoint(t, 500), newEndpoint(t, 500, 200)
	r := execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", a.URL, "--url", b.URL, "--retry-initial", "1ms")
	if r.Code != 0 || !strings.HasSuffix(r.Stdout, " (2 tries, 4 requests)\n") {
		t.Errorf("exit %d, stdout %q; want 0 and (2 tries, 4 requests)", r.Code, r.Stdout)
	}
}

func TestVerifyOneByteAgreesInNumber(t *testing.T) {
	body := writeFile(t, "one.json", "1")
	sig := execute(t, testFactory(t, "", false, nil), "sign", "--secret", "s", body)
	res := execute(t, testFactory(t, "", false, nil), "verify", body, "--secret", "s", "--signature", strings.TrimSpace(sig.Stdout))
	if res.Code != 0 || !strings.Contains(res.Stdout+res.Stderr, "signature valid (1 byte)") {
		t.Errorf("exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
}
