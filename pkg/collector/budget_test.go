package collector_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/collector"
	"github.com/evfwd/evfwd/pkg/store"
)

// Issue 43's attack: connections that each declare a body at the batch
// limit and send its first byte, no write key needed.

// stalled is such a request's head and first byte.
var stalled = fmt.Sprintf("POST /v1/b HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{", collector.MaxBatchBytes)

// failAfter bounds a wait of a test that is going wrong; one that passes
// never waits for it.
const failAfter = 60 * time.Second

// watched serves h and tells, on reading, of each request whose body h
// starts to read (by then the collector has reserved and allocated its
// first buffer) and, on done, of each request h has answered.
type watched struct {
	h             http.Handler
	reading, done chan struct{}
}

func watch(h http.Handler, n int) *watched {
	return &watched{h: h, reading: make(chan struct{}, n), done: make(chan struct{}, n)}
}

func (wt *watched) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = &firstRead{ReadCloser: r.Body, reading: wt.reading}
	wt.h.ServeHTTP(w, r)
	wt.done <- struct{}{}
}

// wait receives n times from c.
func wait(t *testing.T, c <-chan struct{}, n int, what string) {
	t.Helper()
	limit := time.NewTimer(failAfter)
	defer limit.Stop()
	for i := range n {
		select {
		case <-c:
		case <-limit.C:
			t.Fatalf("%v passed with %d of %d requests %s", failAfter, i, n, what)
		}
	}
}

// waitReading waits for n requests to be reading their bodies, and fails
// at once when one is answered instead.
func (wt *watched) waitReading(t *testing.T, n int) {
	t.Helper()
	limit := time.NewTimer(failAfter)
	defer limit.Stop()
	for i := range n {
		select {
		case <-wt.reading:
		case <-wt.done:
			t.Fatalf("a request was answered with %d of %d reading their bodies", i, n)
		case <-limit.C:
			t.Fatalf("%v passed with %d of %d requests reading their bodies", failAfter, i, n)
		}
	}
}

type firstRead struct {
	io.ReadCloser
	once    sync.Once
	reading chan<- struct{}
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { f.reading <- struct{}{} })
	return f.ReadCloser.Read(p)
}

// stall opens n connections to srv, each with a stalled request sent.
func stall(t *testing.T, srv *httptest.Server, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, stalled); err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

// liveHeap is the Go heap's bytes in use, after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestStalledBodiesHoldLittle: 8,000 connections (1,000 under -race) that
// each declared a body of MaxBatchBytes and sent one byte of it hold
// bodyStart each of the body budget, and the Go heap grows by well under
// 64 KiB a connection, net/http's share included (it grew by their 501 KiB
// each: 4.2 GB at 8,000). Meanwhile an event from a client is stored, and
// once the connections go, every byte of the budget is free again.
func TestStalledBodiesHoldLittle(t *testing.T) {
	n := testsize.Pick(8000, 1000)
	if lim := openFiles(); lim > 0 && uint64(2*n+256) > lim {
		// Both ends of each connection are this process's.
		n = int(lim-256) / 2
		t.Logf("%d open files at most: %d connections", lim, n)
	}
	st := &memStore{}
	h := newHandler(t, st)
	wt := watch(h, n+1)
	srv := httptest.NewServer(wt)
	t.Cleanup(srv.Close) // after the connections close (cleanups run last first)

	before := liveHeap()
	conns := stall(t, srv, n)
	wt.waitReading(t, n)
	grown := int64(liveHeap()) - int64(before)
	t.Logf("%d stalled requests: the heap grew by %.1f MiB, %.1f KiB each; they hold %d bytes of the body budget",
		n, float64(grown)/(1<<20), float64(grown)/float64(n)/1024, collector.BodyBytes(h))
	if rss := vmRSS(); rss != "" {
		t.Logf("this process (both ends of every connection): %s", rss)
	}
	if got, want := collector.BodyBytes(h), int64(n*collector.BodyStart); got != want {
		t.Errorf("the requests hold %d bytes of the budget, want %d (%d each)", got, want, collector.BodyStart)
	}
	if bound := int64(n) * 64 << 10; grown > bound {
		t.Errorf("the heap grew by %d bytes, over %d (64 KiB a connection)", grown, bound)
	}

	resp, body := call{path: "/v1/track", body: `{"userId":"u","event":"During"}`, header: http.Header{"Authorization": {basic("wk_web")}}}.send(t, srv.URL)
	wait(t, wt.done, 1, "answered")
	st.mu.Lock()
	stored := len(st.msgs)
	st.mu.Unlock()
	if resp.StatusCode != 200 || stored != 1 {
		t.Fatalf("a client's event meanwhile: %d %s, %d stored", resp.StatusCode, body, stored)
	}

	for _, c := range conns {
		c.Close()
	}
	wait(t, wt.done, n, "answered once their connections closed")
	if got := collector.BodyBytes(h); got != 0 {
		t.Errorf("after every request: %d bytes of the budget held", got)
	}
}

// vmRSS is the process's resident set as Linux tells it ("" elsewhere).
func vmRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return ""
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "VmRSS:") || strings.HasPrefix(line, "VmHWM:") {
			out = append(out, strings.Join(strings.Fields(line), " "))
		}
	}
	return strings.Join(out, ", ")
}

// TestBodyBudget: once the requests in flight hold the whole body budget,
// the next request whose body does not fit is answered 503 with
// Retry-After at once, its body unread and its connection closed; the
// first such refusal is reported, the others not until half the budget
// was free again. When the requests end, their bytes are free.
func TestBodyBudget(t *testing.T) {
	var mu sync.Mutex
	var reported []int
	h, err := collector.New(collector.Config{
		Sources:    []collector.Source{{Name: "web", WriteKey: "wk_web", Destinations: []string{store.DestinationWebhooks}}},
		Store:      &memStore{},
		Now:        func() time.Time { return now },
		BodyBudget: collector.MinBodyBudget,
		OnError: func(status int, err error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, status)
			if !strings.Contains(err.Error(), fmt.Sprint(collector.MinBodyBudget, " bytes")) {
				t.Errorf("report %q does not name the budget", err)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	fit := collector.MinBodyBudget / collector.BodyStart // stalled requests the budget holds
	wt := watch(h, 4*fit)
	srv := httptest.NewServer(wt)
	t.Cleanup(srv.Close) // after the connections close (cleanups run last first)

	refused := func() {
		t.Helper()
		c := stall(t, srv, 1)[0]
		c.SetDeadline(time.Now().Add(failAfter))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !resp.Close || !strings.Contains(string(b), "server is busy, retry later") {
			t.Errorf("over the budget: %d %v %s", resp.StatusCode, resp.Header, b)
		}
		wait(t, wt.done, 1, "refused")
	}
	for round := 1; round <= 2; round++ {
		conns := stall(t, srv, fit)
		wt.waitReading(t, fit)
		refused()
		refused()
		if len(wt.reading) != 0 {
			t.Errorf("a refused request's body was read")
		}
		mu.Lock()
		if want := round; len(reported) != want {
			t.Errorf("round %d: %d refusals reported, want %d: %v", round, len(reported), want, reported)
		}
		mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
		wait(t, wt.done, fit, "answered once their connections closed")
		if got := collector.BodyBytes(h); got != 0 {
			t.Fatalf("round %d: %d bytes of the budget held after every request", round, got)
		}
	}
	resp, body := call{path: "/v1/track", body: `{"userId":"u","event":"After"}`, header: http.Header{"Authorization": {basic("wk_web")}}}.send(t, srv.URL)
	if resp.StatusCode != 200 {
		t.Errorf("once the budget is free: %d %s", resp.StatusCode, body)
	}

	if _, err := collector.New(collector.Config{Store: &memStore{}, BodyBudget: collector.MinBodyBudget - 1}); err == nil {
		t.Errorf("a budget too small for one gzipped batch was taken")
	}
}

// TestRefusedBeforeBody: a write key in the Authorization header that is
// not a source's, and an origin the header's source does not allow, are
// refused before a byte of the body is read or even sent: the answer
// comes at once, and the connection is closed rather than left to wait
// for a body nobody reads.
func TestRefusedBeforeBody(t *testing.T) {
	h, err := collector.New(collector.Config{
		Sources: []collector.Source{
			{Name: "site", WriteKey: siteKey, Kind: collector.KindWeb, AllowedOrigins: []string{pageFrom}, Destinations: []string{store.DestinationWebhooks}},
		},
		Store: &memStore{},
		Now:   func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	wt := watch(h, 16)
	srv := httptest.NewServer(wt)
	t.Cleanup(srv.Close) // after the connections close (cleanups run last first)
	for _, tt := range []struct {
		name, header string
		status       int
		inError      string
	}{
		{"unknown write key", "Authorization: " + basic("wk_nope"), 401, "unknown write key"},
		{"not Basic", "Authorization: Bearer " + siteKey, 401, "unknown write key"},
		{"refused origin", "Authorization: " + basic(siteKey) + "\r\nOrigin: https://evil.example", 403, "evil.example"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(failAfter))
			// 1,000 bytes declared, none sent: net/http would wait for up
			// to 256 KiB of a body before it answers.
			fmt.Fprintf(c, "POST /v1/t HTTP/1.1\r\nHost: x\r\n%s\r\nContent-Length: 1000\r\n\r\n", tt.header)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.inError) || !resp.Close {
				t.Errorf("%d %s (Connection: %s), want %d with %q, closed", resp.StatusCode, b, resp.Header.Get("Connection"), tt.status, tt.inError)
			}
			wait(t, wt.done, 1, "answered")
			if len(wt.reading) != 0 {
				t.Errorf("the body was read")
			}
		})
	}
}
