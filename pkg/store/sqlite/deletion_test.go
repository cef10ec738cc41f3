package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDeletionLeavesNoByte is the marker test on the SQLite file, its WAL
// and its shared-memory file.
func TestDeletionLeavesNoByte(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openAt(t, filepath.Join(dir, "evfwd.db"))
	defer s.Close()
	storetest.RunScrub(t, s, storetest.ScanDir(dir))
}

// TestDeletionLeavesNoByteAfterRestart stops the store cleanly after the
// deletion and opens it again, as in the report of issue 13.
func TestDeletionLeavesNoByteAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "evfwd.db")
	s := openAt(t, path)
	var msgs []store.Message
	for i := range 300 {
		m := storetest.Msg("web", fmt.Sprint("m", i), 0, true)
		m.UserID = "u1"
		m.Body = []byte(`{"userId":"u1","note":"MARKERMARKER ` + strings.Repeat("x", i*20) + `"}`)
		msgs = append(msgs, m)
	}
	if err := s.Ingest(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateDeletion(context.Background(), store.DeletionRequest{ID: "d", UserID: "u1", CreatedAt: t0, Sources: []string{"web"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openAt(t, path)
	s.Close()
	if found := storetest.ScanDir(dir)(t, []byte("MARKERMARKER")); len(found) != 0 {
		t.Errorf("marker found after a restart: %v", found)
	}
}

// TestDeletionFinishedOnOpen stops a deletion after its first purge step,
// as a process that dies would, and checks that the next Open finishes it
// in the background: meanwhile the request reads as not done, no lease
// takes a message it purges, and a new request is held the same way and
// finishes after it; then every message is purged, every pending delivery
// cancelled, each counted once, and the requests marked done.
func TestDeletionFinishedOnOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	s := openAt(t, path)
	s.deletionStep = 100
	var msgs []store.Message
	for i := range 450 {
		m := storetest.Msg([]string{"web", "app"}[i%2], fmt.Sprint("m", i), 0, true)
		m.UserID = []string{"u1", "u2", "u1"}[i%3]
		msgs = append(msgs, m)
	}
	if err := s.Ingest(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	r := store.DeletionRequest{ID: "del", UserID: "u1", CreatedAt: t0, Sources: []string{"app", "web"},
		Messages: []store.Message{storetest.DeleteMsg("web", "del", "u1")}}
	if err := s.recordDeletion(ctx, r); err != nil {
		t.Fatal(err)
	}
	page, err := s.deletionPage(ctx, "del", "u1", 0, 1<<62)
	if err != nil || len(page) != s.deletionStep {
		t.Fatalf("first page: %d messages, %v", len(page), err)
	}
	if err := s.purgeStep(ctx, "del", page); err != nil {
		t.Fatal(err)
	}
	// A message of the user stored after the request is not its business.
	late := storetest.Msg("web", "late", 0, true)
	late.UserID = "u1"
	if err := s.Ingest(ctx, []store.Message{late}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A tool opening the file beside serve leaves the work to serve.
	tool, err := Open(ctx, path, Options{NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	var left int
	if err := tool.read.QueryRow(`SELECT count(*) FROM deletions WHERE done_at = 0`).Scan(&left); err != nil || left != 1 {
		t.Errorf("a NoRecover Open touched the unfinished deletion: %d left, %v", left, err)
	}
	tool.Close()

	gate := make(chan struct{})
	s, err = Open(ctx, path, Options{recoveryGate: gate})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkHeld(t, s, gate)
	<-s.Recovered()
	d, err := s.Deletion(ctx, "del")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Done {
		t.Error("the deletion reads as not done once Open's work is over")
	}
	want := []store.DeletionSource{
		{Source: "app", Cancelled: 150, Purged: 150},
		{Source: "web", Notified: true, MessageID: "del", Status: store.Pending, Cancelled: 150, Purged: 150},
	}
	if diff := cmp.Diff(want, d.Sources, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Delivery" }, cmp.Ignore())); diff != "" {
		t.Errorf("finished deletion mismatch (-want +got):\n%s", diff)
	}
	var unfinished, emptied int
	if err := s.read.QueryRow(`SELECT count(*) FROM deletions WHERE done_at = 0`).Scan(&unfinished); err != nil || unfinished != 0 {
		t.Errorf("unfinished deletions after Open: %d, %v", unfinished, err)
	}
	if err := s.read.QueryRow(`SELECT count(*) FROM messages WHERE length(body) = 0`).Scan(&emptied); err != nil || emptied != 450 {
		t.Errorf("emptied bodies: %d, %v; want 450 (u1's 300 and u2's 150; not the late one)", emptied, err)
	}
}

// checkHeld looks at s, opened on TestDeletionFinishedOnOpen's file, while
// its gate holds the unfinished deletion back: the request reads as not
// done, a new request for u2 is recorded but waits for its turn, and leases
// take neither user's messages, only the late one and the notification;
// then it opens the gate and waits for the new request.
func checkHeld(t *testing.T, s *Store, gate chan struct{}) {
	t.Helper()
	ctx := context.Background()
	if d, err := s.Deletion(ctx, "del"); err != nil || d.Done {
		t.Errorf("the unfinished deletion reads as done (%v) before it is", err)
	}
	// m449, u1's in app, is past the purge's first step: not purged yet,
	// but read as it will be.
	all, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, d := range all {
		if d.MessageID != "m449" && d.MessageID != "late" {
			continue
		}
		read++
		full, err := s.Get(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if held := d.MessageID == "m449"; held != (len(full.Body) == 0) {
			t.Errorf("%s read with a body of %d bytes while u1's deletion is under way", d.MessageID, len(full.Body))
		}
	}
	if read != 2 {
		t.Fatalf("read %d of m449 and late", read)
	}
	second := make(chan error, 1)
	go func() {
		d, err := s.CreateDeletion(ctx, store.DeletionRequest{ID: "del2", UserID: "u2", CreatedAt: t0, Sources: []string{"app", "web"}})
		if err == nil && (!d.Done || d.Sources[0].Purged != 75 || d.Sources[1].Purged != 75) {
			err = fmt.Errorf("second deletion answered %+v, want done with 75 purged in each source", d)
		}
		second <- err
	}()
	// The request is held as soon as it is recorded.
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		s.held.mu.Lock()
		_, ok := s.held.by["del2"]
		s.held.mu.Unlock()
		if ok {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the second deletion was not recorded within 10s")
		}
	}
	var leased []string
	for _, src := range []string{"app", "web"} {
		ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "o", Source: src, Limit: 1000, Now: time.Now(), TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			leased = append(leased, d.MessageID)
		}
	}
	if want := []string{"del", "late"}; !slices.Equal(slices.Sorted(slices.Values(leased)), want) {
		t.Errorf("leased %v while the deletions are under way, want %v", leased, want)
	}
	select {
	case err := <-second:
		t.Fatalf("the second deletion finished before the first one's turn was over: %v", err)
	default:
	}
	close(gate)
	if err := <-second; err != nil {
		t.Error(err)
	}
}

// TestDeletionKeepsIngestMoving deletes a user with 6,000 messages, a
// tenth of them over 4 KB, in steps of 500, while another client ingests
// one message at a time, and reports the longest ingest. Each step holds
// the writer for one bounded transaction, so an ingest never waits for the
// whole deletion. Under -race, 2,000 messages in steps of 200: as many
// steps, at a third of the work.
func TestDeletionKeepsIngestMoving(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 6,000-message deletion: runs without -short")
	}
	n := testsize.Pick(6000, 2000)
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "evfwd.db"))
	defer s.Close()
	s.deletionStep = testsize.Pick(500, 200)
	big := []byte(`{"userId":"u1","note":"` + strings.Repeat("y", 6000) + `"}`)
	var msgs []store.Message
	for i := range n {
		m := storetest.Msg("web", fmt.Sprint("m", i), 0, true)
		m.UserID = "u1"
		if i%10 == 0 {
			m.Body = big
		}
		msgs = append(msgs, m)
		if len(msgs) == 1000 {
			if err := s.Ingest(ctx, msgs); err != nil {
				t.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	done := make(chan struct{})
	longest := make(chan time.Duration)
	go func() {
		var worst time.Duration
		for i := 0; ; i++ {
			select {
			case <-done:
				longest <- worst
				return
			default:
			}
			start := time.Now()
			if err := s.Ingest(ctx, []store.Message{storetest.Msg("web", fmt.Sprint("n", i), 0, true)}); err != nil {
				t.Error(err)
			}
			worst = max(worst, time.Since(start))
		}
	}()
	start := time.Now()
	d, err := s.CreateDeletion(ctx, store.DeletionRequest{ID: "d", UserID: "u1", CreatedAt: t0, Sources: []string{"web"}})
	took := time.Since(start)
	close(done)
	worst := <-longest
	if err != nil {
		t.Fatal(err)
	}
	if d.Sources[0].Purged != n {
		t.Errorf("purged %d, want %d", d.Sources[0].Purged, n)
	}
	t.Logf("deletion of %d messages: %v; longest ingest meanwhile: %v", n, took, worst)
	if worst > took/2 {
		t.Errorf("an ingest waited %v of the deletion's %v", worst, took)
	}
}
