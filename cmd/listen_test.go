package cmd

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const (
	listenSecret = "s3cret"
	trackMsg     = `{"type":"track","version":1,"userId":"u_42","event":"Order Completed","messageId":"m1","timestamp":"2024-05-01T12:00:05.000Z"}`
	identifyMsg  = `{"type":"identify","version":1,"userId":"u_7","traits":{"plan":"pro"},"messageId":"m2","timestamp":"2024-05-01T12:00:05.000Z"}`
	badTrackMsg  = `{"type":"track","userId":"u_42","messageId":"m3","timestamp":"2024-05-01T12:00:05.000Z"}`
)

// tickingClock starts at 12:00:05.123 UTC and moves 1.2ms per reading:
// the Handler reads it when a request arrives and when it is answered, so
// with requests sent one at a time every latency reads 1.2ms.
func tickingClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2024, 5, 1, 12, 0, 5, 123e6, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := t
		t = t.Add(1200 * time.Microsecond)
		return now
	}
}

// listening is an `evfwd listen` running on a free loopback port.
type listening struct {
	URL    string // as announced, --path included
	base   string // scheme://host:port
	f      *cli.Factory
	stop   context.CancelFunc // Ctrl-C
	done   chan error
	client *http.Client
	dial   func() (net.Conn, error) // a raw connection to listen
}

// startListen runs listen with args on f and returns once the port is
// open (the readiness hook, not a sleep).
func startListen(t *testing.T, f *cli.Factory, args ...string) *listening {
	t.Helper()
	return startListenWith(t, f, nil, args...)
}

func startListenWith(t *testing.T, f *cli.Factory, rolls []float64, args ...string) *listening {
	t.Helper()
	return startListenTuned(t, f, func(o *ListenOptions) {
		if rolls != nil {
			var mu sync.Mutex
			o.rand = func() float64 {
				mu.Lock()
				defer mu.Unlock()
				r := rolls[0]
				rolls = rolls[1:]
				return r
			}
		}
	}, args...)
}

// startListenTuned lets tune set the options tests inject.
func startListenTuned(t *testing.T, f *cli.Factory, tune func(*ListenOptions), args ...string) *listening {
	t.Helper()
	f.Now = tickingClock()
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	l := &listening{f: f, stop: cancel, done: make(chan error, 1), client: &http.Client{}}
	l.dial = func() (net.Conn, error) { return net.Dial("tcp", strings.TrimPrefix(l.base, "http://")) }
	cmd := NewCmdListen(f, func(o *ListenOptions) error {
		o.ready = func(url string) { ready <- url }
		tune(o)
		return listenRun(o)
	})
	cmd.SetArgs(append([]string{"--addr", "127.0.0.1:0"}, args...))
	cmd.SilenceErrors, cmd.SilenceUsage = true, true // as under root
	go func() { l.done <- cmd.ExecuteContext(ctx) }()
	select {
	case l.URL = <-ready:
		l.base = portRE.FindString(l.URL)
		l.base = l.URL[:strings.Index(l.URL, l.base)+len(l.base)]
	case err := <-l.done:
		t.Fatalf("listen ended before it was ready: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l
}

// startListenInBubble runs listen on an in-memory listener, for a test
// inside synctest.Test: every connection is a net.Pipe, so deadlines,
// --delay and --timeout run on the bubble's clock, and synctest.Wait
// tells when every goroutine listen started is done or blocked.
func startListenInBubble(t *testing.T, f *cli.Factory, tune func(*ListenOptions), args ...string) *listening {
	t.Helper()
	ln := newPipeListener()
	l := startListenTuned(t, f, func(o *ListenOptions) {
		o.listener = ln
		tune(o)
	}, args...)
	l.dial = ln.dial
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return ln.dial() }}
	l.client = &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return l
}

// pipeListener hands out one end of a net.Pipe per dial.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error { l.once.Do(func() { close(l.closed) }); return nil }

// Addr is a loopback address, as portRE and stable expect.
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

func (l *pipeListener) dial() (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// post sends body to path with X-Signature sig ("" for none) and returns
// the status; the request's line is printed before the answer is read.
func (l *listening) post(t *testing.T, path, body, sig string) int {
	t.Helper()
	var fs []signature.Field
	if sig != "" {
		fs = []signature.Field{{Name: signature.Header, Value: sig}}
	}
	return l.postFields(t, path, body, fs)
}

// interrupt presses Ctrl-C and returns the exit code and what was printed.
func (l *listening) interrupt(t *testing.T) result {
	t.Helper()
	l.stop()
	return l.wait(t)
}

func (l *listening) wait(t *testing.T) result {
	t.Helper()
	err := <-l.done
	l.done <- err // for Cleanup
	msg := ""
	if err != nil {
		msg = cli.Message(err)
	}
	return result{
		Stdout: l.f.IO.Out.(interface{ String() string }).String(),
		Stderr: l.f.IO.ErrOut.(interface{ String() string }).String() + msg,
		Code:   cli.ExitCode(err),
	}
}

var portRE = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// stable hides the port the test happened to get.
func stable(s string) string { return portRE.ReplaceAllString(s, "127.0.0.1:PORT") }

func TestListenFlags(t *testing.T) {
	tests := []struct {
		args []string
		want ListenOptions
	}{
		{nil, ListenOptions{}},
		{
			[]string{"--addr", ":9000", "--path", "/hooks", "--secret-file", "s", "--accept-invalid", "-v", "--record", "r.ndjson"},
			ListenOptions{Addr: ":9000", Path: "/hooks", Secret: cli.Secret{Files: []string{"s"}}, AcceptInvalid: true, Verbose: true, Record: "r.ndjson"},
		},
		{
			[]string{"--respond", "500,500,200", "--delay", "6s", "--fail-rate", "0.3"},
			ListenOptions{Respond: []int{500, 500, 200}, Delay: 6 * time.Second, FailRate: 0.3},
		},
		{
			[]string{"--count", "3", "--type", "track", "--timeout", "30s", "--ready-file", "ready", "--status", "503"},
			ListenOptions{Count: 3, Type: "track", Timeout: 30 * time.Second, ReadyFile: "ready", Status: 503},
		},
		{
			[]string{"--forward-to", "http://localhost:3000/hooks", "--tls-cert", "c.pem", "--tls-key", "k.pem"},
			ListenOptions{ForwardTo: "http://localhost:3000/hooks", TLSCert: "c.pem", TLSKey: "k.pem"},
		},
		{
			[]string{"--scheme", "stripe", "--tolerance", "1m", "--secret", "whsec_a", "--secret", "whsec_b"},
			ListenOptions{Scheme: "stripe", Tolerance: time.Minute, Secret: cli.Secret{Values: []string{"whsec_a", "whsec_b"}}},
		},
		{
			[]string{"--tolerance", "0"},
			ListenOptions{Tolerance: -1}, // no limit; -1 stands for 0 below
		},
		{
			[]string{"--ui", "--ui-addr", "127.0.0.1:0"},
			ListenOptions{UI: true, UIAddr: "127.0.0.1:0"},
		},
		{
			[]string{"--redact-header", "cookie", "--redact-header", "X-Api-Key"},
			ListenOptions{RedactHeaders: []string{"cookie", "X-Api-Key"}},
		},
		{
			[]string{"--ui", "--ui-token", "0123456789abcdef", "--allow-replay-local"},
			ListenOptions{UI: true, UIToken: "0123456789abcdef", AllowReplay: true},
		},
	}
	for _, tt := range tests {
		f := testFactory(t, "", false, nil)
		f.Format = cli.FormatJSON // as the root sets it before the command runs
		var got *ListenOptions
		cmd := NewCmdListen(f, func(o *ListenOptions) error { got = o; return nil })
		cmd.SetArgs(append([]string{}, tt.args...)) // nil would mean os.Args
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if got.IO != f.IO || got.Format != f.Format || got.Now == nil || got.Getenv == nil {
			t.Errorf("%v: options not built on the factory", tt.args)
		}
		got.IO, got.Format, got.Now, got.Getenv, got.Version = nil, "", nil, nil, ""
		// Defaults, unless the case sets them.
		if tt.want.Addr == "" {
			tt.want.Addr = "127.0.0.1:8788"
		}
		if tt.want.UIAddr == "" {
			tt.want.UIAddr = "127.0.0.1:8789"
		}
		if tt.want.Scheme == "" {
			tt.want.Scheme = "auto"
		}
		switch tt.want.Tolerance {
		case 0:
			tt.want.Tolerance = 5 * time.Minute
		case -1:
			tt.want.Tolerance = 0
		}
		if diff := cmp.Diff(&tt.want, got, cmpopts.IgnoreUnexported(ListenOptions{}, cli.Secret{})); diff != "" {
			t.Errorf("%v mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestListenUsageErrors(t *testing.T) {
	tests := [][]string{
		{"--type", "track"},
		{"--count", "1", "--type", "purchase"},
		{"--tls-cert", "c.pem"},
		{"--status", "500", "--respond", "200"},
		{"--forward-to", "http://localhost:1", "--status", "500"},
		{"--forward-to", "localhost:3000"},
		{"--fail-rate", "2"},
		{"--addr", "256.0.0.1:1"},
		{"--secret", "a", "--secret-file", "b"}, // no file b
		{"--scheme", "svix", "--secret", "a"},
		{"--scheme", "standard", "--secret", "notbase64!"},
		{"--scheme", "standard", "--secret", "whsec_c2VjcmV0", "--secret", "plain"},
		{"--tolerance", "-1s"},
		{"--ui", "--ui-addr", "256.0.0.1:1"},
		{"--redact-header", "X Bad"},
		{"--ui", "--ui-token", "short"},
		{"--ui", "--ui-token", "                    "},
		{"--ui-token", "0123456789abcdef"},
		{"--allow-replay-local"},
		{"--redact-header", ""},
	}
	for _, args := range tests {
		f := testFactory(t, "", false, nil)
		got := execute(t, f, append([]string{"listen"}, args...)...)
		if got.Code != cli.ExitUsage || !strings.Contains(got.Stderr, "error: ") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error (exit 2)", args, got.Code, got.Stderr)
		}
	}
}

func TestListenSignatures(t *testing.T) {
	good := signHex(t, listenSecret, trackMsg)
	tests := []struct {
		name, body, sig string
		want            int
	}{
		{"signed", trackMsg, good, 200},
		{"uppercase hex", trackMsg, strings.ToUpper(good), 200},
		{"unsigned", trackMsg, "", 401},
		{"tampered", strings.Replace(trackMsg, "u_42", "u_43", 1), good, 401},
		{"wrong secret", trackMsg, signHex(t, "other", trackMsg), 401},
	}
	for _, accept := range []bool{false, true} {
		f := testFactory(t, "", false, nil)
		args := []string{"--secret", listenSecret}
		if accept {
			args = append(args, "--accept-invalid")
		}
		l := startListen(t, f, args...)
		for _, tt := range tests {
			want := tt.want
			if accept {
				want = 200
			}
			if got := l.post(t, "/hooks", tt.body, tt.sig); got != want {
				t.Errorf("accept-invalid=%v %s: status %d, want %d", accept, tt.name, got, want)
			}
		}
		res := l.interrupt(t)
		if res.Code != 0 {
			t.Errorf("Ctrl-C: exit %d, want 0", res.Code)
		}
		// The verdict is shown either way.
		if n := strings.Count(res.Stdout, "sig segment ✗ mismatch"); n != 2 {
			t.Errorf("accept-invalid=%v: %d mismatch verdicts in\n%s", accept, n, res.Stdout)
		}
	}
}

func TestListenSecretSources(t *testing.T) {
	secretFile := writeFile(t, "secret", listenSecret+"\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"flag", []string{"--secret", listenSecret}, nil},
		{"file", []string{"--secret-file", secretFile}, nil},
		{"env", nil, map[string]string{"EVFWD_SECRET": listenSecret}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := startListen(t, testFactory(t, "", false, tt.env), tt.args...)
			got := []int{l.post(t, "/", trackMsg, signHex(t, listenSecret, trackMsg)), l.post(t, "/", trackMsg, "")}
			if diff := cmp.Diff([]int{200, 401}, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// sendMix sends the requests every output golden shows.
func sendMix(t *testing.T, l *listening) {
	t.Helper()
	l.post(t, "/hooks", trackMsg, signHex(t, listenSecret, trackMsg))
	l.post(t, "/hooks", trackMsg, signHex(t, listenSecret, trackMsg)) // redelivery
	l.post(t, "/hooks", identifyMsg, "")
	l.post(t, "/hooks", badTrackMsg, signHex(t, "wrong", badTrackMsg))
	l.post(t, "/other", "not json", "")
}

func TestListenOutput(t *testing.T) {
	tests := []struct {
		name    string
		tty     bool
		format  cli.Format
		verbose bool
	}{
		{"tty", true, cli.FormatText, false},
		{"notty", false, cli.FormatText, false},
		{"verbose", false, cli.FormatText, true},
		{"json", false, cli.FormatJSON, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFactory(t, "", tt.tty, nil)
			f.Format = tt.format
			args := []string{"--secret", listenSecret, "--path", "/hooks"}
			if tt.verbose {
				args = append(args, "--verbose")
			}
			l := startListen(t, f, args...)
			sendMix(t, l)
			res := l.interrupt(t)
			if res.Code != 0 {
				t.Errorf("exit %d, want 0", res.Code)
			}
			golden(t, "listen/"+tt.name+".stdout", res.Stdout)
			golden(t, "listen/"+tt.name+".stderr", stable(res.Stderr))
		})
	}
}

// postFields sends body to path with the header lines fs.
func (l *listening) postFields(t *testing.T, path, body string, fs []signature.Field) int {
	t.Helper()
	req, err := http.NewRequest("POST", l.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "evfwd-webhooks/test")
	for _, f := range fs {
		req.Header.Add(f.Name, f.Value)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// listenSigned signs body with scheme s at the time tickingClock starts.
func listenSigned(t *testing.T, s signature.Scheme, secret, body string, p signature.Params) []signature.Field {
	t.Helper()
	if p.Timestamp.IsZero() {
		p.Timestamp = time.Date(2024, 5, 1, 12, 0, 5, 0, time.UTC)
	}
	fs, err := signature.SignFields(s, [][]byte{[]byte(secret)}, []byte(body), p)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// listenJSONLines reads -o json's records.
func listenJSONLines(t *testing.T, stdout string) []receiver.Record {
	t.Helper()
	var recs []receiver.Record
	for rec, err := range receiver.ReadRecords(strings.NewReader(stdout)) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, *rec)
	}
	return recs
}

// A Stripe-signed request, the secret second of two, one tampered with
// and one signed too long ago.
func TestListenStripe(t *testing.T) {
	const secret = "whsec_stripe_new"
	good := listenSigned(t, signature.Stripe, secret, trackMsg, signature.Params{})
	old := listenSigned(t, signature.Stripe, secret, trackMsg, signature.Params{Timestamp: time.Date(2024, 5, 1, 11, 50, 0, 0, time.UTC)})
	for _, format := range []cli.Format{cli.FormatText, cli.FormatJSON} {
		t.Run(string(format), func(t *testing.T) {
			f := testFactory(t, "", false, nil)
			f.Format = format
			l := startListen(t, f, "--scheme", "stripe", "--secret", "whsec_stripe_old", "--secret", secret)
			got := []int{
				l.postFields(t, "/hooks", trackMsg, good),
				l.postFields(t, "/hooks", strings.Replace(trackMsg, "u_42", "u_43", 1), good),
				l.postFields(t, "/hooks", identifyMsg, listenSigned(t, signature.Stripe, secret, identifyMsg, signature.Params{})),
				l.postFields(t, "/hooks", trackMsg, old),
			}
			if diff := cmp.Diff([]int{200, 401, 200, 401}, got); diff != "" {
				t.Errorf("status mismatch (-want +got):\n%s", diff)
			}
			res := l.interrupt(t)
			if want := "(verifying stripe signatures, 2 secrets, timestamps within 5m)"; !strings.Contains(res.Stderr, want) {
				t.Errorf("announce line: want %q in\n%s", want, res.Stderr)
			}
			if format == cli.FormatText {
				want := `12:00:05.123  POST /hooks  track "Order Completed"  user=u_42  sig stripe ✓ secret 2  → 200  126 B  1.2ms
12:00:05.125  POST /hooks  track "Order Completed"  user=u_43  sig stripe ✗ mismatch  dup  → 401  126 B  1.2ms
12:00:05.127  POST /hooks  identify  user=u_7  sig stripe ✓ secret 2  → 200  126 B  1.2ms
12:00:05.130  POST /hooks  track "Order Completed"  user=u_42  sig stripe ✗ expired secret 2  dup  → 401  126 B  1.2ms
`
				if diff := cmp.Diff(want, res.Stdout); diff != "" {
					t.Errorf("mismatch (-want +got):\n%s", diff)
				}
				return
			}
			recs := listenJSONLines(t, res.Stdout)
			if len(recs) != 4 {
				t.Fatalf("%d records:\n%s", len(recs), res.Stdout)
			}
			var sigs []receiver.Signature
			for _, r := range recs {
				if (r.Signature.Message != "") != (r.Signature.Verdict == receiver.SigInvalid) {
					t.Errorf("line %d: message %q", r.Line, r.Signature.Message)
				}
				r.Signature.Message = ""
				sigs = append(sigs, r.Signature)
			}
			want := []receiver.Signature{
				{Verdict: receiver.SigValid, Scheme: "stripe", Reason: "ok", Secret: 2},
				{Verdict: receiver.SigInvalid, Scheme: "stripe", Reason: "mismatch"},
				{Verdict: receiver.SigValid, Scheme: "stripe", Reason: "ok", Secret: 2},
				{Verdict: receiver.SigInvalid, Scheme: "stripe", Reason: "expired", Secret: 2},
			}
			if diff := cmp.Diff(want, sigs); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A Standard Webhooks message delivered twice (the same webhook-id) is
// flagged, and answered as the first was.
func TestListenReplay(t *testing.T) {
	const secret = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM="
	first := listenSigned(t, signature.Standard, secret, trackMsg, signature.Params{ID: "msg_1"})
	for _, format := range []cli.Format{cli.FormatText, cli.FormatJSON} {
		t.Run(string(format), func(t *testing.T) {
			f := testFactory(t, "", false, nil)
			f.Format = format
			l := startListen(t, f, "--secret", secret)
			got := []int{
				l.postFields(t, "/hooks", trackMsg, first),
				l.postFields(t, "/hooks", trackMsg, first),
				l.postFields(t, "/hooks", identifyMsg, listenSigned(t, signature.Standard, secret, identifyMsg, signature.Params{ID: "msg_2"})),
			}
			if diff := cmp.Diff([]int{200, 200, 200}, got); diff != "" {
				t.Errorf("status mismatch (-want +got):\n%s", diff)
			}
			res := l.interrupt(t)
			if !strings.Contains(res.Stderr, "replays    1") {
				t.Errorf("no replay in the summary:\n%s", res.Stderr)
			}
			if format == cli.FormatText {
				want := `12:00:05.123  POST /hooks  track "Order Completed"  user=u_42  sig standard ✓  → 200  126 B  1.2ms
12:00:05.125  POST /hooks  track "Order Completed"  user=u_42  sig standard ✓  dup  replay  → 200  126 B  1.2ms
12:00:05.127  POST /hooks  identify  user=u_7  sig standard ✓  → 200  126 B  1.2ms
`
				if diff := cmp.Diff(want, res.Stdout); diff != "" {
					t.Errorf("mismatch (-want +got):\n%s", diff)
				}
				return
			}
			var replays []bool
			for _, r := range listenJSONLines(t, res.Stdout) {
				replays = append(replays, r.Replay)
				if r.Signature.Scheme != signature.Standard || r.Signature.Reason != signature.ReasonOK {
					t.Errorf("line %d: %+v", r.Line, r.Signature)
				}
			}
			if diff := cmp.Diff([]bool{false, true, false}, replays); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if !strings.Contains(res.Stdout, `"replay":true`) {
				t.Errorf("no replay key in\n%s", res.Stdout)
			}
		})
	}
}

func TestListenColour(t *testing.T) {
	f := testFactory(t, "", true, nil)
	f.IO.OutColor = true
	l := startListen(t, f, "--secret", listenSecret)
	l.post(t, "/", trackMsg, signHex(t, listenSecret, trackMsg))
	if res := l.interrupt(t); !strings.Contains(res.Stdout, "\x1b[") {
		t.Errorf("no colour on a colour TTY:\n%q", res.Stdout)
	}
}

func TestListenSimulation(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		rolls []float64
		want  []int
	}{
		{"status", []string{"--status", "503"}, nil, []int{503, 503, 503}},
		{"respond", []string{"--respond", "500,500,200"}, nil, []int{500, 500, 200, 200}},
		{"fail rate", []string{"--fail-rate", "0.3"}, []float64{0.1, 0.9, 0.29, 0.3}, []int{500, 200, 500, 200}},
		{"path", []string{"--path", "/hooks"}, nil, []int{200}},
		{"path without slash", []string{"--path", "hooks"}, nil, []int{200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := startListenWith(t, testFactory(t, "", false, nil), tt.rolls, tt.args...)
			var got []int
			for range tt.want {
				got = append(got, l.post(t, "/hooks", trackMsg, ""))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListenDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 6 * time.Second
		l := startListenInBubble(t, testFactory(t, "", false, nil), func(*ListenOptions) {}, "--delay", delay.String())
		start := time.Now()
		l.post(t, "/", trackMsg, "")
		if got := time.Since(start); got < delay {
			t.Errorf("answered after %v, want at least %v", got, delay)
		}
	})
}

func TestListenCount(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		send     []string
		wantCode int
		wantErr  string
	}{
		{"reached", []string{"--count", "2"}, []string{trackMsg, identifyMsg}, 0, ""},
		{"by type", []string{"--count", "2", "--type", "track", "--timeout", "1m"}, []string{trackMsg, identifyMsg, trackMsg}, 0, ""},
		{"timeout", []string{"--count", "3", "--type", "track", "--timeout", "50ms"}, []string{trackMsg, identifyMsg}, 1, "timeout after 50ms: 1 of 3 track messages arrived"},
		{"refused do not count", []string{"--count", "1", "--timeout", "50ms", "--secret", listenSecret}, []string{trackMsg}, 1, "timeout after 50ms: 0 of 1 requests arrived; 1 refused for an invalid signature"},
		{"timeout without count", []string{"--timeout", "10ms"}, nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { // --timeout runs on the bubble's clock
				l := startListenInBubble(t, testFactory(t, "", false, nil), func(*ListenOptions) {}, tt.args...)
				for _, b := range tt.send {
					l.post(t, "/", b, "")
				}
				res := l.wait(t) // no Ctrl-C: the command ends by itself
				if res.Code != tt.wantCode {
					t.Errorf("exit %d, want %d; stderr:\n%s", res.Code, tt.wantCode, res.Stderr)
				}
				if tt.wantErr != "" && !strings.HasSuffix(res.Stderr, tt.wantErr) {
					t.Errorf("stderr ends %q, want %q", res.Stderr, tt.wantErr)
				}
			})
		})
	}
}

func TestListenPortInUse(t *testing.T) {
	l := startListen(t, testFactory(t, "", false, nil))
	f := testFactory(t, "", false, nil)
	got := execute(t, f, "listen", "--addr", strings.TrimPrefix(l.URL, "http://"))
	if got.Code != cli.ExitFailure || !strings.Contains(got.Stderr, "port in use") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the port in use", got.Code, got.Stderr)
	}
}

func TestListenReadyFile(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	f := testFactory(t, "", false, nil)
	l := startListen(t, f, "--ready-file", ready)
	b, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l.URL+"\n", string(b)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if got := l.f.IO.ErrOut.(interface{ String() string }).String(); !strings.HasPrefix(got, "listening on "+l.URL) {
		t.Errorf("stderr %q, want the readiness line", got)
	}
}

func TestListenForward(t *testing.T) {
	var mu sync.Mutex
	var got []string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Signature")+" "+string(body))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"ok":true}`)
	}))
	defer app.Close()
	f := testFactory(t, "", false, nil)
	sig := signHex(t, listenSecret, trackMsg)
	l := startListen(t, f, "--secret", listenSecret, "--forward-to", app.URL+"/webhooks", "-v")
	if status := l.post(t, "/hooks", trackMsg, sig); status != http.StatusAccepted {
		t.Errorf("status %d, want the app's 202", status)
	}
	// An invalid signature is refused here and never reaches the app.
	l.post(t, "/hooks", trackMsg, "")
	res := l.interrupt(t)
	if diff := cmp.Diff([]string{"POST /webhooks " + sig + " " + trackMsg}, got); diff != "" {
		t.Errorf("app mismatch (-want +got):\n%s", diff)
	}
	for _, want := range []string{"→ 202 (app, ", "answered 202:", `"ok": true`} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, res.Stdout)
		}
	}
}

func TestListenRecordThenVerify(t *testing.T) {
	record := filepath.Join(t.TempDir(), "hooks.ndjson")
	f := testFactory(t, "", false, nil)
	l := startListen(t, f, "--secret", listenSecret, "--accept-invalid", "--record", record)
	pretty := "{\n  \"type\": \"delete\",\n  \"userId\": \"u_42\",\n  \"timestamp\": \"2024-05-01T12:00:05.000Z\"\n}\n"
	l.post(t, "/hooks", trackMsg, signHex(t, listenSecret, trackMsg))
	l.post(t, "/hooks", pretty, signHex(t, listenSecret, pretty))
	l.post(t, "/hooks", identifyMsg, signHex(t, "wrong", identifyMsg))
	l.interrupt(t)

	tests := []struct {
		name   string
		args   []string
		format cli.Format
		want   result
	}{
		{"one invalid", []string{"--secret", listenSecret}, cli.FormatText, result{Code: 1}},
		{"json", []string{"--secret", listenSecret, "-o", "json"}, cli.FormatJSON, result{Code: 1}},
		{"wrong secret", []string{"--secret", "wrong"}, cli.FormatText, result{Code: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testFactory(t, "", false, nil)
			got := execute(t, f, append([]string{"verify", "--record", record}, tt.args...)...)
			if got.Code != tt.want.Code {
				t.Errorf("exit %d, want %d\n%s%s", got.Code, tt.want.Code, got.Stdout, got.Stderr)
			}
			golden(t, "listen/verify-record-"+strings.ReplaceAll(tt.name, " ", "-")+".stdout", strings.ReplaceAll(got.Stdout, record, "hooks.ndjson"))
		})
	}
}

func TestListenTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	f := testFactory(t, "", false, nil)
	l := startListen(t, f, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(l.URL, "https://") {
		t.Fatalf("URL %s, want https", l.URL)
	}
	l.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if got := l.post(t, "/", trackMsg, ""); got != 200 {
		t.Errorf("status %d, want 200", got)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "evfwd test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeFile(t, "cert.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, "key.pem", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// rawPost opens a connection to l and writes the start of a POST to /hooks:
// the headers (Content-Length, or chunked when cl < 0) and body.
func (l *listening) rawPost(t *testing.T, cl int, body string) net.Conn {
	t.Helper()
	c, err := l.dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	te := "Transfer-Encoding: chunked"
	if cl >= 0 {
		te = "Content-Length: " + strconv.Itoa(cl)
	}
	if _, err := io.WriteString(c, "POST /hooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+te+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	return c
}

// closeGuard is how long a test waits for listen to close a connection
// before failing; the timeouts under test are far shorter.
const closeGuard = 10 * time.Second

// answerThenClose reads the status line, then the rest up to the end of
// the connection, failing when listen keeps it open.
func answerThenClose(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(closeGuard))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Errorf("no answer: %v", err)
		return ""
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Errorf("connection still open: %v", err)
	}
	return strings.TrimSpace(line)
}

// readRecordFile checks that every line of an NDJSON record file is one
// whole JSON object and returns the records.
func readRecordFile(t *testing.T, path string) []*receiver.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("record file ends in a partial line: %q", b[max(0, len(b)-80):])
	}
	var recs []*receiver.Record
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var rec receiver.Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("record line %d does not parse: %v", i+1, err)
		}
		recs = append(recs, &rec)
	}
	return recs
}

// TestListenOversizedChunkedBody: a chunked body over listen's 5 MB limit
// is answered 413 at once, not when the sender finishes, and recorded
// without any of it; the listener goes on.
func TestListenOversizedChunkedBody(t *testing.T) {
	record := filepath.Join(t.TempDir(), "hooks.ndjson")
	l := startListen(t, testFactory(t, "", false, nil), "--secret", listenSecret, "--record", record)
	c := l.rawPost(t, -1, "")
	go func() {
		chunk := fmt.Sprintf("%x\r\n%s\r\n", 64<<10, strings.Repeat("x", 64<<10))
		for range receiver.DefaultMaxBodyBytes/(64<<10) + 2 {
			if _, err := io.WriteString(c, chunk); err != nil {
				return // refused: listen hung up
			}
		}
		// and no last chunk: the sender stalls
	}()
	if got := answerThenClose(t, c); got != "HTTP/1.1 413 Request Entity Too Large" {
		t.Errorf("answer %q, want 413", got)
	}
	if got := l.post(t, "/hooks", trackMsg, signHex(t, listenSecret, trackMsg)); got != 200 {
		t.Errorf("next request: status %d, want 200", got)
	}
	l.interrupt(t)

	recs := readRecordFile(t, record)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	if r := recs[0]; r.Status != 413 || r.Refused != "body" || len(r.RawBody()) != 0 || r.Size != receiver.DefaultMaxBodyBytes+1 {
		t.Errorf("oversized: status %d, refused %q, %d body bytes kept, size %d; want 413, body, 0, %d",
			r.Status, r.Refused, len(r.RawBody()), r.Size, receiver.DefaultMaxBodyBytes+1)
	}
	if r := recs[1]; r.Status != 200 || string(r.RawBody()) != trackMsg {
		t.Errorf("next request recorded as %d %q", r.Status, r.RawBody())
	}
}

// TestListenStalledBodies: a sender that stops mid-body is answered 408
// and its connection closed once the read timeout passes; 200 of them
// leave no goroutine behind; each is recorded (status, headers, how many
// bytes arrived) without its partial body; the listener goes on. It runs
// in a bubble, so the timeout passes on its clock and synctest.Wait says
// when the connections' goroutines are gone.
func TestListenStalledBodies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const readTimeout = 200 * time.Millisecond
		const stalled = 200
		record := filepath.Join(t.TempDir(), "hooks.ndjson")
		l := startListenInBubble(t, testFactory(t, "", false, nil), func(o *ListenOptions) { o.readTimeout = readTimeout },
			"--record", record)
		synctest.Wait()
		base, _ := bubbleGoroutines()
		if base == 0 {
			t.Fatal("no goroutine of the bubble in the stack dump: has its format changed?")
		}

		// One, timed: listen's clock for the body starts after the dial.
		start := time.Now()
		c := l.rawPost(t, 1000, strings.Repeat("x", 100))
		if got := answerThenClose(t, c); got != "HTTP/1.1 408 Request Timeout" {
			t.Errorf("answer %q, want 408", got)
		}
		if d := time.Since(start); d < readTimeout {
			t.Errorf("closed after %v, before the %v read timeout", d, readTimeout)
		}

		// Many at once, chunked and not.
		cs := make([]net.Conn, stalled)
		for i := range cs {
			if i%2 == 0 {
				cs[i] = l.rawPost(t, 4<<20, strings.Repeat("x", 100))
			} else {
				cs[i] = l.rawPost(t, -1, "64\r\n"+strings.Repeat("x", 100)+"\r\n")
			}
		}
		// Read as senders would, all at once: a pipe holds no answer
		// nobody reads, and each closes only after net/http's pause.
		answers := make([]string, stalled)
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Go(func() { answers[i] = answerThenClose(t, c) })
		}
		wg.Wait()
		for _, got := range answers {
			if got != "HTTP/1.1 408 Request Timeout" {
				t.Fatalf("answer %q, want 408", got)
			}
		}
		synctest.Wait()
		// Only goroutines outside the bubble (other tests' leftovers) may
		// have come and gone meanwhile.
		if n, dump := bubbleGoroutines(); n != base {
			t.Fatalf("%d goroutines after %d stalled connections closed, %d before:\n%s", n, stalled, base, dump)
		}

		if got := l.post(t, "/hooks", trackMsg, ""); got != 200 {
			t.Errorf("next request: status %d, want 200", got)
		}
		l.interrupt(t)
		recs := readRecordFile(t, record)
		if len(recs) != stalled+2 {
			t.Fatalf("%d records, want %d", len(recs), stalled+2)
		}
		for _, r := range recs[:stalled+1] {
			if r.Status != 408 || r.Refused != "body" || len(r.RawBody()) != 0 || r.Size != 100 || !strings.HasPrefix(r.Shape.Reason, "body timed out: 100 ") {
				t.Fatalf("stalled: status %d, refused %q, %d body bytes kept, size %d, reason %q; want 408, body, 0, 100, timed out",
					r.Status, r.Refused, len(r.RawBody()), r.Size, r.Shape.Reason)
			}
		}
		if r := recs[stalled+1]; r.Status != 200 || string(r.RawBody()) != trackMsg {
			t.Errorf("next request recorded as %d %q", r.Status, r.RawBody())
		}
	})
}

// bubbleGoroutines counts the goroutines of the calling test's synctest
// bubble (after synctest.Wait, the ones still there) in a dump of all
// goroutines. runtime.NumGoroutine would also count other tests'
// goroutines, and ones on their way out.
func bubbleGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	dump := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for line := range strings.Lines(dump) {
		if strings.HasPrefix(line, "goroutine ") && strings.Contains(line, "synctest bubble") {
			n++
		}
	}
	return n, dump
}

// TestListenRecordAfterTornLine: a record file whose last line a killed
// run left unfinished gets this run's records on lines of their own.
func TestListenRecordAfterTornLine(t *testing.T) {
	record := writeFile(t, "hooks.ndjson", `{"receivedAt":"2024-05-01T12:00:05.123Z","method":"POST","pa`)
	l := startListen(t, testFactory(t, "", false, nil), "--record", record)
	l.post(t, "/hooks", trackMsg, "")
	l.interrupt(t)
	f, err := os.Open(record)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	for rec, err := range receiver.ReadRecords(f) {
		if err != nil {
			got = append(got, err.Error()[:7])
			continue
		}
		got = append(got, string(rec.RawBody()))
	}
	if diff := cmp.Diff([]string{"line 1:", trackMsg}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestListenDelayOutlastsReadTimeout: the read timeout bounds the body,
// not the answer: a --delay longer than it is still answered.
func TestListenDelayOutlastsReadTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := startListenInBubble(t, testFactory(t, "", false, nil), func(*ListenOptions) {}, "--delay", "1m")
		start := time.Now()
		if got := l.post(t, "/", trackMsg, ""); got != 200 {
			t.Errorf("status %d, want 200", got)
		}
		if got := time.Since(start); got < time.Minute {
			t.Errorf("answered after %v, want at least 1m", got)
		}
	})
}

// A batching destination's body is shown as a batch and its messages'
// shapes checked, not flagged as "not a JSON object".
func TestListenBatch(t *testing.T) {
	l := startListen(t, testFactory(t, "", false, nil), "--secret", listenSecret)
	batch := "[" + trackMsg + "," + identifyMsg + "]"
	l.post(t, "/", batch, signHex(t, listenSecret, batch))
	res := l.interrupt(t)
	for _, want := range []string{"POST /  batch of 2  sig segment ✓  → 200", "by type    batch 1", "shape      1 ok"} {
		if !strings.Contains(res.Stdout+res.Stderr, want) {
			t.Errorf("output lacks %q:\n%s\n%s", want, res.Stdout, res.Stderr)
		}
	}
}
