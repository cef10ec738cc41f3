package cmd

import (
	"strconv"
	"strings"
	"testing"
	"time"

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
			result{Stdout: "✗ X-Signature: the signature is not 40 hex digits (got 45 characters)\n", Code: 1}},
		{"json valid", []string{"verify", "-o", "json", bodyFile, "--signature", sig}, "", false,
			result{Stdout: `{"valid":true,"reason":"ok","message":"signature valid (` + strconv.Itoa(len(testBody)) + ` bytes)","scheme":"segment"}` + "\n"}},
		{"json mismatch", []string{"verify", "-o", "json", bodyFile, "--signature", strings.Repeat("0", 40)}, "", false,
			result{Stdout: `{"valid":false,"reason":"mismatch","message":"signature does not match: the secret is wrong or the ` + strconv.Itoa(len(testBody)) + `-byte body is not the one that was signed","scheme":"segment"}` + "\n", Code: 1}},
		{"request CRLF", []string{"verify", "--request", request("crlf.http", sig, testBody, true)}, "", false, result{Stdout: valid}},
		{"request LF uppercase", []string{"verify", "--request", request("lf.http", strings.ToUpper(sig), testBody, false)}, "", false, result{Stdout: valid}},
		{"request tampered", []string{"verify", "--request", request("bad.http", sig, strings.Replace(testBody, "u_42", "u_41", 1), true)}, "", false, result{Stdout: mismatch, Code: 1}},
		{"request header missing", []string{"verify", "-o", "json", "--request", request("nosig.http", "", testBody, true)}, "", false,
			result{Stdout: `{"valid":false,"reason":"missing","message":"the request has no X-Signature header","scheme":"segment"}` + "\n", Code: 1}},
		{"request from stdin", []string{"verify", "--request", "-"}, "POST / HTTP/1.1\r\nX-Signature: " + sig + "\r\n\r\n" + testBody, false, result{Stdout: valid}},
		// Usage and input errors: exit 2.
		{"nothing to check", []string{"verify", bodyFile}, "", false,
			result{Stderr: "error: nothing to check: give --signature VALUE or --header 'NAME: VALUE' (with FILE or stdin), or --request FILE\n", Code: 2}},
		{"request and signature", []string{"verify", "--request", bodyFile, "--signature", sig}, "", false,
			result{Stderr: "error: --request takes the body and headers from the request file: give no FILE, --signature or --header\n", Code: 2}},
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

// signedHeaders signs body with `evfwd sign --header` and returns its
// lines as --header arguments.
func signedHeaders(t *testing.T, scheme, body string, extra ...string) []string {
	t.Helper()
	args := append([]string{"sign", "--scheme", scheme, "--header"}, extra...)
	got := execute(t, testFactory(t, body, false, nil), args...)
	if got.Code != 0 {
		t.Fatalf("sign %v: %+v", args, got)
	}
	var hs []string
	for line := range strings.Lines(got.Stdout) {
		hs = append(hs, "--header", strings.TrimSuffix(line, "\n"))
	}
	return hs
}

func TestVerifySchemes(t *testing.T) {
	secrets := map[string]string{
		"segment": "s3cret", "github": "s3cret", "stripe": "whsec_stripe", "slack": "slack-signing",
		"shopify": "shpss_x", "standard": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	}
	n := strconv.Itoa(len(testBody))
	for scheme, secret := range secrets {
		hs := signedHeaders(t, scheme, testBody, "--secret", secret)
		prefix := scheme + ": "
		if scheme == "segment" {
			prefix = ""
		}
		for _, tt := range []struct {
			name string
			args []string
			body string
			want result
		}{
			{"valid", append([]string{"--scheme", scheme, "--secret", secret}, hs...), testBody, result{Stdout: "✓ " + prefix + "signature valid (" + n + " bytes)\n"}},
			{"auto", append([]string{"--scheme", "auto", "--secret", secret}, hs...), testBody, result{Stdout: "✓ " + prefix + "signature valid (" + n + " bytes)\n"}},
			{"rotation", append([]string{"--scheme", scheme, "--secret", "whsec_b2xk", "--secret", secret}, hs...), testBody, result{Stdout: "✓ " + prefix + "signature valid (" + n + " bytes, secret 2 of 2)\n"}},
			{"trailing newline", append([]string{"--scheme", scheme, "--secret", secret}, hs...), testBody + "\n",
				result{Stdout: "✗ " + prefix + "body differs: it ends with a newline the signed body did not have (without it, the signature verifies)\n", Code: 1}},
		} {
			t.Run(scheme+"/"+tt.name, func(t *testing.T) {
				got := execute(t, testFactory(t, tt.body, false, nil), append([]string{"verify"}, tt.args...)...)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestVerifyReasons(t *testing.T) {
	stripe := signedHeaders(t, "stripe", testBody, "--secret", "k", "--timestamp", "1700000000")
	old := func(args ...string) []string {
		return append([]string{"verify", "--secret", "k"}, args...)
	}
	shopifyHex := signedHeaders(t, "segment", testBody, "--secret", "k") // a hex value where shopify sends base64
	tests := []struct {
		name string
		args []string
		want result
	}{
		{"expired", old(append([]string{"--scheme", "stripe"}, stripe...)...), result{Code: 1}},
		{"tolerance 0", old(append([]string{"--scheme", "stripe", "--tolerance", "0"}, stripe...)...), result{Code: 0}},
		{"another scheme", old(append([]string{"--scheme", "segment"}, stripe...)...),
			result{Stdout: "✗ the request is signed with the stripe scheme (Stripe-Signature), not segment (X-Signature): try --scheme stripe or --scheme auto\n", Code: 1}},
		{"encoding", old("--scheme", "shopify", "--header", "X-Shopify-Hmac-Sha256: "+strings.Repeat("ab", 32)),
			result{Stdout: "✗ shopify: the signature is hex where the shopify scheme sends base64 (read that way it does not match either)\n", Code: 1}},
		{"stripe bare value with --timestamp", old("--scheme", "stripe", "--tolerance", "0", "--timestamp", "1700000000", "--signature",
			strings.TrimPrefix(strings.SplitN(stripe[1], ",", 2)[1], "v1=")), result{Code: 0}},
		{"auto by the value's form", old("--scheme", "auto", "--signature", strings.TrimPrefix(shopifyHex[1], "X-Signature: ")), result{Code: 0}},
		// Usage errors.
		{"auto, ambiguous value", old("--scheme", "auto", "--signature", strings.Repeat("a", 64)),
			result{Stderr: "error: --scheme auto cannot tell the scheme of this --signature value: name it with --scheme\n", Code: 2}},
		{"timestamp for github", old("--scheme", "github", "--signature", "sha256=00", "--timestamp", "1"),
			result{Stderr: "error: --timestamp: the github scheme signs no timestamp\n", Code: 2}},
		{"unknown scheme", old("--scheme", "svix", "--signature", "x"),
			result{Stderr: "error: unknown signature scheme \"svix\" (one of standard, stripe, slack, github, shopify, segment, auto)\n", Code: 2}},
		{"standard secret not base64", old("--scheme", "standard", "--signature", "v1,x", "--id", "m", "--timestamp", "1"),
			result{Stderr: "error: a standard webhooks secret is whsec_ followed by base64 (as Svix shows it): got a secret of 1 character (no whsec_ prefix)\n", Code: 2}},
		{"slack value without its timestamp", old("--scheme", "slack", "--signature", "v0=00"),
			result{Stderr: "error: a slack signature goes with the timestamp it signs: give --timestamp\n", Code: 2}},
		{"standard value alone", []string{"verify", "--scheme", "standard", "--secret", "whsec_b2xk", "--signature", "v1,AA=="},
			result{Stderr: "error: a standard signature goes with the timestamp and message id it signs: give --timestamp and --id\n", Code: 2}},
		{"header without colon", old("--header", "X-Signature abc"), result{Stderr: "error: --header \"X-Signature abc\": want 'NAME: VALUE'\n", Code: 2}},
		{"signature and header", old("--signature", "a", "--header", "X-Signature: a"), result{Stderr: "error: --signature and --header: give the signature one way, not both\n", Code: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := execute(t, testFactory(t, testBody, false, nil), tt.args...)
			if tt.want.Stdout == "" && tt.want.Stderr == "" {
				got.Stdout = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// expired says how old, judged against the factory's clock.
	f := testFactory(t, testBody, false, nil)
	f.Now = func() time.Time { return time.Unix(1700000000+600, 0) }
	got := execute(t, f, old(append([]string{"--scheme", "stripe", "-o", "json"}, stripe...)...)...)
	want := `{"valid":false,"reason":"expired","message":"signature valid, but signed 10 minutes ago, over the 5m0s tolerance (a replay, or clocks apart)","scheme":"stripe","timestamp":1700000000}` + "\n"
	if got.Code != 1 || got.Stdout != want {
		t.Errorf("expired json: %+v\nwant %s", got, want)
	}
}

// TestVerifyHumanAge: how far the signed timestamp is from now reads as a
// person says it (the issue's `signed 26582h18m11s ago`).
func TestVerifyHumanAge(t *testing.T) {
	stripe := signedHeaders(t, "stripe", testBody, "--secret", "k", "--timestamp", "1700000000")
	standard := signedHeaders(t, "standard", testBody, "--secret", "whsec_b2xk", "--timestamp", "1700000000", "--id", "msg_1")
	for _, tt := range []struct {
		name string
		now  time.Duration // after the signed timestamp
		args []string
		want string
	}{
		{"years", 26582*time.Hour + 18*time.Minute + 11*time.Second, append([]string{"--scheme", "stripe", "--secret", "k"}, stripe...),
			"✗ stripe: signature valid, but signed 3 years ago, over the 5m0s tolerance (a replay, or clocks apart)\n"},
		{"seconds", 42 * time.Second, append([]string{"--scheme", "stripe", "--secret", "k", "--tolerance", "30s"}, stripe...),
			"✗ stripe: signature valid, but signed 42 seconds ago, over the 30s tolerance (a replay, or clocks apart)\n"},
		{"future", -3 * time.Minute, append([]string{"--scheme", "standard", "--secret", "whsec_b2xk", "--tolerance", "1m"}, standard...),
			"✗ standard: signature valid, but its timestamp is in 3 minutes, over the 1m0s tolerance (clocks apart)\n"},
	} {
		f := testFactory(t, testBody, false, nil)
		f.Now = func() time.Time { return time.Unix(1700000000, 0).Add(tt.now) }
		got := execute(t, f, append([]string{"verify"}, tt.args...)...)
		if diff := cmp.Diff(result{Stdout: tt.want, Code: 1}, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
