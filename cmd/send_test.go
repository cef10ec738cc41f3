package cmd

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/importer"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestSendFlags(t *testing.T) {
	f := testFactory(t, "", false, nil)
	var got *SendOptions
	cmd := NewCmdSend(f, func(o *SendOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"a.ndjson", "b.gz", "--errors-file", "e", "--batch-size", "7", "--max-queue-size", "9", "--workers", "3", "--rate", "2.5", "--skip", "4", "--resume", "b.gz:3", "--write-key", "k", "--endpoint", "http://x"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := &SendOptions{Files: []string{"a.ndjson", "b.gz"}, ErrorsFile: "e", BatchSize: 7, MaxQueueSize: 9, Workers: 3, Rate: 2.5, Skip: 4, Resume: "b.gz:3", Client: clientFlags{WriteKey: "k", Endpoint: "http://x"},
		Format: f.Format, Version: f.Version}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(SendOptions{}, "IO", "Now", "Context"), cmp.AllowUnexported(SendOptions{})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if got.IO != f.IO || got.Now == nil {
		t.Error("the factory's IO and clock not passed on")
	}
}

// lines reads testdata/events.ndjson, the shared sample.
func sampleLines(t *testing.T) []string {
	b, err := os.ReadFile("../testdata/events.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Every line arrives with its own bytes: each member of the input is sent
// unchanged except timestamp (wire form) and context (library added).
func TestSendExactBytes(t *testing.T) {
	srv := newCollectServer(t, nil)
	res := execute(t, clientFactory(t, "", srv), "send", "../testdata/events.ndjson", "--batch-size", "7")
	if res.Code != 0 || res.Stderr != "" {
		t.Fatalf("%+v", res)
	}
	golden(t, "send/summary.golden", res.Stdout)
	got := srv.accepted()
	lines := sampleLines(t)
	if len(got) != len(lines) {
		t.Fatalf("%d messages, want %d", len(got), len(lines))
	}
	for i, line := range lines {
		var in map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatal(err)
		}
		for k, v := range in {
			if k == "timestamp" || k == "context" {
				continue
			}
			if string(got[i][k]) != string(v) {
				t.Errorf("line %d: %s sent as %s, read %s", i+1, k, got[i][k], v)
			}
		}
		if str(got[i], "messageId") == "" || !strings.HasSuffix(str(got[i], "timestamp"), "Z") {
			t.Errorf("line %d: messageId %s timestamp %s", i+1, got[i]["messageId"], got[i]["timestamp"])
		}
	}
	all := ""
	for _, r := range srv.requests() {
		all += string(r.Body)
	}
	if !strings.Contains(all, `"ledger_amount":12345678901234567890.000000001,`) {
		t.Error("12345678901234567890.000000001 did not arrive byte for byte")
	}
	// Timestamp forms: offset, Unix seconds, Unix ms, a date.
	for line, want := range map[int]string{6: "2024-05-01T07:05:00.000Z", 7: "2024-05-01T09:06:40.000Z", 8: "2024-05-01T00:00:00.000Z", 16: "2024-05-01T10:14:09.871Z"} {
		if got := str(got[line-1], "timestamp"); got != want {
			t.Errorf("line %d timestamp %s, want %s", line, got, want)
		}
	}
	for _, r := range srv.requests() {
		if len(r.Msgs) > 7 {
			t.Errorf("%d messages in a request at --batch-size 7", len(r.Msgs))
		}
	}
}

const mixed = `{"type":"track","userId":"u1","event":"A"}
{"type":"track","userId":"u1"}
not json at all

{"type":"teleport","userId":"u1"}
{"type":"identify","userId":"u2","traits":{"n":1.50}}
{"type":"alias","userId":"u3"}
{"type":"page","userId":"u4","timestamp":"last tuesday"}
[1,2,3]
{"type":"group","userId":"u5","groupId":"g","traits":{"pad":"` + "PAD" + `"}}
{"type":"screen","anonymousId":"a6","name":"Home"}
`

func TestSendBadLines(t *testing.T) {
	in := strings.Replace(mixed, "PAD", strings.Repeat("x", 33<<10), 1)
	file := writeFile(t, "mixed.ndjson", in)
	errFile := filepath.Join(t.TempDir(), "rejected.ndjson")
	srv := newCollectServer(t, nil)
	res := execute(t, clientFactory(t, "", srv), "send", file, "--errors-file", errFile, "-o", "json")
	wantErr := strings.ReplaceAll(`F:2: track: event is required
F:3: invalid JSON: invalid character 'o' in literal null (expecting 'u')
F:5: type must be one of identify, track, page, screen, group, alias (got "teleport")
F:7: alias: previousId is required
F:8: page: timestamp is not a time: invalid timestamp "last tuesday": want RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01) or Unix seconds/milliseconds
F:9: invalid JSON: not a JSON object
F:10: message is 34008 bytes, over the 32768-byte limit
error: 7 of 10 lines not accepted (7 rejected as bad input, 0 not delivered)
`, "F:", file+":")
	if res.Stderr != wantErr || res.Code != 1 {
		t.Errorf("exit %d, stderr:\n%s\nwant:\n%s", res.Code, res.Stderr, wantErr)
	}
	var sum sendSummary
	json.Unmarshal([]byte(res.Stdout), &sum)
	wantSum := sendSummary{Files: []string{file}, Lines: 11, Accepted: 3, Rejected: 7, Blank: 1, Bytes: int64(len(in)), InputBytes: int64(len(in)), Batches: 1, LastAccepted: file + ":11"}
	if diff := cmp.Diff(wantSum, sum, cmpopts.IgnoreFields(sendSummary{}, "Batches")); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	// Each line comes after its reason, on a # line that send skips.
	inLines := strings.Split(in, "\n")
	reasons := strings.Split(strings.TrimSuffix(wantErr, "\n"), "\n")
	var wantRejected string
	for i, n := range []int{2, 3, 5, 7, 8, 9, 10} {
		wantRejected += "# " + reasons[i] + "\n" + inLines[n-1] + "\n"
	}
	gotRejected, _ := os.ReadFile(errFile)
	if string(gotRejected) != wantRejected {
		t.Errorf("errors file:\n%.500s\nwant:\n%.500s", gotRejected, wantRejected)
	}
	var users []string
	for _, m := range srv.accepted() {
		users = append(users, str(m, "userId")+str(m, "anonymousId"))
	}
	if diff := cmp.Diff([]string{"u1", "u2", "a6"}, users); diff != "" {
		t.Errorf("sent mismatch (-want +got):\n%s", diff)
	}
}

func gzipFile(t *testing.T, name, content string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(content))
	w.Close()
	return writeFile(t, name, b.String())
}

func TestSendGzipAndSeveralInputs(t *testing.T) {
	lines := sampleLines(t)
	gz := gzipFile(t, "a.ndjson.gz", strings.Join(lines[:10], "\n")+"\n")
	plain := writeFile(t, "b.ndjson", strings.Join(lines[10:15], "\n"))
	stdinGz := func() string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(strings.Join(lines[15:], "\n")))
		w.Close()
		return b.String()
	}()
	srv := newCollectServer(t, nil)
	res := execute(t, clientFactory(t, stdinGz, srv), "send", gz, plain, "-", "-o", "json")
	var sum sendSummary
	json.Unmarshal([]byte(res.Stdout), &sum)
	if res.Code != 0 || sum.Accepted != 20 || sum.LastAccepted != "stdin:5" {
		t.Fatalf("%+v\n%+v", res, sum)
	}
	for i, m := range srv.accepted() {
		var in map[string]json.RawMessage
		json.Unmarshal([]byte(lines[i]), &in)
		if string(m["type"]) != string(in["type"]) || string(m["properties"]) != string(in["properties"]) {
			t.Errorf("message %d out of order or changed", i)
		}
	}
}

// genLines makes n valid track lines with line numbers in them.
func genLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"type":"track","userId":"u%d","event":"E","properties":{"line":%d}}`+"\n", i%7, i)
	}
	return b.String()
}

func lineOf(m map[string]json.RawMessage) int {
	var p struct{ Line int }
	json.Unmarshal(m["properties"], &p)
	return p.Line
}

// A server failing a third of its requests still gets every line, once
// accepted.
func TestSendRetriesEveryLineArrives(t *testing.T) {
	const n = 500
	srv := newCollectServer(t, func(i int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
		if i%3 == 1 {
			w.WriteHeader(503)
			return
		}
		w.Write([]byte(`{"success":true}`))
	})
	res := execute(t, clientFactory(t, genLines(n), srv), "send", "--batch-size", "10", "--retry-base", "1ms", "-o", "json")
	if res.Code != 0 {
		t.Fatalf("%+v", res)
	}
	seen := map[int]int{}
	for _, m := range srv.accepted() {
		seen[lineOf(m)]++
	}
	for i := 1; i <= n; i++ {
		if seen[i] != 1 {
			t.Errorf("line %d accepted %d times", i, seen[i])
		}
	}
	var sum sendSummary
	json.Unmarshal([]byte(res.Stdout), &sum)
	if sum.Accepted != n || sum.Retries == 0 || sum.LastAccepted != fmt.Sprintf("stdin:%d", n) {
		t.Errorf("summary %+v", sum)
	}
}

// Lines the API refuses are reported one by one and kept for resending.
func TestSendUndeliverable(t *testing.T) {
	in := genLines(6)
	srv := newCollectServer(t, func(i int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
		if i == 2 || i == 3 {
			w.WriteHeader(400)
			w.Write([]byte(`{"error":"invalid batch"}`))
			return
		}
		w.Write([]byte(`{"success":true}`))
	})
	errFile := filepath.Join(t.TempDir(), "e.ndjson")
	res := execute(t, clientFactory(t, in, srv), "send", "--batch-size", "1", "--errors-file", errFile)
	want := `stdin:3: not delivered: server answered 400: invalid batch
stdin:4: not delivered: server answered 400: invalid batch
error: 2 of 6 lines not accepted (0 rejected as bad input, 2 not delivered)
`
	if res.Code != 1 || res.Stderr != want {
		t.Errorf("exit %d stderr\n%s\nwant\n%s", res.Code, res.Stderr, want)
	}
	golden(t, "send/undeliverable.golden", strings.ReplaceAll(res.Stdout, errFile, "ERRORS.ndjson"))
	lines := strings.SplitAfter(in, "\n")
	if b, _ := os.ReadFile(errFile); string(b) != "# stdin:3: not delivered: server answered 400: invalid batch\n"+lines[2]+
		"# stdin:4: not delivered: server answered 400: invalid batch\n"+lines[3] {
		t.Errorf("errors file %q", b)
	}
	// The errors file is sent again as it is: its # lines are skipped.
	again := newCollectServer(t, nil)
	res = execute(t, clientFactory(t, "", again), "send", errFile, "-o", "json")
	var sum sendSummary
	json.Unmarshal([]byte(res.Stdout), &sum)
	if diff := cmp.Diff([]int{3, 4}, linesArrived(t, again)); res.Code != 0 || diff != "" || sum.Blank != 2 {
		t.Errorf("resent: exit %d %s, summary %+v, lines (-want +got):\n%s", res.Code, res.Stderr, sum, diff)
	}
}

// Ctrl-C mid-file: reading stops, what was queued is flushed, nothing
// accepted is lost or sent twice, and the summary names the last line up
// to which everything was accepted.
func TestSendInterrupted(t *testing.T) {
	const n = 20000
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	accepted := atomic.Int32{}
	srv := newCollectServer(t, func(_ int, msgs []map[string]json.RawMessage, w http.ResponseWriter) {
		if accepted.Add(int32(len(msgs))) >= 1000 {
			once.Do(cancel)
		}
		w.Write([]byte(`{"success":true}`))
	})
	res := executeCtx(t, ctx, clientFactory(t, genLines(n), srv), "send", "--batch-size", "50", "--max-queue-size", "200", "-o", "json")
	if res.Code != 130 {
		t.Fatalf("exit %d: %s", res.Code, res.Stderr)
	}
	var sum sendSummary
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
		t.Fatal(err, res.Stdout)
	}
	seen := map[int]int{}
	maxLine := 0
	for _, m := range srv.accepted() {
		l := lineOf(m)
		seen[l]++
		maxLine = max(maxLine, l)
	}
	var last int
	fmt.Sscanf(sum.LastAccepted, "stdin:%d", &last)
	if !sum.Interrupted || sum.Accepted != int64(len(seen)) || last < 1000 || last >= n {
		t.Errorf("summary %+v, %d distinct lines arrived", sum, len(seen))
	}
	for l, c := range seen {
		if c != 1 {
			t.Errorf("line %d sent %d times", l, c)
		}
	}
	for l := 1; l <= last; l++ {
		if seen[l] != 1 {
			t.Fatalf("line %d ≤ last accepted %d never arrived", l, last)
		}
	}
	if last != maxLine || len(seen) != last {
		t.Errorf("last accepted %d, but lines up to %d arrived (%d distinct)", last, maxLine, len(seen))
	}
}

// hangingCollectServer is a collection API whose requests hang until the
// test ends; arrived says when each came.
func hangingCollectServer(t *testing.T) (*collectServer, <-chan struct{}) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 100)
	srv := newCollectServer(t, func(_ int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
		arrived <- struct{}{}
		<-release
	})
	t.Cleanup(func() { close(release) }) // before the server's own cleanup, which waits for them
	return srv, arrived
}

// A second Ctrl-C abandons the flush: the command returns while a request
// still hangs.
func TestSendSecondInterrupt(t *testing.T) {
	srv, arrived := hangingCollectServer(t)
	f := clientFactory(t, genLines(50), srv)
	sigs := make(chan os.Signal, 2)
	cmd := NewCmdSend(f, func(o *SendOptions) error {
		o.interrupts = sigs
		return sendRun(o)
	})
	f.Format = cli.FormatJSON
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetArgs([]string{"--write-key", "k", "--endpoint", srv.URL(), "--batch-size", "10"})
	done := make(chan error, 1)
	go func() { done <- cmd.Execute() }()
	select {
	case <-arrived:
	case err := <-done:
		t.Fatalf("ended before a request: %v", err)
	}
	sigs <- syscall.SIGINT
	sigs <- syscall.SIGINT
	err := <-done
	if cli.ExitCode(err) != 130 {
		t.Fatalf("err %v", err)
	}
	var sum sendSummary
	json.Unmarshal(f.IO.Out.(*bytes.Buffer).Bytes(), &sum)
	if sum.Accepted != 0 || sum.Unsent == 0 || sum.LastAccepted != "" {
		t.Errorf("summary %+v", sum)
	}
}

func TestSendUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"send", "/nonexistent.ndjson"}, nil, "cannot read /nonexistent.ndjson: no such file or directory"},
		{[]string{"send", "--workers", "0"}, nil, "--workers must be at least 1"},
		{[]string{"send", "--batch-size", "0"}, nil, "--batch-size must be at least 1"},
		{[]string{"send", "--max-queue-size", "-1"}, nil, "--max-queue-size must be at least 1"},
		{[]string{"send", "--rate", "-1"}, nil, "--rate must not be negative"},
		{[]string{"send", "-", "-"}, nil, "stdin (-) given twice"},
		{[]string{"send", "."}, nil, "cannot read .: is a directory"},
		{[]string{"send"}, map[string]string{}, "a write key is required: use --write-key or EVFWD_WRITE_KEY"},
		{[]string{"send", "--errors-file", "/nonexistent/dir/e"}, nil, "--errors-file: open /nonexistent/dir/e: no such file or directory"},
		{[]string{"send", "--skip", "-1"}, nil, "--skip must not be negative"},
		{[]string{"send", "--skip", "1", "--resume", "stdin:1"}, nil, "--skip and --resume exclude each other: --resume alone says where to go on"},
		{[]string{"send", "--resume", "other.ndjson:3"}, nil, "--resume other.ndjson:3: other.ndjson is not among the inputs (stdin)"},
		{[]string{"send", "--resume", "stdin"}, nil, "--resume stdin: want FILE:LINE, as the summary's last accepted line"},
		{[]string{"send", "--resume", "-:0"}, nil, "--resume -:0: LINE must be a line number from 1"},
		{[]string{"send", "-", "--resume", "-:x"}, nil, "--resume -:x: LINE must be a line number from 1"},
		{[]string{"send", "../testdata/events.ndjson", "../testdata/events.ndjson", "--resume", "../testdata/events.ndjson:2"}, nil, "--resume ../testdata/events.ndjson:2: ../testdata/events.ndjson is given more than once; use --skip"},
	}
	for _, tt := range tests {
		srv := newCollectServer(t, nil)
		f := clientFactory(t, genLines(3), srv)
		if tt.env != nil {
			f.Getenv = func(k string) string { return tt.env[k] }
		}
		got := execute(t, f, tt.args...)
		if diff := cmp.Diff(result{Stderr: "error: " + tt.want + "\n", Code: 2}, got); diff != "" {
			t.Errorf("%v mismatch (-want +got):\n%s", tt.args, diff)
		}
	}
}

// The progress line reads at a glance, and on a TTY it is drawn in place.
func TestSendProgressLine(t *testing.T) {
	sum := importer.Summary{Lines: 12345, Accepted: 12000, Rejected: 3, BytesRead: 2_500_000, TotalBytes: 10_000_000, Elapsed: 2 * time.Second}
	want := "read 12,345 · sent 12,000 · failed 3 · 6,000 ev/s · 2.5 MB of 10.0 MB · ETA 6s"
	if got := progressLine(sum); got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	// On a TTY the line is drawn in place and cleared before other lines.
	var b bytes.Buffer
	c := &console{w: &b}
	c.draw("read 1")
	c.line("x:1: bad")
	c.draw("read 2")
	if got, want := b.String(), "\r\x1b[Kread 1\r\x1b[Kx:1: bad\n\r\x1b[Kread 2"; got != want {
		t.Errorf("console %q, want %q", got, want)
	}
}

// On a TTY, send still ends with a clean stderr (progress cleared).
func TestSendTTY(t *testing.T) {
	srv := newCollectServer(t, nil)
	f := clientFactory(t, genLines(10), srv)
	f.IO.SetTTY(true)
	res := execute(t, f, "send")
	if res.Code != 0 || strings.Contains(strings.ReplaceAll(res.Stderr, "\r\x1b[K", ""), "error") {
		t.Errorf("%+v", res)
	}
	sc := bufio.NewScanner(strings.NewReader(res.Stdout))
	sc.Scan()
	if !strings.HasPrefix(sc.Text(), "✓ sent: 10 lines from stdin") {
		t.Errorf("summary %q", res.Stdout)
	}
}

// refuseKey answers every request with status, as the API does a wrong
// write key.
func refuseKey(status int) func(int, []map[string]json.RawMessage, http.ResponseWriter) {
	return func(_ int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
		w.WriteHeader(status)
		w.Write([]byte(`{"error":"invalid write key"}`))
	}
}

// A wrong write key is one error, not one per line: the run stops at the
// first answer, says what was not sent, and exits 1.
func TestSendWrongKey(t *testing.T) {
	for _, status := range []int{401, 403} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			const n = 50000
			srv := newCollectServer(t, refuseKey(status))
			res := execute(t, clientFactory(t, genLines(n), srv), "send", "-o", "json")
			want := fmt.Sprintf("error: the API refused the write key (HTTP %d): check --write-key or EVFWD_WRITE_KEY\n", status)
			if res.Code != 1 || res.Stderr != want {
				t.Errorf("exit %d, stderr:\n%.500s\nwant:\n%s", res.Code, res.Stderr, want)
			}
			if r := len(srv.requests()); r != 1 {
				t.Errorf("%d requests, want 1", r)
			}
			var sum sendSummary
			if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil {
				t.Fatal(err, res.Stdout)
			}
			if sum.Error != fmt.Sprintf("the API refused the write key (HTTP %d)", status) {
				t.Errorf("error %q", sum.Error)
			}
			if sum.Accepted+sum.Failed != 0 || sum.Unsent == 0 || sum.Lines >= n || sum.LastAccepted != "" || sum.Resume != "" || sum.Interrupted {
				t.Errorf("summary %+v", sum)
			}
		})
	}
}

// Nothing on the default endpoint ends the run at the first refusal, with
// one error and the hint, not a line per input line.
func TestSendDefaultEndpointRefusedStops(t *testing.T) {
	f := clientFactory(t, genLines(50000), nil)
	cmd := NewCmdSend(f, func(o *SendOptions) error {
		o.Client.Fallback = closedURL(t) // the default endpoint, with nothing on it
		return sendRun(o)
	})
	f.Format = cli.FormatJSON
	cmd.SetArgs([]string{"--write-key", "k"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	msg := cli.Message(err)
	if code := cli.ExitCode(err); code != 1 || !strings.HasSuffix(msg, "connection refused\n"+serveHint) {
		t.Errorf("exit %d %q, want 1 and the refusal with the hint", code, msg)
	}
	if e := f.IO.ErrOut.(*bytes.Buffer).String(); e != "" {
		t.Errorf("stderr %.300q, want nothing but the error", e)
	}
	var sum sendSummary
	if err := json.Unmarshal(f.IO.Out.(*bytes.Buffer).Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 0 || sum.Unsent == 0 || sum.Lines >= 50000 || !strings.HasSuffix(sum.Error, "connection refused") {
		t.Errorf("summary %+v", sum)
	}
}

// A server you chose that is down gets its retries, then ends the run with
// one error: not a "not delivered" line per input line.
func TestSendChosenEndpointDownStops(t *testing.T) {
	f := clientFactory(t, genLines(5000), nil)
	cmd := NewCmdSend(f, func(o *SendOptions) error {
		o.Client.RetryBase = time.Millisecond
		return sendRun(o)
	})
	cmd.SetArgs([]string{"--write-key", "k", "--endpoint", closedURL(t)})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	msg := cli.Message(err)
	if code := cli.ExitCode(err); code != 1 || !strings.HasSuffix(msg, "connection refused") || strings.Contains(msg, serveHint) {
		t.Errorf("exit %d %q, want 1 and the refusal, without the serve hint", code, msg)
	}
	if e := f.IO.ErrOut.(*bytes.Buffer).String(); strings.Contains(e, "not delivered") {
		t.Errorf("stderr %.300q, want no line per input line", e)
	}
	if out := f.IO.Out.(*bytes.Buffer).String(); !strings.Contains(out, "nothing was settled: run the same command again") {
		t.Errorf("summary %q, want the hint to run again", out)
	}
}

// The --resume a stopped run prints replaces its --skip, which it excludes.
func TestSendResumeHintAfterSkip(t *testing.T) {
	var n atomic.Int32
	srv := newCollectServer(t, func(_ int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
		if n.Add(1) > 2 {
			refuseKey(401)(0, nil, w)
		}
	})
	res := execute(t, clientFactory(t, genLines(1000), srv), "send", "--skip", "10", "--batch-size", "10")
	if res.Code != 1 || !regexp.MustCompile(`--resume stdin:\d+ instead of --skip\n`).MatchString(res.Stdout) {
		t.Errorf("exit %d, stdout %q", res.Code, res.Stdout)
	}
}

// resumeArg is the --resume argument a text summary tells to use.
func resumeArg(t *testing.T, summary string) string {
	t.Helper()
	const hint = "to send the rest, run the same command with --resume "
	i := strings.Index(summary, hint)
	if i < 0 {
		t.Fatalf("no resume hint in:\n%s", summary)
	}
	arg, _, _ := strings.Cut(summary[i+len(hint):], "\n")
	return arg
}

// linesArrived returns the line numbers of the messages srv accepted, in
// order, and fails on one accepted twice.
func linesArrived(t *testing.T, srv *collectServer) []int {
	t.Helper()
	var got []int
	seen := map[int]bool{}
	for _, m := range srv.accepted() {
		l := lineOf(m)
		if seen[l] {
			t.Errorf("line %d accepted twice", l)
		}
		seen[l] = true
		got = append(got, l)
	}
	return got
}

func lineRange(from, to int) []int {
	var out []int
	for l := from; l <= to; l++ {
		out = append(out, l)
	}
	return out
}

// A run stopped by a refused key names the argument that resumes it, and
// the same command with it sends exactly the lines not yet accepted.
func TestSendResumeAfterWrongKey(t *testing.T) {
	const n = 2000
	file := writeFile(t, "in.ndjson", genLines(n))
	first := newCollectServer(t, func(i int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
		if i >= 3 {
			refuseKey(401)(i, nil, w)
			return
		}
		w.Write([]byte(`{"success":true}`))
	})
	res := execute(t, clientFactory(t, "", first), "send", file, "--batch-size", "10")
	if res.Code != 1 || !strings.HasPrefix(res.Stdout, "✗ stopped: ") {
		t.Fatalf("%+v", res)
	}
	sent := linesArrived(t, first)
	arg := resumeArg(t, res.Stdout)
	if want := fmt.Sprintf("%s:%d", file, len(sent)); arg != want || len(sent) == 0 {
		t.Fatalf("resume %s, want %s", arg, want)
	}

	second := newCollectServer(t, nil)
	res = execute(t, clientFactory(t, "", second), "send", file, "--batch-size", "10", "--resume", arg, "-o", "json")
	var sum sendSummary
	json.Unmarshal([]byte(res.Stdout), &sum)
	if diff := cmp.Diff(lineRange(len(sent)+1, n), linesArrived(t, second)); res.Code != 0 || diff != "" {
		t.Errorf("exit %d %s, lines (-want +got):\n%s", res.Code, res.Stderr, diff)
	}
	if sum.Skipped != int64(len(sent)) || sum.Lines != n || sum.LastAccepted != file+":2000" || sum.Resume != "" {
		t.Errorf("summary %+v", sum)
	}
}

// An interrupted run on stdin resumes with the position it printed, as
// stdin:N or -:N.
func TestSendResumeInterrupted(t *testing.T) {
	const n = 5000
	for _, name := range []string{"stdin", "-"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			first := newCollectServer(t, func(i int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
				if i == 5 {
					cancel()
				}
				w.Write([]byte(`{"success":true}`))
			})
			res := executeCtx(t, ctx, clientFactory(t, genLines(n), first), "send", "--batch-size", "50", "--max-queue-size", "200", "-o", "json")
			var sum sendSummary
			json.Unmarshal([]byte(res.Stdout), &sum)
			sent := linesArrived(t, first)
			if res.Code != 130 || sum.Resume != fmt.Sprintf("stdin:%d", len(sent)) || len(sent) >= n {
				t.Fatalf("exit %d, %d lines arrived, summary %+v", res.Code, len(sent), sum)
			}
			arg := strings.Replace(sum.Resume, "stdin", name, 1)
			second := newCollectServer(t, nil)
			res = execute(t, clientFactory(t, genLines(n), second), "send", "--resume", arg, "-o", "json")
			if diff := cmp.Diff(lineRange(len(sent)+1, n), linesArrived(t, second)); res.Code != 0 || diff != "" {
				t.Errorf("exit %d %s, lines (-want +got):\n%s", res.Code, res.Stderr, diff)
			}
		})
	}
}

// --skip counts lines across the inputs as one stream; --resume names a
// file and skips those before it unread. The text summary counts them.
func TestSendSkipAndResumeFiles(t *testing.T) {
	all := strings.SplitAfter(genLines(10), "\n")
	a := writeFile(t, "a.ndjson", strings.Join(all[:5], ""))
	b := writeFile(t, "b.ndjson", strings.Join(all[5:], ""))
	for _, tt := range []struct {
		args        []string
		wantLines   []int
		wantSkipped int
	}{
		{[]string{"--skip", "7"}, []int{8, 9, 10}, 7},
		{[]string{"--resume", "./" + filepath.Base(b) + ":2"}, []int{8, 9, 10}, 2},
		{[]string{"--resume", a + ":4"}, []int{5, 6, 7, 8, 9, 10}, 4},
	} {
		srv := newCollectServer(t, nil)
		f := clientFactory(t, "", srv)
		// ./b.ndjson names b relative to its directory.
		t.Chdir(filepath.Dir(b))
		res := execute(t, f, append([]string{"send", a, filepath.Base(b)}, tt.args...)...)
		if diff := cmp.Diff(tt.wantLines, linesArrived(t, srv)); res.Code != 0 || diff != "" {
			t.Errorf("%v: exit %d %s, lines (-want +got):\n%s", tt.args, res.Code, res.Stderr, diff)
		}
		skipped := regexp.MustCompile(`(?m)^  skipped +` + fmt.Sprint(tt.wantSkipped) + `  `)
		if !skipped.MatchString(res.Stdout) || strings.Contains(res.Stdout, "to send the rest") {
			t.Errorf("%v: summary\n%s", tt.args, res.Stdout)
		}
	}
}

// An input that cannot be read is said first, in words, with no summary
// when it is the only one, and exits 2 (input error), whoever runs it.
func TestSendUnreadableInput(t *testing.T) {
	dir := t.TempDir()
	plain := writeFile(t, "plain.ndjson", genLines(1))
	tests := []struct{ path, cause string }{
		{dir, "is a directory"},
		{filepath.Join(dir, "missing.ndjson"), "no such file or directory"},
		{filepath.Join(plain, "x.ndjson"), "not a directory"},
	}
	if os.Geteuid() != 0 { // root reads a mode-000 file
		locked := writeFile(t, "locked.ndjson", genLines(1))
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct{ path, cause string }{locked, "permission denied"})
	}
	for _, tt := range tests {
		srv := newCollectServer(t, nil)
		got := execute(t, clientFactory(t, "", srv), "send", tt.path)
		want := result{Stderr: "error: cannot read " + tt.path + ": " + tt.cause + "\n", Code: 2}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tt.path, diff)
		}
		if n := len(srv.requests()); n != 0 {
			t.Errorf("%s: %d requests", tt.path, n)
		}
	}
}

// Like cat, the FILEs that can be read are still sent when one cannot;
// the bad one is said first, the summary names it, and the exit is 2.
func TestSendSomeInputsUnreadable(t *testing.T) {
	all := strings.SplitAfter(genLines(6), "\n")
	a := writeFile(t, "a.ndjson", strings.Join(all[:3], ""))
	c := writeFile(t, "c.ndjson", strings.Join(all[3:6], ""))
	bad := t.TempDir()
	srv := newCollectServer(t, nil)
	res := execute(t, clientFactory(t, "", srv), "send", a, bad, c)
	if diff := cmp.Diff(lineRange(1, 6), linesArrived(t, srv)); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	want := "error: cannot read " + bad + ": is a directory\n" +
		"error: 1 of 3 inputs not read to the end: " + bad + "\n"
	if res.Code != 2 || res.Stderr != want {
		t.Errorf("exit %d, stderr:\n%s\nwant:\n%s", res.Code, res.Stderr, want)
	}
	if !strings.HasPrefix(res.Stdout, "✗ sent with errors: 6 lines from "+a+", "+c+" in ") ||
		!strings.Contains(res.Stdout, "  not read        "+bad+": is a directory\n") {
		t.Errorf("summary:\n%s", res.Stdout)
	}
	// No position past the unread FILE counts as settled: a --resume
	// from there would skip it.
	res = execute(t, clientFactory(t, "", newCollectServer(t, nil)), "send", a, bad, c, "-o", "json")
	var sum sendSummary
	json.Unmarshal([]byte(res.Stdout), &sum)
	if sum.LastAccepted != a+":3" || sum.Accepted != 6 || len(sum.Unread) != 1 || res.Code != 2 {
		t.Errorf("exit %d, summary %+v", res.Code, sum)
	}
}

// errorsFileEntries reads an errors file: each line after its "# " reason.
func errorsFileEntries(t *testing.T, path string) (reasons, lines []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(all)%2 != 0 {
		t.Fatalf("errors file of %d lines, want a reason before each line:\n%.500s", len(all), b)
	}
	for i := 0; i < len(all); i += 2 {
		if !strings.HasPrefix(all[i], "# stdin:") || strings.HasPrefix(all[i+1], "#") {
			t.Fatalf("entry %q %q, want a # reason then the line", all[i], all[i+1])
		}
		reasons, lines = append(reasons, all[i]), append(lines, all[i+1])
	}
	return reasons, lines
}

// A server you chose that is down: every line read and not delivered
// lands in --errors-file with why, the one that ran out of retries and
// those queued behind it alike, and stderr says each retry round once,
// whatever the workers, rather than nothing until the end.
func TestSendDeadEndpointErrorsFile(t *testing.T) {
	const n = 3000
	in := genLines(n)
	errFile := filepath.Join(t.TempDir(), "e.ndjson")
	f := clientFactory(t, in, nil)
	res := execute(t, f, "send", "--endpoint", closedURL(t), "--retry-base", "1ms", "--workers", "3", "--batch-size", "10",
		"--max-queue-size", "50", "--errors-file", errFile, "-o", "json")
	var sum sendSummary
	if err := json.Unmarshal([]byte(res.Stdout), &sum); err != nil || res.Code != 1 {
		t.Fatalf("exit %d %v: %s", res.Code, err, res.Stderr)
	}
	reasons, lines := errorsFileEntries(t, errFile)
	if int64(len(lines)) != sum.Failed+sum.Unsent || len(lines) == 0 || sum.Accepted != 0 {
		t.Errorf("%d lines in the errors file, summary %+v", len(lines), sum)
	}
	inLines := strings.Split(in, "\n")
	outOfRetries := 0
	for i, r := range reasons {
		var num int
		fmt.Sscanf(r, "# stdin:%d:", &num)
		if num < 1 || num > n || inLines[num-1] != lines[i] {
			t.Fatalf("%q then %q: not the line it names", r, lines[i])
		}
		switch {
		case strings.HasSuffix(r, ": connection refused (after 10 attempts)"):
			outOfRetries++
		case !strings.Contains(r, ": not sent, the run stopped: POST http://") && !strings.Contains(r, "not delivered, the run stopped"):
			t.Errorf("reason %q", r)
		}
	}
	if outOfRetries == 0 {
		t.Errorf("no line out of retries in:\n%s", strings.Join(reasons[:min(5, len(reasons))], "\n"))
	}
	var rounds []string
	for l := range strings.Lines(res.Stderr) {
		if strings.HasPrefix(l, "retrying ") {
			rounds = append(rounds, l)
		}
	}
	if len(rounds) != 9 {
		t.Fatalf("%d retry lines, want one per round (9):\n%s", len(rounds), res.Stderr)
	}
	for i, l := range rounds {
		want := regexp.MustCompile(fmt.Sprintf(`^retrying (1 event|\d+ events) in \d+(\.\d+)?m?s: POST http://127\.0\.0\.1:\d+/v1/batch: connection refused \(attempt %d of 10 failed\)\n$`, i+1))
		if !want.MatchString(l) {
			t.Errorf("retry line %q", l)
		}
	}
}

// Lines a second Ctrl-C leaves queued are in --errors-file too, saying so.
func TestSendAbandonedErrorsFile(t *testing.T) {
	srv, arrived := hangingCollectServer(t)
	errFile := filepath.Join(t.TempDir(), "e.ndjson")
	f := clientFactory(t, genLines(50), srv)
	sigs := make(chan os.Signal, 2)
	cmd := NewCmdSend(f, func(o *SendOptions) error {
		o.interrupts = sigs
		return sendRun(o)
	})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	f.Format = cli.FormatJSON
	cmd.SetArgs([]string{"--write-key", "k", "--endpoint", srv.URL(), "--batch-size", "10", "--errors-file", errFile})
	done := make(chan error, 1)
	go func() { done <- cmd.Execute() }()
	<-arrived
	sigs <- syscall.SIGINT
	sigs <- syscall.SIGINT
	if err := <-done; cli.ExitCode(err) != 130 {
		t.Fatalf("err %v", err)
	}
	var sum sendSummary
	json.Unmarshal(f.IO.Out.(*bytes.Buffer).Bytes(), &sum)
	reasons, lines := errorsFileEntries(t, errFile)
	if int64(len(lines)) != sum.Unsent || len(lines) == 0 {
		t.Errorf("%d lines in the errors file, summary %+v", len(lines), sum)
	}
	// The first batch was in flight; how many lines it took depends on
	// how many were queued when it left.
	const inFlight, queued = ": abandoned while its request was in flight: it may have arrived", ": abandoned before it was sent"
	for i, r := range reasons {
		if !strings.HasSuffix(r, inFlight) && (i == 0 || !strings.HasSuffix(r, queued)) {
			t.Errorf("reason %q", r)
		}
	}
}

// The ETA settles: a run that reads its first 10,000 lines at once (the
// queues filling) and then sends 1,000 lines/s shows the time truly left
// once its rate has a second of history, rather than one that grows as
// the average since the start falls.
func TestSendProgressETASettles(t *testing.T) {
	const total, perSec, ahead, lineBytes = 100_000, 1000, 10_000, 100
	m := &progressMeter{}
	eta := regexp.MustCompile(` · ETA (\S+)$`)
	var last time.Duration
	for tick := 1; tick <= 360; tick++ { // 90 s at 250 ms
		at := time.Duration(tick) * 250 * time.Millisecond
		done := min(int64(at.Seconds()*perSec), total)
		read := min(done+ahead, total)
		line := m.line(importer.Summary{Lines: read, Accepted: done, BytesRead: read * lineBytes, TotalBytes: total * lineBytes, Elapsed: at})
		match := eta.FindStringSubmatch(line)
		if done == total {
			if match != nil {
				t.Errorf("at %s, all sent: %q", at, line)
			}
			continue
		}
		if match == nil {
			t.Fatalf("at %s: no ETA in %q", at, line)
		}
		got, _ := time.ParseDuration(match[1])
		want := time.Duration(float64(total-done) / perSec * float64(time.Second))
		if at >= 2*time.Second && (got-want).Abs() > time.Second {
			t.Errorf("at %s: ETA %s, want %s", at, got, want.Round(time.Second))
		}
		if tick > 1 && got > last+time.Second {
			t.Errorf("at %s: ETA grew from %s to %s", at, last, got)
		}
		last = got
	}
}

// On a terminal, no progress line shows more lines sent than read, even
// while a full queue holds a worker mid-chunk as batches complete.
func TestSendProgressSentWithinRead(t *testing.T) {
	srv := newCollectServer(t, func(_ int, _ []map[string]json.RawMessage, w http.ResponseWriter) {
		time.Sleep(200 * time.Microsecond)
		w.Write([]byte(`{"success":true}`))
	})
	f := clientFactory(t, "", srv)
	f.IO.SetTTY(true)
	cmd := NewCmdSend(f, func(o *SendOptions) error {
		o.progressEvery = time.Millisecond
		return sendRun(o)
	})
	cmd.SetArgs([]string{writeFile(t, "in.ndjson", genLines(3000)), "--write-key", "k", "--endpoint", srv.URL(), "--batch-size", "10", "--max-queue-size", "20", "--workers", "2"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	counts := regexp.MustCompile(`read ([\d,]+) · sent ([\d,]+) · `)
	samples := 0
	for _, draw := range strings.Split(f.IO.ErrOut.(*bytes.Buffer).String(), "\r\x1b[K") {
		m := counts.FindStringSubmatch(draw)
		if m == nil {
			continue
		}
		samples++
		var read, sent int
		fmt.Sscan(strings.ReplaceAll(m[1], ",", ""), &read)
		fmt.Sscan(strings.ReplaceAll(m[2], ",", ""), &sent)
		if sent > read {
			t.Errorf("progress %q: sent above read", draw)
		}
	}
	if samples < 3 {
		t.Errorf("%d progress lines drawn", samples)
	}
}

// An input cut short (a truncated .gz) is an input error too: the lines
// before the cut are sent, the cut is said in words, and the exit is 2.
func TestSendTruncatedInput(t *testing.T) {
	full := gzipFile(t, "full.ndjson.gz", genLines(2000))
	b, _ := os.ReadFile(full)
	cut := writeFile(t, "cut.ndjson.gz", string(b[:len(b)/2]))
	srv := newCollectServer(t, nil)
	res := execute(t, clientFactory(t, "", srv), "send", cut, "-o", "json")
	var sum sendSummary
	json.Unmarshal([]byte(res.Stdout), &sum)
	stderr := regexp.MustCompile(`^error: cannot read ` + regexp.QuoteMeta(cut) + ` at line \d+: unexpected EOF\n` +
		`error: 1 of 1 input not read to the end: ` + regexp.QuoteMeta(cut) + "\n$")
	if res.Code != 2 || !stderr.MatchString(res.Stderr) || sum.Accepted == 0 || sum.Accepted != int64(len(srv.accepted())) {
		t.Errorf("exit %d, stderr %q, summary %+v", res.Code, res.Stderr, sum)
	}
}
