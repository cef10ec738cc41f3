package receiver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/internal/syncbuf"
	"github.com/evfwd/evfwd/pkg/signature"
)

// TestRedactHeaders: a header named in RedactHeaders, in any case, keeps
// its value out of the report and the record, while the signature is
// checked, and the request relayed, with the value that came.
func TestRedactHeaders(t *testing.T) {
	const secret, cookie, auth = "s3cret", "evfwd_ui=SESSION-SENTINEL", "Bearer AUTH-SENTINEL"
	var relayed http.Header
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { relayed = r.Header.Clone() }))
	defer app.Close()
	var rec syncbuf.Buffer
	var got *Request
	h, err := New(Options{
		Secrets: [][]byte{[]byte(secret)}, ForwardTo: app.URL, Record: &rec,
		RedactHeaders: []string{"cookie", "AUTHORIZATION", "X-Signature"},
		OnRequest:     func(r *Request) { got = r; r.Line() },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	body := `{"type":"track","event":"E","userId":"u","messageId":"m1"}`
	req, _ := http.NewRequest("POST", srv.URL+"/", strings.NewReader(body))
	req.Header.Set("Cookie", cookie)
	req.Header.Set("Authorization", auth)
	req.Header.Set(signature.Header, signature.Sign([]byte(secret), []byte(body)))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	srv.Close()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || got.Signature.Verdict != SigValid {
		t.Errorf("status %d, verdict %s: want 200 and valid (checked before redaction)", resp.StatusCode, got.Signature.Verdict)
	}
	if relayed.Get("Cookie") != cookie || relayed.Get("Authorization") != auth {
		t.Errorf("relayed Cookie %q, Authorization %q: want the values that came", relayed.Get("Cookie"), relayed.Get("Authorization"))
	}
	for _, name := range []string{"Cookie", "Authorization", signature.Header} {
		if v := got.Header.Get(name); v != Redacted {
			t.Errorf("report's %s = %q, want %q", name, v, Redacted)
		}
	}
	line := rec.String()
	if strings.Contains(line, "SENTINEL") || !strings.Contains(line, `"Cookie":"[redacted]"`) || !strings.Contains(line, `"Authorization":"[redacted]"`) {
		t.Errorf("record line: %s", line)
	}

	if _, err := New(Options{RedactHeaders: []string{"X Bad"}}); err == nil {
		t.Error(`RedactHeaders "X Bad": no error`)
	}
}
