package importer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/google/go-cmp/cmp"
)

var fixedNow = time.Date(2024, 5, 2, 8, 30, 0, 0, time.UTC)

// collector is a collection API that records the line number of every
// message (properties.line) and answers as respond says (200 when nil).
type collector struct {
	srv     *httptest.Server
	respond func(lines []int, w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	batches  [][]int
	accepted []int
}

func newCollector(t *testing.T, respond func(lines []int, w http.ResponseWriter, r *http.Request)) *collector {
	c := &collector{respond: respond}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b struct {
			Batch []struct {
				Properties struct{ Line int }
			}
		}
		if err := json.Unmarshal(body, &b); err != nil {
			t.Errorf("bad body %s: %v", body, err)
		}
		var lines []int
		for _, m := range b.Batch {
			lines = append(lines, m.Properties.Line)
		}
		rw := &statusWriter{ResponseWriter: w, status: 200}
		if c.respond != nil {
			c.respond(lines, rw, r)
		}
		c.mu.Lock()
		c.batches = append(c.batches, lines)
		if rw.status == 200 {
			c.accepted = append(c.accepted, lines...)
		}
		c.mu.Unlock()
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// got returns the batches that arrived and the lines accepted.
func (c *collector) got() (batches [][]int, accepted []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.batches), slices.Clone(c.accepted)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

// genLines makes n valid track lines with their line numbers in them.
func genLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"type":"track","userId":"u%d","event":"E","properties":{"line":%d}}`+"\n", i%7, i)
	}
	return b.String()
}

func clientConfig(c *collector) analytics.Config {
	return analytics.Config{WriteKey: "k", Endpoint: c.srv.URL, Retry: analytics.RetryPolicy{MaxAttempts: 1}}
}

func run(t *testing.T, in string, opts Options) Summary {
	t.Helper()
	im, err := New([]Input{Stream("in", strings.NewReader(in))}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return im.Run(context.Background())
}

// Workers send side by side, every line arrives once, and lines keep
// their order within the block a worker was given.
func TestWorkers(t *testing.T) {
	const n = 3000
	var inflight, maxInflight atomic.Int32
	overlap := make(chan struct{}) // closed when two requests are in flight
	var once sync.Once
	srv := newCollector(t, func(_ []int, _ http.ResponseWriter, r *http.Request) {
		c := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := maxInflight.Load()
			if c <= m || maxInflight.CompareAndSwap(m, c) {
				break
			}
		}
		if c >= 2 {
			once.Do(func() { close(overlap) })
		}
		select { // hold the first request until another worker's arrives
		case <-overlap:
		case <-r.Context().Done():
		}
	})
	cfg := clientConfig(srv)
	cfg.BatchSize = 50
	sum := run(t, genLines(n), Options{Client: cfg, Workers: 4})
	if sum.Accepted != n || sum.LastAccepted != (Position{"in", n}) {
		t.Errorf("summary %+v", sum)
	}
	batches, accepted := srv.got()
	seen := map[int]int{}
	for _, l := range accepted {
		seen[l]++
	}
	if len(seen) != n {
		t.Errorf("%d distinct lines arrived, want %d", len(seen), n)
	}
	for l, c := range seen {
		if c != 1 {
			t.Errorf("line %d arrived %d times", l, c)
		}
	}
	if m := maxInflight.Load(); m < 2 || m > 4 {
		t.Errorf("at most %d requests in flight, want 2..4 (one per worker)", m)
	}
	for _, b := range batches {
		for i := 1; i < len(b); i++ {
			if b[i] != b[i-1]+1 && (b[i-1]-1)/chunkLines == (b[i]-1)/chunkLines {
				t.Fatalf("lines %d then %d in one batch", b[i-1], b[i])
			}
		}
	}
}

// Lines of refused batches are reported one by one, with their bytes,
// however the workers' batches interleave: each batch says which lines it
// carried.
func TestLinesOfRefusedBatches(t *testing.T) {
	const n = 2000
	refuse := func(lines []int) bool { return slices.ContainsFunc(lines, func(l int) bool { return l%97 == 0 }) }
	srv := newCollector(t, func(lines []int, w http.ResponseWriter, _ *http.Request) {
		if refuse(lines) {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":"invalid batch"}`)
		}
	})
	cfg := clientConfig(srv)
	cfg.BatchSize = 10
	var mu sync.Mutex
	got := map[int64]string{}
	in := genLines(n)
	sum := run(t, in, Options{Client: cfg, Workers: 3, KeepLines: true, OnLineError: func(e *LineError) {
		mu.Lock()
		defer mu.Unlock()
		if !e.Sent || e.Input != "in" {
			t.Errorf("%+v", e)
		}
		got[e.Line] = string(e.Bytes)
		if want := fmt.Sprintf("in:%d: not delivered: server answered 400: invalid batch", e.Line); e.Error() != want {
			t.Errorf("error %q, want %q", e.Error(), want)
		}
	}})
	want := map[int64]string{}
	inLines := strings.Split(in, "\n")
	firstRefused := int64(n + 1)
	batches, _ := srv.got()
	for _, b := range batches {
		if refuse(b) {
			for _, l := range b {
				want[int64(l)] = inLines[l-1]
				firstRefused = min(firstRefused, int64(l))
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if sum.Failed != int64(len(want)) || sum.Accepted != n-int64(len(want)) || sum.LastAccepted != (Position{"in", firstRefused - 1}) {
		t.Errorf("summary %+v, %d refused from line %d", sum, len(want), firstRefused)
	}
}

// fakeClock advances only when something sleeps on it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return nil
}

func TestRate(t *testing.T) {
	const n, rate = 50, 100
	srv := newCollector(t, nil)
	clock := &fakeClock{now: fixedNow}
	cfg := clientConfig(srv)
	cfg.Now = clock.Now
	sum := run(t, genLines(n), Options{Client: cfg, Rate: rate, sleep: clock.Sleep})
	// n events at 100/s: the first at once, the last 49 intervals later.
	if got, want := clock.Now().Sub(fixedNow), (n-1)*time.Second/rate; got != want {
		t.Errorf("paced over %v, want %v", got, want)
	}
	if sum.Accepted != n || sum.Elapsed != (n-1)*time.Second/rate {
		t.Errorf("summary %+v", sum)
	}
}

// Tags find their lines whatever order batches settle in, after the
// dropped last line, and across the reuse of the slice.
func TestPendingTags(t *testing.T) {
	var p pending
	line := func(seq int64) pendingLine { return pendingLine{num: seq, seq: seq} }
	var tags []uint64
	for seq := int64(1); seq <= 3000; seq++ {
		tags = append(tags, p.add(line(seq)))
	}
	p.dropLast() // refused by the client: the next line takes its tag
	if tag := p.add(line(3001)); tag != tags[2999] {
		t.Fatalf("tag %d after a drop, want %d", tag, tags[2999])
	}
	settled := func(tags []uint64) (seqs []int64) {
		for _, l := range p.settle(tags, true) {
			seqs = append(seqs, l.seq)
		}
		return seqs
	}
	if diff := cmp.Diff([]int64{3, 2}, settled([]uint64{tags[2], tags[1]})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	settled(tags[:1])
	settled(tags[3:2500]) // most settled: the slice is reused
	if p.base == 0 {
		t.Fatalf("slice not reused: head %d of %d", p.head, len(p.lines))
	}
	if diff := cmp.Diff([]int64{2501, 3001}, settled([]uint64{tags[2500], tags[2999]})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if got := p.settle(tags[2501:2999], false); got != nil {
		t.Errorf("settle without keep returned %d lines", len(got))
	}
	if p.head != len(p.lines) {
		t.Errorf("%d of %d lines still pending", len(p.lines)-p.head, len(p.lines))
	}
}

func TestOptionErrors(t *testing.T) {
	if _, err := New(nil, Options{Client: analytics.Config{WriteKey: "k", BatchSize: -1}}); err == nil {
		t.Error("a bad client config was accepted")
	}
	if _, err := New(nil, Options{Client: analytics.Config{WriteKey: "k"}, Workers: -1}); err == nil {
		t.Error("negative Workers accepted")
	}
	if _, err := New(nil, Options{Client: analytics.Config{WriteKey: "k"}, Rate: -1}); err == nil {
		t.Error("negative Rate accepted")
	}
}

// An Import that is never run leaves nothing running: New builds no
// client that would wait for Run.
func TestNewStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := analytics.Config{WriteKey: "k", Endpoint: "http://127.0.0.1:1", HTTPClient: &http.Client{}}
		if _, err := New([]Input{Stream("in", strings.NewReader(genLines(3)))}, Options{Client: cfg, Workers: 3}); err != nil {
			t.Fatal(err)
		}
		// synctest.Test fails if a goroutine New started is still blocked.
	})
}

// Tags start at 1: analytics reports 0 for a message queued without one.
func TestPendingFirstTag(t *testing.T) {
	var p pending
	if tag := p.add(pendingLine{num: 1, seq: 1}); tag == 0 {
		t.Fatal("the first line got tag 0, the tag of untagged messages")
	}
}

// The first line of each input is tracked like any other when its batch
// is refused.
func TestFirstLineRefused(t *testing.T) {
	srv := newCollector(t, func(lines []int, w http.ResponseWriter, _ *http.Request) {
		if slices.Contains(lines, 1) {
			w.WriteHeader(400)
		}
	})
	cfg := clientConfig(srv)
	cfg.BatchSize = 1
	var mu sync.Mutex
	var got []string
	im, err := New([]Input{Stream("a", strings.NewReader(genLines(3))), Stream("b", strings.NewReader(genLines(3)))}, Options{
		Client: cfg, KeepLines: true,
		OnLineError: func(e *LineError) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s:%d sent=%v %s", e.Input, e.Line, e.Sent, e.Bytes))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sum := im.Run(context.Background())
	line1 := strings.SplitN(genLines(1), "\n", 2)[0]
	want := []string{"a:1 sent=true " + line1, "b:1 sent=true " + line1}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("line errors mismatch (-want +got):\n%s", diff)
	}
	if sum.Failed != 2 || sum.Accepted != 4 || sum.LastAccepted != (Position{}) {
		t.Errorf("summary %+v", sum)
	}
}

// hangingCollector holds every request until the client gives it up, and
// says on arrived when one came in.
func hangingCollector(t *testing.T) (*collector, <-chan struct{}) {
	arrived := make(chan struct{}, 1)
	srv := newCollector(t, func(_ []int, w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		w.WriteHeader(503)
	})
	return srv, arrived
}

// Ending Run's context stops reading and still delivers what is queued;
// Abandon then gives that up: the lines queued count as unsent, are not
// reported one by one, and nothing is settled.
func TestRunStopThenAbandon(t *testing.T) {
	srv, arrived := hangingCollector(t)
	cfg := clientConfig(srv)
	cfg.BatchSize, cfg.MaxQueueSize = 10, 20
	im, err := New([]Input{Stream("in", strings.NewReader(genLines(1000)))}, Options{Client: cfg,
		OnLineError: func(e *LineError) { t.Errorf("line error %v", e) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan Summary)
	go func() { done <- im.Run(ctx) }()
	<-arrived
	stop()
	select {
	case sum := <-done:
		t.Fatalf("Run returned while a request hung: %+v", sum)
	default:
	}
	im.Abandon()
	sum := <-done
	if sum.Unsent == 0 || sum.Unsent != sum.Lines || sum.Accepted+sum.Failed != 0 || sum.LastAccepted != (Position{}) {
		t.Errorf("summary %+v", sum)
	}
	im.Abandon() // harmless after Run
}

// Abandon alone ends the run too: reading stops as well.
func TestAbandonStopsReading(t *testing.T) {
	srv, arrived := hangingCollector(t)
	cfg := clientConfig(srv)
	cfg.BatchSize, cfg.MaxQueueSize = 10, 20
	im, err := New([]Input{Stream("in", strings.NewReader(genLines(1000)))}, Options{Client: cfg})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Summary)
	go func() { done <- im.Run(context.Background()) }()
	<-arrived
	im.Abandon()
	sum := <-done
	if sum.Unsent == 0 || sum.Lines >= 1000 || sum.Accepted+sum.Failed != 0 {
		t.Errorf("summary %+v", sum)
	}
}

// Abandoned before it runs, an import reads nothing.
func TestAbandonBeforeRun(t *testing.T) {
	srv := newCollector(t, nil)
	opened := false
	im, err := New([]Input{{Name: "in", Size: -1, Open: func() (io.ReadCloser, error) {
		opened = true
		return io.NopCloser(strings.NewReader(genLines(10))), nil
	}}}, Options{Client: clientConfig(srv)})
	if err != nil {
		t.Fatal(err)
	}
	im.Abandon()
	if sum := im.Run(context.Background()); opened || sum.Lines != 0 || sum.Batches != 0 {
		t.Errorf("opened %v, summary %+v", opened, sum)
	}
}

// A stopped run delivers every line it queued: what it reports accepted
// is a prefix of the input, and where to resume is its end.
func TestRunStopDelivers(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	srv := newCollector(t, func([]int, http.ResponseWriter, *http.Request) { stop() })
	cfg := clientConfig(srv)
	cfg.BatchSize, cfg.MaxQueueSize = 10, 20
	im, err := New([]Input{Stream("in", strings.NewReader(genLines(1000)))}, Options{Client: cfg})
	if err != nil {
		t.Fatal(err)
	}
	sum := im.Run(ctx)
	_, accepted := srv.got()
	slices.Sort(accepted)
	if sum.Lines == 0 || sum.Lines >= 1000 || sum.Accepted != sum.Lines || sum.Unsent+sum.Failed != 0 ||
		sum.LastAccepted != (Position{"in", sum.Lines}) || len(accepted) != int(sum.Lines) || accepted[len(accepted)-1] != int(sum.Lines) {
		t.Errorf("summary %+v, %d lines arrived", sum, len(accepted))
	}
}

// A wrong write key stops the run at its first answer: each worker makes
// at most the one request it had in flight, no line is reported one by
// one, and what was queued counts as unsent.
func TestWrongKeyStopsRun(t *testing.T) {
	for _, status := range []int{401, 403} {
		for _, workers := range []int{1, 4} {
			t.Run(fmt.Sprintf("%d/workers=%d", status, workers), func(t *testing.T) {
				const n = 50000
				// Not a collector: the requests of other workers are cut
				// off mid-body when the first answer stops the run.
				var requests atomic.Int32
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					requests.Add(1)
					w.WriteHeader(status)
					io.WriteString(w, `{"error":"invalid write key"}`)
				}))
				t.Cleanup(srv.Close)
				var reported atomic.Int32
				sum := run(t, genLines(n), Options{Client: analytics.Config{WriteKey: "k", Endpoint: srv.URL}, Workers: workers,
					OnLineError: func(*LineError) { reported.Add(1) }})
				if r := requests.Load(); r == 0 || r > int32(workers) {
					t.Errorf("%d requests, want 1..%d", r, workers)
				}
				var ae *AuthError
				if !errors.Is(sum.Fatal, ErrUnauthorized) || !errors.As(sum.Fatal, &ae) || ae.Status != status || ae.Err.Message != "invalid write key" {
					t.Errorf("Fatal %#v", sum.Fatal)
				}
				if want := fmt.Sprintf("the API refused the write key (HTTP %d)", status); sum.Fatal.Error() != want {
					t.Errorf("Fatal %q, want %q", sum.Fatal, want)
				}
				if reported.Load() != 0 || sum.Accepted+sum.Failed != 0 || sum.Unsent == 0 || sum.Unsent != sum.Lines || sum.Lines == n || sum.LastAccepted != (Position{}) {
					t.Errorf("%d lines reported, summary %+v", reported.Load(), sum)
				}
			})
		}
	}
}

// A batch that fails for good on a refused connection (nothing listens at
// the endpoint) ends the run like a refused key: at once under
// StopOnRefused, else when its retries run out.
func TestRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, stop := range []bool{true, false} {
		t.Run(fmt.Sprint("StopOnRefused=", stop), func(t *testing.T) {
			cfg := analytics.Config{WriteKey: "k", Endpoint: closed, BatchSize: 10,
				Retry: analytics.RetryPolicy{StopOnRefused: stop, MaxAttempts: 2, BaseDelay: time.Millisecond}}
			var reported atomic.Int32
			sum := run(t, genLines(1000), Options{Client: cfg, OnLineError: func(*LineError) { reported.Add(1) }})
			if !errors.Is(sum.Fatal, ErrNoServer) || !analytics.IsRefused(sum.Fatal) || sum.Failed != 0 || sum.Unsent == 0 || reported.Load() != 0 {
				t.Errorf("Fatal %v, %d lines reported, summary %+v", sum.Fatal, reported.Load(), sum)
			}
		})
	}
}

// Other refusals fail their batch only; the run goes on.
func TestBadRequestIsNotFatal(t *testing.T) {
	srv := newCollector(t, func(_ []int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(400) })
	cfg := clientConfig(srv)
	cfg.BatchSize = 10
	sum := run(t, genLines(100), Options{Client: cfg})
	if sum.Fatal != nil || sum.Failed != 100 {
		t.Errorf("summary %+v", sum)
	}
}

// A run the key stops after some batches resumes where it stopped: the
// two runs send every line once.
func TestResumeAfterWrongKey(t *testing.T) {
	const n = 1000
	in := genLines(n)
	var requests atomic.Int32
	first := newCollector(t, func(_ []int, w http.ResponseWriter, _ *http.Request) {
		if requests.Add(1) > 3 {
			w.WriteHeader(401)
		}
	})
	cfg := clientConfig(first)
	cfg.BatchSize = 10
	sum := run(t, in, Options{Client: cfg})
	_, accepted1 := first.got()
	if !errors.Is(sum.Fatal, ErrUnauthorized) || sum.Accepted != int64(len(accepted1)) || sum.LastAccepted != (Position{"in", sum.Accepted}) {
		t.Fatalf("summary %+v, %d accepted", sum, len(accepted1))
	}

	second := newCollector(t, nil)
	cfg.Endpoint = second.srv.URL
	sum2 := run(t, in, Options{Client: cfg, Resume: sum.LastAccepted})
	_, accepted2 := second.got()
	all := append(accepted1, accepted2...)
	slices.Sort(all)
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("lines over both runs (-want +got):\n%s", diff)
	}
	if sum2.Fatal != nil || sum2.Skipped != sum.LastAccepted.Line || sum2.Lines != n || sum2.Accepted != n-sum2.Skipped || sum2.LastAccepted != (Position{"in", n}) {
		t.Errorf("resumed summary %+v", sum2)
	}
}

// inputsOf makes named inputs of n numbered lines each (the line numbers
// run on across them) and records which were opened.
func inputsOf(t *testing.T, opened *[]string, names []string, n int) []Input {
	t.Helper()
	all := strings.SplitAfter(genLines(n*len(names)), "\n")
	var out []Input
	for i, name := range names {
		body := strings.Join(all[i*n:(i+1)*n], "")
		out = append(out, Input{Name: name, Size: int64(len(body)), Open: func() (io.ReadCloser, error) {
			*opened = append(*opened, name)
			return io.NopCloser(strings.NewReader(body)), nil
		}})
	}
	return out
}

// Skip counts lines across the inputs as one stream; Resume skips the
// inputs before its own unopened. Skipped lines are not parsed (a bad one
// is not reported), are counted, and are settled for LastAccepted.
func TestSkipAndResume(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantSent   []int
		wantOpened []string
		wantLast   Position
	}{
		{"skip within the first", Options{Skip: 3}, []int{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, []string{"a", "b", "c"}, Position{"c", 5}},
		{"skip across inputs", Options{Skip: 7}, []int{8, 9, 10, 11, 12, 13, 14, 15}, []string{"a", "b", "c"}, Position{"c", 5}},
		{"skip everything", Options{Skip: 99}, nil, []string{"a", "b", "c"}, Position{"c", 5}},
		{"resume in the middle", Options{Resume: Position{"b", 2}}, []int{8, 9, 10, 11, 12, 13, 14, 15}, []string{"b", "c"}, Position{"c", 5}},
		{"resume at an input's end", Options{Resume: Position{"b", 5}}, []int{11, 12, 13, 14, 15}, []string{"b", "c"}, Position{"c", 5}},
		{"resume past an input's end", Options{Resume: Position{"c", 9}}, nil, []string{"c"}, Position{"c", 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newCollector(t, nil)
			var opened []string
			inputs := inputsOf(t, &opened, []string{"a", "b", "c"}, 5)
			opts := tt.opts
			opts.Client = clientConfig(srv)
			opts.OnLineError = func(e *LineError) { t.Errorf("line error %v", e) }
			im, err := New(inputs, opts)
			if err != nil {
				t.Fatal(err)
			}
			sum := im.Run(context.Background())
			_, sent := srv.got()
			slices.Sort(sent)
			if diff := cmp.Diff(tt.wantSent, sent); diff != "" {
				t.Errorf("sent (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOpened, opened); diff != "" {
				t.Errorf("opened (-want +got):\n%s", diff)
			}
			skipped := sum.Lines - int64(len(sent))
			if sum.Accepted != int64(len(sent)) || sum.Skipped != skipped || sum.LastAccepted != tt.wantLast {
				t.Errorf("summary %+v", sum)
			}
		})
	}
}

// Skipped lines are not parsed: bad or blank, they count as skipped only.
func TestSkippedLinesNotParsed(t *testing.T) {
	srv := newCollector(t, nil)
	in := "not json\n\n" + genLines(3)
	sum := run(t, in, Options{Client: clientConfig(srv), Skip: 3, OnLineError: func(e *LineError) { t.Errorf("line error %v", e) }})
	_, sent := srv.got()
	if diff := cmp.Diff([]int{2, 3}, sent); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	if sum.Lines != 5 || sum.Skipped != 3 || sum.Blank != 0 || sum.Rejected != 0 || sum.LastAccepted != (Position{"in", 5}) {
		t.Errorf("summary %+v", sum)
	}
}

func TestSkipResumeErrors(t *testing.T) {
	inputs := []Input{Stream("a", strings.NewReader("")), Stream("b", strings.NewReader("")), Stream("a", strings.NewReader(""))}
	cfg := analytics.Config{WriteKey: "k"}
	for _, tt := range []struct {
		opts Options
		want string
	}{
		{Options{Skip: -1}, "importer: Skip must not be negative"},
		{Options{Skip: 1, Resume: Position{"b", 1}}, "importer: Skip and Resume exclude each other"},
		{Options{Resume: Position{"c", 1}}, `importer: Resume input "c" is not among the inputs`},
		{Options{Resume: Position{"a", 1}}, `importer: Resume input "a" is given more than once`},
		{Options{Resume: Position{"b", 0}}, "importer: Resume line 0: lines count from 1"},
	} {
		tt.opts.Client = cfg
		if _, err := New(inputs, tt.opts); err == nil || err.Error() != tt.want {
			t.Errorf("%+v: error %v, want %s", tt.opts, err, tt.want)
		}
	}
}

// While a run goes on, no summary shows more lines settled than read, even
// with a worker held mid-chunk by a full queue while batches complete.
func TestSummarySettledWithinRead(t *testing.T) {
	srv := newCollector(t, nil)
	cfg := clientConfig(srv)
	cfg.BatchSize, cfg.MaxQueueSize = 10, 20
	in := strings.Replace(genLines(3000), "\n", "\n\n# a note\n", 100) // blank lines are settled at once
	im, err := New([]Input{Stream("in", strings.NewReader(in))}, Options{Client: cfg, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Summary)
	go func() { done <- im.Run(context.Background()) }()
	samples := 0
	for {
		select {
		case sum := <-done:
			if sum.Accepted != 3000 || sum.Blank != 200 || sum.Lines != 3200 || samples == 0 {
				t.Errorf("final %+v after %d samples", sum, samples)
			}
			return
		default:
		}
		runtime.Gosched() // sample often, but leave the run its CPU
		sum := im.Summary()
		samples++
		if settled := sum.Accepted + sum.Rejected + sum.Failed + sum.Unsent + sum.Blank + sum.Skipped; settled > sum.Lines {
			t.Fatalf("%d lines settled of %d read: %+v", settled, sum.Lines, sum)
		}
	}
}

// A FILE that cannot be read says so in words, at New's caller.
func TestFileUnreadable(t *testing.T) {
	dir := t.TempDir()
	for path, want := range map[string]string{
		dir:                  "cannot read " + dir + ": is a directory",
		dir + "/none.ndjson": "cannot read " + dir + "/none.ndjson: no such file or directory",
	} {
		_, err := File(path)
		var re *ReadError
		if !errors.As(err, &re) || err.Error() != want {
			t.Errorf("File(%s) = %v, want %s", path, err, want)
		}
	}
}
