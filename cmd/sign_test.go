package cmd

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const testBody = `{"type":"track","event":"Order Completed","userId":"u_42","version":1}`

// signHex is an HMAC-SHA1 computed apart from pkg/signature.
func signHex(t *testing.T, secret, body string) string {
	t.Helper()
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func TestSignFlags(t *testing.T) {
	tests := []struct {
		args []string
		want SignOptions
	}{
		{[]string{"--secret", "s"}, SignOptions{Secret: cli.Secret{Values: []string{"s"}}}},
		{[]string{"--secret-file", "f", "body.json", "--header"}, SignOptions{Secret: cli.Secret{Files: []string{"f"}}, File: "body.json", Header: true}},
		{[]string{"-"}, SignOptions{File: "-"}},
	}
	for _, tt := range tests {
		f := testFactory(t, "", false, nil)
		var got *SignOptions
		cmd := NewCmdSign(f, func(o *SignOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if diff := cmp.Diff(&tt.want, got, cmpopts.IgnoreFields(SignOptions{}, "IO", "Format"), cmpopts.IgnoreUnexported(cli.Secret{})); diff != "" {
			t.Errorf("%v mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestSign(t *testing.T) {
	sig := signHex(t, "s3cret", testBody)
	bodyFile := writeFile(t, "body.json", testBody)
	secretFile := writeFile(t, "secret", "s3cret\n")
	tests := []struct {
		name  string
		args  []string
		stdin string
		env   map[string]string
		tty   bool
		want  result
	}{
		{"file", []string{"sign", "--secret", "s3cret", bodyFile}, "", nil, false, result{Stdout: sig + "\n"}},
		{"stdin", []string{"sign", "--secret", "s3cret"}, testBody, nil, false, result{Stdout: sig + "\n"}},
		{"dash is stdin, tty", []string{"sign", "--secret", "s3cret", "-"}, testBody, nil, true, result{Stdout: sig + "\n"}},
		{"secret file trims newline", []string{"sign", "--secret-file", secretFile, bodyFile}, "", nil, false, result{Stdout: sig + "\n"}},
		{"env secret", []string{"sign", bodyFile}, "", map[string]string{"EVFWD_SECRET": "s3cret"}, false, result{Stdout: sig + "\n"}},
		{"flag beats env", []string{"sign", "--secret", "s3cret", bodyFile}, "", map[string]string{"EVFWD_SECRET": "other"}, false, result{Stdout: sig + "\n"}},
		{"header", []string{"sign", "--secret", "s3cret", "--header", bodyFile}, "", nil, false, result{Stdout: "X-Signature: " + sig + "\n"}},
		{"json", []string{"sign", "-o", "json", "--secret", "s3cret", bodyFile}, "", nil, false,
			result{Stdout: `{"algorithm":"hmac-sha1","signature":"` + sig + `","bytes":` + strconv.Itoa(len(testBody)) + `}` + "\n"}},
		{"empty body", []string{"sign", "--secret", "s3cret"}, "", nil, false, result{Stdout: signHex(t, "s3cret", "") + "\n"}},
		// Usage errors: exit 2, nothing on stdout.
		{"no secret", []string{"sign", bodyFile}, "", nil, false,
			result{Stderr: "error: a shared secret is required: use --secret-file FILE, EVFWD_SECRET or --secret\n", Code: 2}},
		{"both secret flags", []string{"sign", "--secret", "a", "--secret-file", secretFile}, "", nil, false,
			result{Stderr: "error: 2 secrets given: sign takes one\n", Code: 2}},
		{"missing file", []string{"sign", "--secret", "a", "/nonexistent/body"}, "", nil, false,
			result{Stderr: "error: open /nonexistent/body: no such file or directory\n", Code: 2}},
		{"missing secret file", []string{"sign", "--secret-file", "/nonexistent/s"}, "", nil, false,
			result{Stderr: "error: secret file: open /nonexistent/s: no such file or directory\n", Code: 2}},
		{"empty secret file", []string{"sign", "--secret-file", "/dev/null"}, "", nil, false,
			result{Stderr: "error: secret file /dev/null is empty\n", Code: 2}},
		{"two files", []string{"sign", "--secret", "a", "x", "y"}, "", nil, false,
			result{Stderr: "error: accepts at most 1 arg(s), received 2\n", Code: 2}},
		{"bad output", []string{"sign", "-o", "yaml", "--secret", "a"}, "", nil, false,
			result{Stderr: "error: invalid --output \"yaml\": want text or json\n", Code: 2}},
		{"unknown flag", []string{"sign", "--nope"}, "", nil, false,
			result{Stderr: "error: unknown flag: --nope\n", Code: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := execute(t, testFactory(t, tt.stdin, tt.tty, tt.env), tt.args...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSignConfigPrecedence(t *testing.T) {
	bodyFile := writeFile(t, "body.json", testBody)
	cfg := writeFile(t, "config.yaml", "sign:\n  secret: s3cret\n")
	got := execute(t, testFactory(t, "", false, nil), "sign", "--config", cfg, bodyFile)
	if diff := cmp.Diff(result{Stdout: signHex(t, "s3cret", testBody) + "\n"}, got); diff != "" {
		t.Errorf("config secret: mismatch (-want +got):\n%s", diff)
	}
	got = execute(t, testFactory(t, "", false, map[string]string{"EVFWD_SECRET": "other"}), "sign", "--config", cfg, bodyFile)
	if diff := cmp.Diff(result{Stdout: signHex(t, "other", testBody) + "\n"}, got); diff != "" {
		t.Errorf("env beats config: mismatch (-want +got):\n%s", diff)
	}
	broken := writeFile(t, "broken.yaml", "sign:\n  secret: [unclosed\n")
	got = execute(t, testFactory(t, "", false, nil), "sign", "--config", broken, bodyFile)
	if got.Code != 2 || !strings.Contains(got.Stderr, "config "+broken+": yaml: line ") {
		t.Errorf("broken config: got %+v, want exit 2 naming the file and line", got)
	}
	got = execute(t, testFactory(t, "", false, map[string]string{"EVFWD_SECRET": "s"}), "sign", "--config", "/nonexistent/c.yaml", bodyFile)
	if got.Code != 2 || !strings.Contains(got.Stderr, "/nonexistent/c.yaml") {
		t.Errorf("named config missing: got %+v, want exit 2", got)
	}
}
