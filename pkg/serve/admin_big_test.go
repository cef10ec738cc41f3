package serve_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/internal/webhooktest"
	"github.com/evfwd/evfwd/pkg/admin"
)

// heapPeak samples the live heap until stop is called and returns the
// highest value seen above the level at the start.
func heapPeak() (stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
				peak.Store(ms.HeapInuse - base)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// members streams an NDJSON list of n users, from first, through a pipe:
// the client never holds the list either.
func members(first, n int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		b := make([]byte, 0, 64<<10)
		for i := first; i < first+n; i++ {
			b = fmt.Appendf(b, "\"user_%07d\"\n", i)
			if len(b) > 60<<10 {
				pw.Write(b)
				b = b[:0]
			}
		}
		pw.Write(b)
		pw.Close()
	}()
	return pr
}

// TestAudienceSync100k syncs 100,000 members through the admin API, then a
// list with 1,000 leaving and 1,000 joining, and logs time and peak heap
// (of the whole test process: server, store and client). Under -race,
// 1,500 members and 500 each way.
func TestAudienceSync100k(t *testing.T) {
	if testing.Short() {
		t.Skip("large sync")
	}
	// At full size it runs alone, as the heap figure it logs is the whole
	// process's; scaled down, that figure is not the one to report.
	if !testsize.Full() {
		t.Parallel()
	}
	// The forwarder delivers to web's hook meanwhile, as in production;
	// its work is part of the process's heap figure.
	web, app := newHook(t), newHook(t)
	h, adm := startAdmin(t, webhooktest.NewClock(t0), adminToken, web, app)
	ctx := context.Background()
	// Under -race, 600 members: the counts of the three steps (200 out
	// and 200 in leave 400 unchanged) show the same; the time and heap
	// figures to report come from a run at full size.
	n, k := testsize.Pick(100_000, 600), testsize.Pick(1000, 200)
	for _, step := range []struct {
		what        string
		first       int
		want        admin.SyncReport
		wantMessage int
	}{
		{"first sync", 0, admin.SyncReport{First: true, Added: n}, n},
		{fmt.Sprintf("%d out, %d in", k, k), k, admin.SyncReport{Added: k, Removed: k, Unchanged: n - k}, 2 * k},
		{"unchanged", k, admin.SyncReport{Unchanged: n}, 0},
	} {
		stop := heapPeak()
		start := time.Now()
		rep, err := adm.Sync(ctx, "audience", "Big Audience", []string{"web"}, members(step.first, n))
		took := time.Since(start)
		peak := stop()
		if err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if rep.First != step.want.First || rep.Added != step.want.Added || rep.Removed != step.want.Removed ||
			rep.Unchanged != step.want.Unchanged || rep.Messages != step.wantMessage {
			t.Errorf("%s: %+v, want %+v and %d messages", step.what, rep, step.want, step.wantMessage)
		}
		t.Logf("%d-member audience sync, %-16s %6.2fs (server %5dms), peak heap +%.1f MiB, %d identify messages",
			n, step.what+":", took.Seconds(), rep.Millis, float64(peak)/(1<<20), rep.Messages)
	}
	if ds, err := h.srv.Store().Counts(ctx); err != nil {
		t.Fatal(err)
	} else {
		var total int64
		for _, c := range ds {
			total += c.N
		}
		if total != int64(n+2*k) {
			t.Errorf("%d deliveries, want %d", total, n+2*k)
		}
	}
}
