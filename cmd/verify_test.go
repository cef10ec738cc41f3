package cmd

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestVerify(t *testing.T) {
	sig := signHex(t, "s3cret", testBody)
	bodyFile := writeFile(t, "body.json", testBody)
	nlFile := writeFile(t, "body-nl.json", testBody+"\n")
	request := func(name, sigHeader, body string, crlf bool) string {
		eol := "\n"
		if crlf {
			eol = "\r\n"
		}
		head := "POST /hooks HTTP/1.1" + eol + "Host: 127.0.0.1:8788" + eol + "Content-Type: application/json" + eol
		if sigHeader != "" {
			head += "X-Signature: " + sigHeader + eol
		}
		head += "Content-Length: " + strconv.Itoa(len(body)) + eol + eol
		return writeFile(t, name, head+body+"trailing bytes past Content-Length")
	}
	valid := "✓ signature valid (" + strconv.Itoa(len(testBody)) + " bytes)\n"
	mismatch := "✗ signature does not match: the secret is wrong or the " + strconv.Itoa(len(testBody)) + "-byte body is not the one that was signed\n"
	tests := []struct {
		name  string
		args  []string
		stdin string
		tty   bool
		want  result
	}{
		{"valid file", []string{"verify", bodyFile, "--signature", sig}, "", false, result{Stdout: valid}},
		{"valid stdin tty", []string{"verify", "--signature", sig}, testBody, true, result{Stdout: valid}},
		{"uppercase hex", []string{"verify", bodyFile, "--signature", strings.ToUpper(sig)}, "", false, result{Stdout: valid}},
		{"wrong secret", []string{"verify", bodyFile, "--signature", signHex(t, "other", testBody)}, "", false, result{Stdout: mismatch, Code: 1}},
		{"tampered", []string{"verify", "--signature", sig}, strings.Replace(testBody, "42", "43", 1), false, result{Stdout: mismatch, Code: 1}},
		{"trailing newline", []string{"verify", nlFile, "--signature", sig}, "", false,
			result{Stdout: "✗ body differs: it ends with a newline the signed body did not have (without it, the signature verifies)\n", Code: 1}},
		{"not hex", []string{"verify", bodyFile, "--signature", "sha1=" + sig}, "", false,
			result{Stdout: "✗ the signature is not 40 hex digits (got 45 characters)\n", Code: 1}},
		{"json valid", []string{"verify", "-o", "json", bodyFile, "--signature", sig}, "", false,
			result{Stdout: `{"valid":true,"reason":"ok","message":"signature valid (` + strconv.Itoa(len(testBody)) + ` bytes)"}` + "\n"}},
		{"json mismatch", []string{"verify", "-o", "json", bodyFile, "--signature", strings.Repeat("0", 40)}, "", false,
			result{Stdout: `{"valid":false,"reason":"mismatch","message":"signature does not match: the secret is wrong or the ` + strconv.Itoa(len(testBody)) + `-byte body is not the one that was signed"}` + "\n", Code: 1}},
		{"request CRLF", []string{"verify", "--request", request("crlf.http", sig, testBody, true)}, "", false, result{Stdout: valid}},
		{"request LF uppercase", []string{"verify", "--request", request("lf.http", strings.ToUpper(sig), testBody, false)}, "", false, result{Stdout: valid}},
		{"request tampered", []string{"verify", "--request", request("bad.http", sig, strings.Replace(testBody, "u_42", "u_41", 1), true)}, "", false, result{Stdout: mismatch, Code: 1}},
		{"request header missing", []string{"verify", "-o", "json", "--request", request("nosig.http", "", testBody, true)}, "", false,
			result{Stdout: `{"valid":false,"reason":"missing","message":"the request has no X-Signature header (was the shared secret set on the sender?)"}` + "\n", Code: 1}},
		{"request from stdin", []string{"verify", "--request", "-"}, "POST / HTTP/1.1\r\nX-Signature: " + sig + "\r\n\r\n" + testBody, false, result{Stdout: valid}},
		// Usage and input errors: exit 2.
		{"nothing to check", []string{"verify", bodyFile}, "", false,
			result{Stderr: "error: nothing to check: give --signature HEX (with FILE or stdin) or --request FILE\n", Code: 2}},
		{"request and signature", []string{"verify", "--request", bodyFile, "--signature", sig}, "", false,
			result{Stderr: "error: --request takes the body and signature from the request file: give no FILE or --signature\n", Code: 2}},
		{"request not http", []string{"verify", "--request", bodyFile}, "", false,
			result{Stderr: "error: " + bodyFile + ": line 1: not an HTTP request line: " + strconv.Quote(testBody) + "\n", Code: 2}},
		{"request short body", []string{"verify", "--request", "-"}, "POST / HTTP/1.1\r\nX-Signature: " + sig + "\r\nContent-Length: 500\r\n\r\n" + testBody, false,
			result{Stderr: "error: read stdin: body is shorter than its Content-Length\n", Code: 2}},
		{"missing file", []string{"verify", "/nonexistent", "--signature", sig}, "", false,
			result{Stderr: "error: open /nonexistent: no such file or directory\n", Code: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(tt.args, "--secret", "s3cret")
			got := execute(t, testFactory(t, tt.stdin, tt.tty, nil), args...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if strings.Contains(got.Stdout+got.Stderr, sig) {
				t.Error("output contains the expected signature")
			}
		})
	}
}

func TestVerifyNeedsSecret(t *testing.T) {
	got := execute(t, testFactory(t, testBody, false, nil), "verify", "--signature", strings.Repeat("a", 40))
	if got.Code != 2 || !strings.Contains(got.Stderr, "shared secret is required") {
		t.Errorf("got %+v, want exit 2 asking for a secret", got)
	}
}
