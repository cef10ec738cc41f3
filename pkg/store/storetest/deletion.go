package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/google/go-cmp/cmp"
)

// testDeletionInSteps deletes a user with more messages than one step of
// a store purges (SQLite: 1000), in two sources, beside other users: the
// counts are exact, every message of the user is emptied and every pending
// delivery cancelled, the others are untouched, and a second request for
// the user finds nothing left to do.
func testDeletionInSteps(t *testing.T, s store.Store, a store.Admin) {
	ctx := context.Background()
	// web's 1,200 take two steps of SQLite's 1,000.
	const n, kept = 1500, 300
	var batch []store.Message
	for i := range n {
		src := "web"
		if i%5 == 0 {
			src = "app"
		}
		batch = append(batch, userMsg(src, fmt.Sprint("g", i), "gone"))
		if i%(n/kept) == 0 {
			batch = append(batch, userMsg("web", fmt.Sprint("k", i), "kept"))
		}
		if len(batch) >= 500 {
			ingest(t, s, batch...)
			batch = batch[:0]
		}
	}
	ingest(t, s, batch...)
	// Some of the user's deliveries finish before the request.
	ds := lease(t, s, "w", "app", 50, t0)
	var cs []store.Completion
	for _, d := range ds {
		cs = append(cs, store.Completion{ID: d.ID, Owner: "w", Status: store.Delivered, Attempts: 1, FirstAttempt: t0})
	}
	if err := s.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	got, err := a.CreateDeletion(ctx, store.DeletionRequest{ID: "del-steps", UserID: "gone", CreatedAt: t0, Sources: []string{"app", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.DeletionSource{
		{Source: "app", Cancelled: n/5 - len(ds), Purged: n / 5},
		{Source: "web", Cancelled: n - n/5, Purged: n - n/5},
	}
	if diff := cmp.Diff(want, got.Sources); diff != "" {
		t.Errorf("deletion mismatch (-want +got):\n%s", diff)
	}
	all, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]map[store.Status]int{}
	for _, d := range all {
		user := d.UserID
		if status[user] == nil {
			status[user] = map[store.Status]int{}
		}
		status[user][d.Status]++
	}
	wantStatus := map[string]map[store.Status]int{
		"gone": {store.Cancelled: n - len(ds), store.Delivered: len(ds)},
		"kept": {store.Pending: kept},
	}
	if diff := cmp.Diff(wantStatus, status); diff != "" {
		t.Errorf("statuses by user mismatch (-want +got):\n%s", diff)
	}
	for i, d := range all {
		if d.UserID == "gone" && i%10 != 0 {
			continue // the counts above say they are all emptied; a sample shows it
		}
		full, err := s.Get(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if (len(full.Body) == 0) != (d.UserID == "gone") {
			t.Fatalf("%s/%s of %s: body %q", d.Source, d.MessageID, d.UserID, full.Body)
		}
	}
	again, err := a.CreateDeletion(ctx, store.DeletionRequest{ID: "del-again", UserID: "gone", CreatedAt: t0, Sources: []string{"app", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.DeletionSource{{Source: "app"}, {Source: "web"}}, again.Sources); diff != "" {
		t.Errorf("second deletion mismatch (-want +got):\n%s", diff)
	}
}

// testDeletionWhileIngesting runs a deletion while other clients keep
// ingesting, the user among them: every ingest succeeds, and the counts
// the request reports are what it did, whichever of the user's messages
// it covered.
func testDeletionWhileIngesting(t *testing.T, s store.Store, a store.Admin) {
	ctx := context.Background()
	var batch []store.Message
	for i := range 1500 {
		batch = append(batch, userMsg("web", fmt.Sprint("old", i), "busy"))
		if len(batch) == 500 {
			ingest(t, s, batch...)
			batch = batch[:0]
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				select {
				case <-stop:
					return
				default:
				}
				user := "other"
				if i%2 == 0 {
					user = "busy"
				}
				if err := s.Ingest(ctx, []store.Message{userMsg("web", fmt.Sprintf("new%d-%d", c, i), user)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	d, err := a.CreateDeletion(ctx, store.DeletionRequest{ID: "del-busy", UserID: "busy", CreatedAt: t0, Sources: []string{"web"}})
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("ingest during the deletion: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var purged, cancelled, old int
	for _, dl := range all {
		full, err := s.Get(ctx, dl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(full.Body) == 0 {
			if dl.UserID != "busy" {
				t.Fatalf("%s of %s emptied", dl.MessageID, dl.UserID)
			}
			purged++
		}
		if dl.Status == store.Cancelled {
			cancelled++
		}
		if dl.UserID == "busy" && len(dl.MessageID) > 3 && dl.MessageID[:3] == "old" && (len(full.Body) != 0 || dl.Status != store.Cancelled) {
			old++
		}
	}
	if old != 0 {
		t.Errorf("%d messages stored before the request were left", old)
	}
	if len(d.Sources) != 1 || d.Sources[0].Purged != purged || d.Sources[0].Cancelled != cancelled {
		t.Errorf("deletion reports %+v; the store holds %d emptied bodies and %d cancelled deliveries", d.Sources, purged, cancelled)
	}
}

// Scan counts the occurrences of marker in every file of a store, by file.
type Scan func(t *testing.T, marker []byte) map[string]int

// ScanDir is a Scan of every file under dir: an embedded store's file and
// whatever the engine keeps beside it (SQLite: -wal, -shm, a journal).
func ScanDir(dir string) Scan {
	return func(t *testing.T, marker []byte) map[string]int {
		t.Helper()
		found := map[string]int{}
		err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if n := bytes.Count(b, marker); n > 0 {
				found[filepath.Base(path)] = n
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
}

// RunScrub is the marker test of a deletion (DESIGN §5: no readable byte
// of a purged body in any file of the store). One user's messages in two
// sources carry a marker, in small bodies and in bodies over 4 KB (so they
// spill out of their pages), hundreds of them (so pages split), beside
// other users' messages that carry another; some of both are delivered
// first. Once the deletion answers, scan must find the first marker
// nowhere, and the other users' bodies must be intact. Both markers are
// looked for before the deletion too, which shows scan sees the bodies.
func RunScrub(t *testing.T, s store.Store, scan Scan) {
	ctx := context.Background()
	a, ok := s.(store.Admin)
	if !ok {
		t.Fatalf("%T does not implement store.Admin", s)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	gone := []byte(fmt.Sprintf("GONEMARK%08x", rng.Uint32()))
	kept := []byte(fmt.Sprintf("KEPTMARK%08x", rng.Uint32()))

	const small, large = 600, 60
	var batch []store.Message
	bodies := map[string][]byte{} // the kept users' bodies by source/messageId
	add := func(src, id, user string, marker []byte, size int) {
		m := userMsg(src, id, user)
		m.Body = markedBody(rng, id, user, marker, size)
		if user != "doomed" {
			bodies[src+"/"+id] = m.Body
		}
		batch = append(batch, m)
		if len(batch) == 50 {
			ingest(t, s, batch...)
			batch = batch[:0]
		}
	}
	for i := range small + large {
		size := 200 + rng.IntN(400)
		if i%11 == 10 {
			size = 4500 + rng.IntN(6000)
		}
		src := "web"
		if i%3 == 0 {
			src = "app"
		}
		add(src, fmt.Sprint("d", i), "doomed", gone, size)
		add([]string{"web", "app", "other"}[i%3], fmt.Sprint("k", i), fmt.Sprint("keeper", i%7), kept, size)
	}
	ingest(t, s, batch...)
	ds := lease(t, s, "w", "web", 150, t0)
	var cs []store.Completion
	delivered := 0
	for _, d := range ds {
		cs = append(cs, store.Completion{ID: d.ID, Owner: "w", Status: store.Delivered, Attempts: 1, FirstAttempt: t0})
		if strings.HasPrefix(d.MessageID, "d") { // the doomed user's
			delivered++
		}
	}
	if err := s.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if delivered == 0 || delivered == len(ds) {
		t.Fatalf("delivered %d of the user's messages of %d: want some of both", delivered, len(ds))
	}
	before := scan(t, gone)
	if total(before) == 0 {
		t.Fatalf("the marker is in no file before the deletion (%v): the scan does not see the bodies", before)
	}
	t.Logf("before the deletion: marker found %d times: %v", total(before), before)

	d, err := a.CreateDeletion(ctx, store.DeletionRequest{ID: "del-scrub", UserID: "doomed", CreatedAt: t0, Sources: []string{"app", "web"},
		Messages: []store.Message{DeleteMsg("web", "del-scrub", "doomed")}})
	if err != nil {
		t.Fatal(err)
	}
	n := small + large
	purged := map[string]int{"app": (n + 2) / 3, "web": n - (n+2)/3}
	for _, src := range d.Sources {
		if src.Purged != purged[src.Source] {
			t.Errorf("%s: purged %d, want %d", src.Source, src.Purged, purged[src.Source])
		}
	}
	if after := scan(t, gone); total(after) != 0 {
		t.Errorf("after the deletion answered the marker is still in %v", after)
	}
	if total(scan(t, kept)) == 0 {
		t.Errorf("the other users' marker is gone too")
	}
	all, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, dl := range all {
		want, ok := bodies[dl.Source+"/"+dl.MessageID]
		if !ok {
			continue
		}
		full, err := s.Get(ctx, dl.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(full.Body, want) {
			t.Fatalf("%s/%s of %s changed", dl.Source, dl.MessageID, dl.UserID)
		}
		delete(bodies, dl.Source+"/"+dl.MessageID)
	}
	if len(bodies) != 0 {
		t.Errorf("%d of the other users' messages are missing", len(bodies))
	}
}

// markedBody is a track message of about size bytes whose text is random
// (so no engine compresses it away) with marker every 700 bytes, so that a
// page or chunk boundary cannot hide every copy.
func markedBody(rng *rand.Rand, id, user string, marker []byte, size int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	b := fmt.Appendf(nil, `{"type":"track","event":"E","userId":%q,"messageId":%q,"properties":{"note":"`, user, id)
	for n := 0; n < size; n++ {
		if n%700 == 0 {
			b = append(b, marker...)
		}
		b = append(b, alphabet[rng.IntN(len(alphabet))])
	}
	return append(b, `"}}`...)
}

func total(found map[string]int) int {
	n := 0
	for _, c := range found {
		n += c
	}
	return n
}
