package cmd

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

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
		{[]string{"--secret", "s"}, SignOptions{Secret: cli.Secret{Values: []string{"s"}}, Scheme: "segment"}},
		{[]string{"--secret-file", "f", "body.json", "--header"}, SignOptions{Secret: cli.Secret{Files: []string{"f"}}, File: "body.json", Header: true, Scheme: "segment"}},
		{[]string{"-"}, SignOptions{File: "-", Scheme: "segment"}},
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
			result{Stdout: `{"scheme":"segment","algorithm":"hmac-sha1","signature":"` + sig + `","headers":{"X-Signature":"` + sig + `"},"bytes":` + strconv.Itoa(len(testBody)) + `}` + "\n"}},
		{"empty body", []string{"sign", "--secret", "s3cret"}, "", nil, false, result{Stdout: signHex(t, "s3cret", "") + "\n"}},
		// Usage errors: exit 2, nothing on stdout.
		{"no secret", []string{"sign", bodyFile}, "", nil, false,
			result{Stderr: "error: a shared secret is required: use --secret-file FILE, EVFWD_SECRET or --secret\n", Code: 2}},
		{"two secrets, one signature", []string{"sign", "--secret", "a", "--secret-file", secretFile}, "", nil, false,
			result{Stderr: "error: a segment signature carries one MAC: give one secret, not 2\n", Code: 2}},
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

// The schemes' values, against HMACs computed apart from pkg/signature.
func TestSignSchemes(t *testing.T) {
	mac256 := func(secret, msg string) []byte {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	b64 := base64.StdEncoding.EncodeToString
	key, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	ts := "1700000000"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"github", []string{"--scheme", "github", "--header"},
			"X-Hub-Signature-256: sha256=" + hex.EncodeToString(mac256("k", testBody)) + "\nX-Hub-Signature: sha1=" + signHex(t, "k", testBody) + "\n"},
		{"stripe, two secrets", []string{"--scheme", "stripe", "--secret", "k2", "--timestamp", ts},
			"t=" + ts + ",v1=" + hex.EncodeToString(mac256("k", ts+"."+testBody)) + ",v1=" + hex.EncodeToString(mac256("k2", ts+"."+testBody)) + "\n"},
		{"stripe, RFC 3339 time", []string{"--scheme", "stripe", "--timestamp", "2023-11-14T22:13:20Z"},
			"t=" + ts + ",v1=" + hex.EncodeToString(mac256("k", ts+"."+testBody)) + "\n"},
		{"slack", []string{"--scheme", "slack", "--timestamp", ts, "--header"},
			"X-Slack-Request-Timestamp: " + ts + "\nX-Slack-Signature: v0=" + hex.EncodeToString(mac256("k", "v0:"+ts+":"+testBody)) + "\n"},
		{"shopify", []string{"--scheme", "shopify"}, b64(mac256("k", testBody)) + "\n"},
		{"standard", []string{"--scheme", "standard", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "--id", "msg_1", "--timestamp", ts, "--header"},
			"Webhook-Id: msg_1\nWebhook-Timestamp: " + ts + "\nWebhook-Signature: v1," + b64(mac256(string(key), "msg_1."+ts+"."+testBody)) + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := []string{"--secret", "k"}
			if tt.name == "standard" {
				secret = nil
			}
			args := append(append([]string{"sign"}, secret...), tt.args...)
			got := execute(t, testFactory(t, testBody, false, nil), args...)
			if diff := cmp.Diff(result{Stdout: tt.want}, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"timestamp for github", []string{"--scheme", "github", "--timestamp", ts}, "--timestamp: the github scheme signs no timestamp"},
		{"id for stripe", []string{"--scheme", "stripe", "--id", "m"}, "--id: the stripe scheme signs no message id"},
		{"bad time", []string{"--scheme", "slack", "--timestamp", "yesterday"}, `--timestamp "yesterday": want Unix seconds or RFC 3339 (2024-05-01T12:00:00Z)`},
		{"standard secret", []string{"--scheme", "standard"}, `a standard webhooks secret is whsec_ followed by base64 (as Svix shows it): got a secret of 1 character (no whsec_ prefix)`},
		{"auto", []string{"--scheme", "auto"}, `unknown signature scheme "auto" (one of standard, stripe, slack, github, shopify, segment)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := execute(t, testFactory(t, testBody, false, nil), append([]string{"sign", "--secret", "k"}, tt.args...)...)
			if diff := cmp.Diff(result{Stderr: "error: " + tt.want + "\n", Code: 2}, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// Now by default: a fresh timestamp and message id each time.
	a := execute(t, testFactory(t, testBody, false, nil), "sign", "--scheme", "standard", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "-o", "json")
	var res signResult
	if err := json.Unmarshal([]byte(a.Stdout), &res); err != nil || res.ID == "" || time.Since(time.Unix(res.Timestamp, 0)) > time.Minute || len(res.Headers) != 3 {
		t.Errorf("standard by default: %+v, %v", res, err)
	}
}
