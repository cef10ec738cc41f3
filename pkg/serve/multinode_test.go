package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestMultiNodeSharesQueue runs three `evfwd serve` processes on one
// PostgreSQL database behind a round-robin balancer, sends 100,000 events
// (3,000 under -race) through the batching client, kills one node with
// SIGKILL half-way, and checks that every messageId answered 200 reaches
// the receiver and that the surviving nodes share the deliveries. The
// split per node and the duplicates are reported.
func TestMultiNodeSharesQueue(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-node test: runs without -short")
	}
	dbURL := pgtest.URL(t)
	const nodes, victim = 3, 1
	// Under -race, 3,000 events: the victim still dies with requests and
	// deliveries in flight (at half), and the survivors' shares are still
	// about a thousand deliveries or more each (20 of 20 runs under load).
	events := testsize.Pick(100_000, 3_000)
	const leaseTTL = 5 * time.Second
	dir := t.TempDir()
	bin := buildEvfwd(t)
	rcv := newIDCounter(t)

	cfg := filepath.Join(dir, "evfwd.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`sources:
  - name: multi
    write_key: wk_multi
    webhooks:
      enabled: true
      shared_secret: s
      endpoints:
        - url: %s
`, rcv.URL)), 0o600)

	type node struct {
		cmd  *exec.Cmd
		addr string
		logs processLog
	}
	ns := make([]*node, nodes)
	for i := range ns {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		n := &node{addr: ln.Addr().String()}
		ln.Close()
		n.cmd = exec.Command(bin, "serve", "--config", cfg, "--addr", n.addr, "--log-level", "info",
			"--lease-ttl", leaseTTL.String())
		n.cmd.Stderr = &n.logs
		n.cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir, "EVFWD_STORE="+dbURL)
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ns[i] = n
	}
	defer func() {
		for _, n := range ns {
			n.cmd.Process.Kill()
			n.cmd.Wait()
		}
	}()
	// All three start (and migrate) at once.
	for _, n := range ns {
		n.logs.waitServing(t, 1, 20*time.Second)
	}

	// The balancer sends each request to the next node and, when a node
	// does not answer, on to the one after it, as a load balancer with
	// retries on connection errors does.
	var next atomic.Uint64
	var dead atomic.Bool
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		start := int(next.Add(1))
		for k := range nodes {
			i := (start + k) % nodes
			if i == victim && dead.Load() {
				continue
			}
			req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+ns[i].addr+r.URL.Path, bytes.NewReader(body))
			req.Header = r.Header.Clone()
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				continue
			}
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			io.Copy(w, resp.Body)
			resp.Body.Close()
			return
		}
		http.Error(w, "no node answered", http.StatusBadGateway)
	}))
	defer lb.Close()

	var ackMu sync.Mutex
	acked := map[string]bool{}
	half := make(chan struct{}) // closed once half the events are acknowledged
	const clients = 4
	var sending sync.WaitGroup
	for c := range clients {
		client, err := analytics.New(analytics.Config{
			WriteKey: "wk_multi", Endpoint: lb.URL, MaxQueueSize: events,
			Retry: analytics.RetryPolicy{MaxAttempts: 100, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
			OnBatch: func(b analytics.BatchResult) {
				if b.Accepted() {
					ackMu.Lock()
					n := len(acked)
					for _, id := range b.MessageIds {
						acked[id] = true
					}
					if n < events/2 && len(acked) >= events/2 {
						close(half)
					}
					ackMu.Unlock()
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		sending.Add(1)
		go func() {
			defer sending.Done()
			for i := c; i < events; i += clients {
				if err := client.Track(message.Track{UserId: fmt.Sprintf("u%d", i%100), Event: "Multi Node", Properties: map[string]any{"i": i}}); err != nil {
					t.Errorf("Track: %v", err)
					return
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			client.Close(ctx)
		}()
	}

	// Kill the victim once half the events are acknowledged, with its
	// requests and deliveries in flight.
	sent := make(chan struct{})
	go func() { sending.Wait(); close(sent) }()
	select {
	case <-half:
	case <-sent:
		t.Fatalf("the clients finished with fewer than half of %d events acknowledged", events)
	}
	ns[victim].cmd.Process.Signal(syscall.SIGKILL)
	ns[victim].cmd.Wait()
	dead.Store(true)
	killedAt := time.Now()
	sending.Wait()

	ackMu.Lock()
	nAcked := len(acked)
	ackMu.Unlock()
	missing, dups := rcv.WaitAll(acked, time.Now().Add(2*time.Minute))
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged messages never reached the receiver\nsurvivor logs:\n%s\n%s",
			missing, nAcked, ns[0].logs.String(), ns[2].logs.String())
	}
	t.Logf("%d events, %d acknowledged, all delivered %.1fs after the SIGKILL; %d duplicate deliveries",
		events, nAcked, time.Since(killedAt).Seconds(), dups)
	if nAcked < events*9/10 {
		t.Errorf("only %d of %d events acknowledged", nAcked, events)
	}

	// The split: deliveries recorded per node (attempts name their owner,
	// host-pid-random).
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT owner, count(*) FROM attempts WHERE status BETWEEN 200 AND 299 GROUP BY owner`)
	if err != nil {
		t.Fatal(err)
	}
	split := make([]int64, nodes)
	var total int64
	for rows.Next() {
		var owner string
		var n int64
		if err := rows.Scan(&owner, &n); err != nil {
			t.Fatal(err)
		}
		for i, nd := range ns {
			if strings.Contains(owner, fmt.Sprintf("-%d-", nd.cmd.Process.Pid)) {
				split[i] += n
			}
		}
		total += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var report []string
	for i, n := range split {
		role := "survivor"
		if i == victim {
			role = "killed"
		}
		report = append(report, fmt.Sprintf("node %d (%s): %d (%.1f%%)", i, role, n, 100*float64(n)/float64(total)))
	}
	t.Logf("deliveries recorded per node: %s", strings.Join(report, ", "))
	for i, n := range split {
		if i != victim && n < total/20 {
			t.Errorf("surviving node %d recorded only %d of %d deliveries: not spread", i, n, total)
		}
	}
}
