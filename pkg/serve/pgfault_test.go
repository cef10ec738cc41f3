package serve_test

import (
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/faultproxy"
	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// The fault tests' store deadline: the default at full size, where the
// figures they log are the ones the README gives; a second under -race,
// where the same bounds hold and the waits are a fifth as long.
var faultStoreTimeout = testsize.Pick(store.CallTimeout, time.Second)

// Bounds of TestPostgresFault, each well above what a run measures (they
// are logged): a request answers within the store deadline and, queued
// behind a group that started late, at most as long again; the probe
// finds a stopped server at once and a cut link within its 2 s period and
// the deadline; after the heal it probes every second.
var (
	faultAnswerBound  = 2*faultStoreTimeout + 3*time.Second
	faultHealthBound  = 2*time.Second + faultStoreTimeout + 3*time.Second
	faultRecoverBound = 5 * time.Second
	// faultLeaseTTL is the lease of the test's node: longer than the
	// fault, as the default 2 minutes is longer than a restart, so that a
	// delivery whose outcome was on its way to the store when the link
	// went is not leased again before that outcome arrives. A request
	// whose commit's answer the cut swallowed is answered 503; its retry
	// is skipped as a repeat, and its deliveries, created leased to the
	// node for a fresh send that never started, go out once that lease
	// runs out.
	faultLeaseTTL = 3 * faultStoreTimeout
)

// TestPostgresFault puts a TCP proxy between serve and PostgreSQL while
// clients send events, and faults the link: Refuse stands for a stopped
// or restarting server (open connections reset, new ones refused),
// Blackhole for a cut link (nothing answers). During the fault the
// collection API answers 503 with Retry-After within a bounded time,
// /healthz and /readyz answer 503 with the reason and /livez 200; after
// the heal /healthz answers 200 and ingest 200 within seconds, and every
// acknowledged message is delivered. Timings and duplicates are logged.
func TestPostgresFault(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		mode faultproxy.Mode
	}{{"stopped", faultproxy.Refuse}, {"cut", faultproxy.Blackhole}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			dbURL, proxy := faultproxy.InFront(t, pgtest.URL(t))
			pgFault(t, dbURL, func() { proxy.SetMode(mode.mode) }, func() { proxy.SetMode(faultproxy.Pass) })
		})
	}
}

// pgFault runs serve on the database at dbURL with clients sending events,
// calls fault, checks and times the answers and health during it, calls
// heal, and times the recovery; see TestPostgresFault.
func pgFault(t *testing.T, dbURL string, fault, heal func()) {
	var logs processLog
	h, rcv := runFaulted(t, dbURL, &logs)

	c := newFaultClients(h.url, 4)
	defer c.stop()
	waitFor(t, "events acknowledged before the fault", func() bool { return c.acks() >= 20 })

	faulted := time.Now()
	fault()
	waitFor(t, "/healthz 503", func() bool { code, _ := getz(h.url + "/healthz"); return code == 503 })
	healthDown := time.Since(faulted)
	waitFor(t, "a 503 from the collection API", func() bool { return c.first503(faulted) > 0 })
	code, body := getz(h.url + "/healthz")
	if code != 503 || !strings.Contains(body, `"status":"unavailable"`) || !strings.Contains(body, `"store":"store: unavailable`) {
		t.Errorf("/healthz during the fault: %d %s", code, body)
	}
	if code, rbody := getz(h.url + "/readyz"); code != 503 || !strings.Contains(rbody, `"status":"unavailable"`) {
		t.Errorf("/readyz during the fault: %d %s", code, rbody)
	}
	// A scrape answers at once, without the queue gauges it cannot read
	// (their query would hold it for 5 s on a cut link).
	scrape := time.Now()
	if _, m := getz(h.url + "/metrics"); !strings.Contains(m, "\nevfwd_store_up 0\n") {
		t.Errorf("/metrics during the fault has no evfwd_store_up 0:\n%s", m)
	} else if strings.Contains(m, "evfwd_queue_depth") {
		t.Errorf("/metrics during the fault has queue gauges it cannot have read:\n%s", m)
	}
	if took := time.Since(scrape); took > faultStoreTimeout {
		t.Errorf("/metrics during the fault took %v, want under %v", took, faultStoreTimeout)
	}
	if code, lbody := getz(h.url + "/livez"); code != 200 {
		t.Errorf("/livez during the fault: %d %s, want 200", code, lbody)
	}
	// Long enough for requests sent during the fault to meet their deadline.
	time.Sleep(faultStoreTimeout + time.Second)

	heal()
	healed := time.Now()
	waitFor(t, "/healthz 200 after the heal", func() bool { code, _ := getz(h.url + "/healthz"); return code == 200 })
	healthUp := time.Since(healed)
	if _, m := getz(h.url + "/metrics"); !strings.Contains(m, "\nevfwd_store_up 1\n") {
		t.Errorf("/metrics after the heal has no evfwd_store_up 1")
	}
	waitFor(t, "an ingest 200 after the heal", func() bool { return c.first200(healed) > 0 })
	ingestUp := c.first200(healed)
	c.stop()

	first503, slowest, n503 := c.first503(faulted), c.slowest(faulted, healed), c.count503()
	missing, dups := rcv.WaitAll(c.acked(), time.Now().Add(waitLimit))
	t.Logf("%v: first 503 %v after the fault (%d 503s, all with Retry-After: %v), slowest answer during it %v; "+
		"/healthz 503 after %v; after the heal /healthz 200 in %v, ingest 200 in %v; %d acknowledged, %d missing, %d duplicates",
		t.Name(), first503.Round(time.Millisecond), n503, c.retryAfterOK(), slowest.Round(time.Millisecond), healthDown.Round(time.Millisecond),
		healthUp.Round(time.Millisecond), ingestUp.Round(time.Millisecond), len(c.acked()), missing, dups)
	switch {
	case first503 > faultAnswerBound, slowest > faultAnswerBound:
		t.Errorf("answers during the fault took up to %v (first 503 after %v), want under %v", slowest, first503, faultAnswerBound)
	case healthDown > faultHealthBound:
		t.Errorf("/healthz said 503 only %v after the fault, want under %v", healthDown, faultHealthBound)
	case healthUp > faultRecoverBound, ingestUp > faultRecoverBound:
		t.Errorf("after the heal: /healthz 200 in %v, ingest 200 in %v, want under %v", healthUp, ingestUp, faultRecoverBound)
	case !c.retryAfterOK():
		t.Error("a 503 came without Retry-After")
	case missing > 0:
		t.Errorf("%d acknowledged messages never delivered", missing)
	}
	for _, line := range []string{"store unreachable: leasing paused", "store reachable again: leasing resumed"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("no log line %q in:\n%s", line, logs.String())
		}
	}
	if t.Failed() {
		t.Log(logs.String())
	}
}

// runFaulted runs serve as the fault tests do, on the database at dbURL:
// one source forwarding to the receiver it returns, the fault tests' lease
// and store deadline, its log in logs.
func runFaulted(t *testing.T, dbURL string, logs *processLog) (*harness, *webhooktest.IDCounter) {
	rcv := newIDCounter(t)
	h := run(t, serve.Config{
		Addr: "127.0.0.1:0", Store: dbURL,
		Sources: []serve.Source{{Name: "web", WriteKey: "wk_web", Webhooks: serve.Webhooks{Enabled: true,
			Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: rcv.URL}}}}}},
	}, serve.Options{Poll: 50 * time.Millisecond, LeaseTTL: faultLeaseTTL, StoreTimeout: faultStoreTimeout,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return h, rcv
}

func getz(u string) (int, string) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// faultClients send track events one at a time each, as a library does:
// a message not answered 200 is sent again, with its messageId, until it
// is. They record every answer.
type faultClients struct {
	url  string
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu      sync.Mutex
	answers []faultAnswer
	ok      map[string]bool
}

type faultAnswer struct {
	sent, at   time.Time
	status     int
	retryAfter string
}

func newFaultClients(url string, n int) *faultClients {
	c := &faultClients{url: url, done: make(chan struct{}), ok: map[string]bool{}}
	for g := range n {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			client := &http.Client{Timeout: time.Minute}
			for i := 0; ; i++ {
				id := fmt.Sprintf("fault-%d-%d", g, i)
				for !c.send(client, id) {
					select {
					case <-c.done:
						return
					case <-time.After(100 * time.Millisecond): // sooner than Retry-After, to time the recovery
					}
				}
				select {
				case <-c.done:
					return
				default:
				}
			}
		}()
	}
	return c
}

// send posts one event and reports whether it was acknowledged.
func (c *faultClients) send(client *http.Client, id string) bool {
	body := fmt.Sprintf(`{"userId":"u","event":"E","messageId":%q}`, id)
	req, _ := http.NewRequest(http.MethodPost, c.url+"/v1/track", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("wk_web:")))
	sent := time.Now()
	resp, err := client.Do(req)
	a := faultAnswer{sent: sent, at: time.Now()}
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers = append(c.answers, a)
	if a.status == 200 {
		c.ok[id] = true
	}
	changed.Fire()
	return a.status == 200
}

func (c *faultClients) stop() {
	c.once.Do(func() { close(c.done) })
	c.wg.Wait()
}

func (c *faultClients) acks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ok)
}

func (c *faultClients) acked() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]bool, len(c.ok))
	for id := range c.ok {
		m[id] = true
	}
	return m
}

// firstAt is how long after since the first answer with status came, or 0.
func (c *faultClients) firstAt(since time.Time, status int) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.answers {
		if a.status == status && a.at.After(since) {
			return a.at.Sub(since)
		}
	}
	return 0
}

func (c *faultClients) first503(since time.Time) time.Duration { return c.firstAt(since, 503) }

// first200 is the first acknowledgement of a request sent after since.
func (c *faultClients) first200(since time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.answers {
		if a.status == 200 && a.sent.After(since) {
			return a.at.Sub(since)
		}
	}
	return 0
}

// slowest is the longest answer to a request sent between from and to.
func (c *faultClients) slowest(from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var d time.Duration
	for _, a := range c.answers {
		if !a.sent.Before(from.Add(-time.Second)) && a.sent.Before(to) {
			d = max(d, a.at.Sub(a.sent))
		}
	}
	return d
}

func (c *faultClients) count503() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, a := range c.answers {
		if a.status == 503 {
			n++
		}
	}
	return n
}

// retryAfterOK reports whether every 503 carried Retry-After, and every
// answer had a status (none was left without one).
func (c *faultClients) retryAfterOK() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.answers {
		if a.status == 0 || a.status == 503 && a.retryAfter == "" {
			return false
		}
	}
	return true
}
