package cmd

import (
	"strings"
	"testing"
	"time"
)

// TestTriggerRefusedFailsFast: trigger to a port nothing listens on says
// so at once, on the real clock and the default retry schedule (issue 41:
// 15-28 s of retries before), while a 503 is still retried.
func TestTriggerRefusedFailsFast(t *testing.T) {
	closed := closedURL(t)
	start := time.Now()
	r := execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", closed+"/hooks")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %v, want at once (under 2s)", took)
	}
	if want := "nothing listens at " + closed + "/hooks (connection refused): is your endpoint running, on that port?\n"; r.Code != 1 || !strings.HasSuffix(r.Stderr, want) {
		t.Errorf("exit %d, stderr %q; want 1 ending %q", r.Code, r.Stderr, want)
	}
	if n := strings.Count(r.Stdout, "connection_refused"); n != 1 || !strings.Contains(r.Stdout, "connection refused: giving up") {
		t.Errorf("%d refused attempts, want 1, given up:\n%s", n, r.Stdout)
	}

	failing := newEndpoint(t, 503, 200)
	r = execute(t, testFactory(t, "", false, nil), "trigger", "track", "--url", failing.URL, "--retry-initial", "1ms")
	if r.Code != 0 || strings.Count(r.Stdout, "→ 503") != 1 {
		t.Errorf("503 then 200: exit %d, want 0 after one retry:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
