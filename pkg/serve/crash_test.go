package serve_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/forwarder"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
)

// TestCrashLosesNoAcknowledgedMessage runs `evfwd serve` as a subprocess,
// sends 50,000 events (5,000 under -race) through the batching client while killing the server
// with SIGKILL at random moments and restarting it, and checks that every
// messageId answered 200 reaches the receiver, and that no more went out
// twice than the kills' slots allow. On SQLite a restart takes back every
// lease at once; on PostgreSQL (when EVFWD_TEST_POSTGRES is set) the dead
// process's leases run out first, after a --lease-ttl of 3 s here.
func TestCrashLosesNoAcknowledgedMessage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test: runs without -short")
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		crashLoop(t, func(dir string) string { return "sqlite://" + filepath.Join(dir, "evfwd.db") }, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.URL(t)
		crashLoop(t, func(string) string { return url }, []string{"--lease-ttl", "3s"})
	})
}

// crashLoop is TestCrashLosesNoAcknowledgedMessage on the store that
// storeURL names, serve run with flags besides.
func crashLoop(t *testing.T, storeURL func(dir string) string, flags []string) {
	// Under -race, 5,000 events, killed every 100-500 ms rather than every
	// 200-1000: the client sends them for over a second, long enough for
	// several kills at random moments (checked below).
	events := testsize.Pick(50_000, 5_000)
	killEvery := func() time.Duration {
		low := testsize.Pick(200, 100)
		return time.Duration(low+rand.IntN(4*low)) * time.Millisecond
	}
	dir := t.TempDir()
	bin := buildEvfwd(t)
	rcv := newIDCounter(t)

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "evfwd.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`addr: %s
store: %s
sources:
  - name: crash
    write_key: wk_crash
    webhooks:
      enabled: true
      shared_secret: s
      endpoints:
        - url: %s
`, addr, storeURL(dir), rcv.URL)), 0o600)

	var logs processLog
	starts := 0
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"serve", "--config", cfg, "--log-level", "info"}, flags...)...)
		cmd.Stderr = &logs
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		starts++
		logs.waitServing(t, starts, 10*time.Second)
		return cmd
	}
	proc := start()
	defer func() { proc.Process.Kill(); proc.Wait() }()

	var ackMu sync.Mutex
	acked := map[string]bool{}
	client, err := analytics.New(analytics.Config{
		WriteKey: "wk_crash", Endpoint: "http://" + addr, MaxQueueSize: events,
		Retry: analytics.RetryPolicy{MaxAttempts: 100, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
		OnBatch: func(b analytics.BatchResult) {
			if b.Accepted() {
				ackMu.Lock()
				for _, id := range b.MessageIds {
					acked[id] = true
				}
				ackMu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range events {
			if err := client.Track(message.Track{UserId: fmt.Sprintf("u%d", i%100), Event: "Crash Test", Properties: map[string]any{"i": i}}); err != nil {
				t.Errorf("Track: %v", err)
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		client.Close(ctx)
	}()

	kills := 0
	// The duplicates counted when each kill came: those that arrive
	// between two kills were re-sent after the first (a restart reclaims
	// every lease at once and sends again what was not on record).
	var dupsAt []int
loop:
	for {
		select {
		case <-sent:
			break loop
		case <-time.After(killEvery()):
			proc.Process.Signal(syscall.SIGKILL)
			proc.Wait()
			kills++
			_, dups := rcv.Tally()
			dupsAt = append(dupsAt, dups)
			proc = start()
		}
	}

	ackMu.Lock()
	nAcked := len(acked)
	ackMu.Unlock()
	missing, dups := rcv.WaitAll(acked, time.Now().Add(90*time.Second))
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged messages never reached the receiver (%d kills)\n%s", missing, nAcked, kills, logs.String())
	}
	perKill := make([]int, len(dupsAt))
	for i := range dupsAt {
		next := dups
		if i+1 < len(dupsAt) {
			next = dupsAt[i+1]
		}
		perKill[i] = next - dupsAt[i]
	}
	most := slices.Max(append(perKill, 0))
	t.Logf("%d events, %d acknowledged, %d SIGKILLs, all delivered; %d duplicate deliveries (%d before the first kill), per kill %v (at most %d)",
		events, nAcked, kills, dups, append(dupsAt, 0)[0], perKill, most)
	// What a kill can make go out twice is what the lane held: sent, its
	// outcome not yet on record; forwarder.DefaultPerSource, and half as
	// many again for the moment fresh events start arriving beside a
	// backlog. A window between two kills may also see what the one
	// before sent again late, so the bound holds for their sum. (Issue
	// 43's target is 64 a kill on average: 13-52 in 6 runs.)
	perKillBound := forwarder.DefaultPerSource * 3 / 2
	t.Logf("%.1f duplicates a kill on average", float64(dups)/float64(max(kills, 1)))
	if bound := kills * perKillBound; dups > bound {
		t.Errorf("%d kills made %d deliveries go out twice, more than the %d a lane holds each (%d)", kills, dups, perKillBound, bound)
	}
	if nAcked < events*9/10 {
		t.Errorf("only %d of %d events acknowledged", nAcked, events)
	}
	if kills == 0 {
		t.Errorf("the client sent all %d events before the first kill: nothing was tested", events)
	}
}
