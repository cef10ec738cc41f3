package inspector_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/pkg/inspector"
	"github.com/evfwd/evfwd/pkg/receiver"
)

// fakeCurl stands in for curl in the shell: it prints each argument and
// then stdin, so a test sees exactly what curl would have been given.
const fakeCurl = `curl() { for a in "$@"; do printf '%s\0' "$a"; done; printf 'BODY\0'; cat; }` + "\n"

// runCurl runs CurlCommand's output under sh with fakeCurl and returns
// curl's arguments and the body it read.
func runCurl(t testing.TB, rec *receiver.Record, target string) ([]string, []byte) {
	t.Helper()
	cmd := inspector.CurlCommand(rec, target)
	out, err := exec.Command("sh", "-c", fakeCurl+cmd).Output()
	if err != nil {
		t.Fatalf("sh: %v\n%s", err, cmd)
	}
	args, body, ok := bytes.Cut(out, []byte("BODY\x00"))
	if !ok {
		t.Fatalf("curl was not run:\n%s\noutput %q", cmd, out)
	}
	return strings.Split(strings.TrimSuffix(string(args), "\x00"), "\x00"), body
}

// FuzzCurlCommand feeds a request's untrusted parts (body, path, header
// values) to CurlCommand and checks that a shell runs curl with exactly
// them: no byte of a webhook can become a command of its own.
func FuzzCurlCommand(f *testing.F) {
	if _, err := exec.LookPath("sh"); err != nil {
		f.Skip("no sh")
	}
	f.Add([]byte(`{"a":1}`), "v", "/")
	f.Add([]byte("it's\n'; rm -rf / #\n"), `'"$(id)"'`, "/x?a='b'")
	f.Add([]byte("\x00\xff$HOME `id`"), "\\", "/$(id)")
	f.Add([]byte(""), "", "/")
	f.Fuzz(func(t *testing.T, body []byte, value, path string) {
		if strings.ContainsAny(value, "\x00\r\n") || strings.ContainsAny(path, "\x00") {
			t.Skip("not in a header or URL")
		}
		rec := &receiver.Record{Method: "POST", Path: path, Headers: map[string]string{"X-Signature": value, "Content-Type": "application/json"}}
		raw := string(body)
		rec.BodyRaw = &raw
		rec.BodyBase64 = nil
		if len(body) == 0 {
			rec.BodyRaw = nil
			rec.Body = nil
		}
		target := "http://127.0.0.1:1" + path
		args, got := runCurl(t, rec, target)
		if !bytes.Equal(got, body) {
			t.Fatalf("body %q arrived as %q", body, got)
		}
		wantSig := "X-Signature: " + value
		if strings.TrimSpace(value) == "" {
			wantSig = "X-Signature;"
		}
		want := []string{"-sS", "--globoff", "-X", "POST", target, "-H", "Content-Type: application/json", "-H", wantSig, "--data-binary", "@-"}
		if strings.Join(args, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("curl got %q, want %q", args, want)
		}
	})
}

func TestCurlWithoutContentTypeSendsNone(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	raw := "a=b"
	rec := &receiver.Record{Method: "PUT", Path: "/", Headers: map[string]string{"Host": "x", "Content-Length": "3"}, BodyRaw: &raw}
	args, body := runCurl(t, rec, "http://h/")
	want := "-sS\x00--globoff\x00-X\x00PUT\x00http://h/\x00-H\x00Content-Type:\x00--data-binary\x00@-"
	if strings.Join(args, "\x00") != want || string(body) != raw {
		t.Errorf("curl got %q and %q", args, body)
	}
}
