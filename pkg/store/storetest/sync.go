package storetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
	"github.com/google/go-cmp/cmp"
)

// Reopen makes a new, empty database and returns a function that opens a
// store on it; called again after the previous store's Close, it opens the
// same database, as a restarted process would.
type Reopen func(t *testing.T) func() store.Store

// SyncStepper is what the sync cases need of a store besides store.Admin.
type SyncStepper interface {
	// SetSyncHook sets a function called between the steps of a sync with
	// the step's name (the synchook constants); an error from it stops the
	// sync at once and leaves the database as a crash there would.
	SetSyncHook(fn func(step string) error)
	// SetSyncSteps makes every step of the syncs that follow rows rows
	// (0: the store's own sizes).
	SetSyncSteps(rows int)
	// SyncValues yields the stored list of one audience or trait as one
	// consistent read.
	SyncValues(ctx context.Context, kind store.SyncKind, key string) iter.Seq2[store.Value, error]
	// SyncLeftovers counts the rows syncs in progress keep (runs, outbox
	// messages, lists no sync names); 0 when none runs.
	SyncLeftovers(ctx context.Context) (int64, error)
}

// Recoverer is a store that finishes what a stopped process left after
// its Open returns (SQLite), its readers seeing the state before or after
// that work, never a mix: Recovered is closed once it is done.
type Recoverer interface {
	Recovered() <-chan struct{}
}

// Settle waits until s, when a Recoverer, has finished what a stopped
// process left, for the checks of what that work queues or drops; the
// checks of what readers see come before it.
func Settle(t *testing.T, s store.Store) {
	t.Helper()
	r, ok := s.(Recoverer)
	if !ok {
		return
	}
	select {
	case <-r.Recovered():
	case <-time.After(time.Minute):
		t.Fatal("the work a stopped process left was not finished within a minute of Open")
	}
}

// RunSync runs the cases of a sync interrupted (as by a crash) at each of
// its steps, and of readers during a sync, against stores made by reopen,
// which must implement store.Admin and SyncStepper.
func RunSync(t *testing.T, reopen Reopen) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func() store.Store, key string)
	}{
		{"InterruptedBeforeFlipChangesNothing", testSyncInterruptedBefore},
		{"InterruptedAfterFlipDeliversAll", testSyncInterruptedAfter},
		{"NextSyncFinishesInterrupted", testSyncNextFinishes},
		{"ReadersSeeOldOrNew", testSyncReaders},
		{"FailedListLeavesNoRows", testSyncFailedLeftovers},
		{"SyncsOfOneKeyTakeTurns", testSyncTurns},
		{"MessageIDsDeduplicated", testSyncDedup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A key of its own: PostgreSQL's sync locks are per database,
			// not per schema, and an Open that finds another case's sync
			// holding the key would leave its own interrupted run alone.
			tt.fn(t, reopen(t), "ltv-"+tt.name)
		})
	}
}

// syncStore is a store opened for the sync cases, with its interfaces.
type syncStore struct {
	store.Store
	store.Admin
	SyncStepper
}

func openSync(t *testing.T, open func() store.Store) syncStore {
	t.Helper()
	s := open()
	a, ok := s.(store.Admin)
	if !ok {
		t.Fatalf("%T does not implement store.Admin", s)
	}
	st, ok := s.(SyncStepper)
	if !ok {
		t.Fatalf("%T does not implement storetest.SyncStepper", s)
	}
	st.SetSyncSteps(syncSteps)
	return syncStore{s, a, st}
}

// traitList is a trait list of users u0000…u(n-1) from first, every one
// with value.
func traitList(first, n int, value string) map[string]string {
	m := map[string]string{}
	for i := first; i < first+n; i++ {
		m[fmt.Sprintf("u%04d", i)] = value
	}
	return m
}

func values(m map[string]string) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		for _, u := range slices.Sorted(func(yield func(string) bool) {
			for u := range m {
				if !yield(u) {
					return
				}
			}
		}) {
			if !yield(store.Value{UserID: u, Value: []byte(m[u])}, nil) {
				return
			}
		}
	}
}

// stored reads a trait's stored list.
func stored(t *testing.T, s SyncStepper, key string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for v, err := range s.SyncValues(context.Background(), store.KindTrait, key) {
		if err != nil {
			t.Fatalf("SyncValues: %v", err)
		}
		out[v.UserID] = string(v.Value)
	}
	return out
}

// diffMessages is what a sync from old to new sends: "user=value" sorted.
func diffMessages(old, new map[string]string) []string {
	out := []string{}
	for u, v := range new {
		if old[u] != v {
			out = append(out, u+"="+v)
		}
	}
	for u := range old {
		if _, ok := new[u]; !ok {
			out = append(out, u+"=null")
		}
	}
	slices.Sort(out)
	return out
}

// The interrupted syncs move syncN users each way: their lists are 5N
// users, then N leaving, N joining and N changing value (3N messages).
// At full size (N = 500) that is more than one chunk of any step at the
// stores' own sizes; under -race, where the pure-Go SQLite is ten times
// slower, N = 50 with steps of syncSteps rows is as many steps of each
// kind, at a tenth of the work.
var syncN, syncSteps = testsize.Pick(500, 50), testsize.Pick(0, 20)

// syncResult is the result of a sync from before to after.
var syncResult = store.SyncResult{Added: syncN, Removed: syncN, Changed: syncN, Unchanged: 3 * syncN, Messages: 3 * syncN}

// before and after are the two lists of the interrupted syncs (syncN).
func beforeAfter() (before, after map[string]string) {
	before = traitList(0, 5*syncN, "1")
	after = traitList(syncN, 5*syncN, "1")
	for u, v := range traitList(2*syncN, syncN, "2") {
		after[u] = v
	}
	return before, after
}

// stopAt returns a hook that fails at the nth call of step.
func stopAt(step string, nth int) (hook func(string) error, stop error) {
	stop = fmt.Errorf("stopped at %s #%d", step, nth)
	var mu sync.Mutex
	seen := 0
	return func(s string) error {
		mu.Lock()
		defer mu.Unlock()
		if s == step {
			if seen++; seen == nth {
				return stop
			}
		}
		return nil
	}, stop
}

// skipSent moves after past the deliveries stored so far without reading
// their bodies: Get costs two statements each, and the first sync's
// are not what the cases check.
func skipSent(t *testing.T, s store.Store, after *int64) {
	t.Helper()
	ds, err := s.List(context.Background(), store.Filter{After: *after})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) > 0 {
		*after = ds[len(ds)-1].ID
	}
}

func leftovers(t *testing.T, s SyncStepper) int64 {
	t.Helper()
	n, err := s.SyncLeftovers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testSyncInterruptedBefore(t *testing.T, open func() store.Store, key string) {
	ctx := context.Background()
	before, after := beforeAfter()
	s := openSync(t, open)
	var n int
	var seen int64
	sy := newSync(store.KindTrait, key, &n)
	if _, err := s.Sync(ctx, sy, values(before)); err != nil {
		t.Fatal(err)
	}
	skipSent(t, s, &seen)
	for _, step := range []string{synchook.Staged, synchook.Diffed} {
		hook, stop := stopAt(step, 1)
		s.SetSyncHook(hook)
		if _, err := s.Sync(ctx, sy, values(after)); !errors.Is(err, stop) {
			t.Fatalf("sync stopped at %s = %v, want %v", step, err, stop)
		}
		s.SetSyncHook(nil)
		if got := stored(t, s, key); !cmp.Equal(before, got) {
			t.Errorf("stopped at %s: stored list changed: %d users", step, len(got))
		}
		if got := sent(t, s, &seen); len(got) != 0 {
			t.Errorf("stopped at %s: %d messages queued", step, len(got))
		}
		s.Close()
		s = openSync(t, open)
		if got := stored(t, s, key); !cmp.Equal(before, got) {
			t.Errorf("stopped at %s, reopened: stored list changed: %d users", step, len(got))
		}
		Settle(t, s.Store)
		if got := sent(t, s, &seen); len(got) != 0 {
			t.Errorf("stopped at %s, reopened: %d messages queued", step, len(got))
		}
		if n := leftovers(t, s); n != 0 {
			t.Errorf("stopped at %s, reopened: %d rows left over", step, n)
		}
	}
	defer s.Close()
	// The sync done again applies in full, as if never tried.
	got, err := s.Sync(ctx, sy, values(after))
	if err != nil {
		t.Fatal(err)
	}
	want := syncResult
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("sync after the interrupted ones mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(diffMessages(before, after), sent(t, s, &seen)); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
	if n := leftovers(t, s); n != 0 {
		t.Errorf("%d rows left over after a sync", n)
	}
}

func testSyncInterruptedAfter(t *testing.T, open func() store.Store, key string) {
	ctx := context.Background()
	before, after := beforeAfter()
	s := openSync(t, open)
	var n int
	var seen int64
	sy := newSync(store.KindTrait, key, &n)
	if _, err := s.Sync(ctx, sy, values(before)); err != nil {
		t.Fatal(err)
	}
	skipSent(t, s, &seen)
	// Back and forth between the two lists, stopped at a later step each
	// time: each restart must queue exactly that sync's messages.
	from, to := before, after
	for _, at := range []struct {
		step string
		nth  int
	}{{synchook.Flipped, 1}, {synchook.Moved, 1}, {synchook.Moved, 2}, {synchook.Dropped, 1}} {
		hook, stop := stopAt(at.step, at.nth)
		s.SetSyncHook(hook)
		if _, err := s.Sync(ctx, sy, values(to)); !errors.Is(err, stop) {
			t.Fatalf("sync stopped at %s #%d = %v, want %v", at.step, at.nth, err, stop)
		}
		s.SetSyncHook(nil)
		// Committed: readers see the new list at once.
		if got := stored(t, s, key); !cmp.Equal(to, got) {
			t.Errorf("stopped at %s #%d: stored list is not the new one (%d users)", at.step, at.nth, len(got))
		}
		s.Close()
		s = openSync(t, open)
		if got := stored(t, s, key); !cmp.Equal(to, got) {
			t.Errorf("stopped at %s #%d, reopened: stored list is not the new one (%d users)", at.step, at.nth, len(got))
		}
		Settle(t, s.Store)
		if diff := cmp.Diff(diffMessages(from, to), sent(t, s, &seen)); diff != "" {
			t.Errorf("stopped at %s #%d, reopened: messages mismatch (-want +got):\n%s", at.step, at.nth, diff)
		}
		if n := leftovers(t, s); n != 0 {
			t.Errorf("stopped at %s #%d, reopened: %d rows left over", at.step, at.nth, n)
		}
		from, to = to, from
	}
	s.Close()
}

// testSyncNextFinishes stops syncs without a restart: the next sync of the
// key drops what a stopped uncommitted one left and finishes a committed
// one (its messages all queued, before the next sync's own).
func testSyncNextFinishes(t *testing.T, open func() store.Store, key string) {
	ctx := context.Background()
	before, after := beforeAfter()
	s := openSync(t, open)
	defer s.Close()
	var n int
	var seen int64
	sy := newSync(store.KindTrait, key, &n)
	if _, err := s.Sync(ctx, sy, values(before)); err != nil {
		t.Fatal(err)
	}
	skipSent(t, s, &seen)
	hook, stop := stopAt(synchook.Diffed, 1)
	s.SetSyncHook(hook)
	if _, err := s.Sync(ctx, sy, values(after)); !errors.Is(err, stop) {
		t.Fatalf("sync stopped before the flip = %v, want %v", err, stop)
	}
	hook, stop = stopAt(synchook.Moved, 1)
	s.SetSyncHook(hook)
	if _, err := s.Sync(ctx, sy, values(after)); !errors.Is(err, stop) {
		t.Fatalf("sync stopped after the flip = %v, want %v", err, stop)
	}
	s.SetSyncHook(nil)
	got, err := s.Sync(ctx, sy, values(before))
	if err != nil {
		t.Fatal(err)
	}
	if want := syncResult; !cmp.Equal(want, *got) {
		t.Errorf("result %+v, want %+v", *got, want)
	}
	want := append(diffMessages(before, after), diffMessages(after, before)...)
	slices.Sort(want)
	if diff := cmp.Diff(want, sent(t, s, &seen)); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
	if got := stored(t, s, key); !cmp.Equal(before, got) {
		t.Errorf("stored list is not the one synced last")
	}
	if n := leftovers(t, s); n != 0 {
		t.Errorf("%d rows left over", n)
	}
}

func testSyncReaders(t *testing.T, open func() store.Store, key string) {
	ctx := context.Background()
	before, after := beforeAfter()
	s := openSync(t, open)
	defer s.Close()
	var n int
	var seen int64
	sy := newSync(store.KindTrait, key, &n)
	if _, err := s.Sync(ctx, sy, values(before)); err != nil {
		t.Fatal(err)
	}
	skipSent(t, s, &seen)

	// A reader reads the list over and over while the sync runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, mixed int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got := map[string]string{}
			for v, err := range s.SyncValues(ctx, store.KindTrait, key) {
				if err != nil {
					t.Errorf("SyncValues: %v", err)
					return
				}
				got[v.UserID] = string(v.Value)
			}
			reads++
			if !cmp.Equal(before, got) && !cmp.Equal(after, got) {
				mixed++
			}
		}
	}()
	// And at every step, the list is the old one until the flip, the new
	// one from then on; no message is queued before the flip.
	flipped := false
	var steps []string
	s.SetSyncHook(func(step string) error {
		steps = append(steps, step)
		if step == synchook.Flipped {
			flipped = true
		}
		want := before
		if flipped {
			want = after
		}
		if got := stored(t, s, key); !cmp.Equal(want, got) {
			t.Errorf("at step %s (flipped %v): stored list is neither as it was nor as it will be", step, flipped)
		}
		if !flipped {
			if got := sent(t, s, &seen); len(got) != 0 {
				t.Errorf("at step %s: %d messages queued before the flip", step, len(got))
			}
		}
		return nil
	})
	got, err := s.Sync(ctx, sy, values(after))
	s.SetSyncHook(nil)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if mixed > 0 {
		t.Errorf("%d of %d reads during the sync saw a list that was neither the old nor the new", mixed, reads)
	}
	for _, step := range []string{synchook.Staged, synchook.Diffed, synchook.Flipped, synchook.Moved, synchook.Dropped} {
		if !slices.Contains(steps, step) {
			t.Errorf("the hook was not called at step %s (called at %v)", step, steps)
		}
	}
	want := syncResult
	if diff := cmp.Diff(want, *got); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(diffMessages(before, after), sent(t, s, &seen)); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
}

func testSyncFailedLeftovers(t *testing.T, open func() store.Store, key string) {
	ctx := context.Background()
	s := openSync(t, open)
	defer s.Close()
	var n int
	sy := newSync(store.KindTrait, key, &n)
	before, _ := beforeAfter()
	if _, err := s.Sync(ctx, sy, values(before)); err != nil {
		t.Fatal(err)
	}
	bad := fmt.Errorf("line %d: bad", 6*syncN+1)
	failing := func(yield func(store.Value, error) bool) {
		for v, err := range values(traitList(0, 6*syncN, "7")) {
			if !yield(v, err) {
				return
			}
		}
		yield(store.Value{}, bad)
	}
	if _, err := s.Sync(ctx, sy, failing); !errors.Is(err, bad) {
		t.Fatalf("Sync with a failing list = %v, want %v", err, bad)
	}
	if got := stored(t, s, key); !cmp.Equal(before, got) {
		t.Errorf("a failed sync changed the stored list")
	}
	if n := leftovers(t, s); n != 0 {
		t.Errorf("a failed sync left %d rows", n)
	}
	// A cancelled one too.
	cctx, cancel := context.WithCancel(ctx)
	cancelling := func(yield func(store.Value, error) bool) {
		for v, err := range values(traitList(0, 6*syncN, "7")) {
			if v.UserID == fmt.Sprintf("u%04d", 5*syncN) {
				cancel()
			}
			if !yield(v, err) {
				return
			}
		}
	}
	if _, err := s.Sync(cctx, sy, cancelling); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync cancelled while staging = %v, want %v", err, context.Canceled)
	}
	if got := stored(t, s, key); !cmp.Equal(before, got) {
		t.Errorf("a cancelled sync changed the stored list")
	}
	if n := leftovers(t, s); n != 0 {
		t.Errorf("a cancelled sync left %d rows", n)
	}
}

func testSyncTurns(t *testing.T, open func() store.Store, key string) {
	ctx := context.Background()
	s := openSync(t, open)
	defer s.Close()
	var mu sync.Mutex
	var n int
	sy := newSync(store.KindTrait, key, &n)
	inner := sy.Messages
	sy.Messages = func(user string, value []byte) []store.Message {
		mu.Lock()
		defer mu.Unlock()
		return inner(user, value)
	}
	a, b := beforeAfter()
	var seen int64
	results := make([]*store.SyncResult, 2)
	var wg sync.WaitGroup
	for i, l := range []map[string]string{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Sync(ctx, sy, values(l))
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	first, second := a, b
	if !results[0].First {
		first, second = b, a
		results[0], results[1] = results[1], results[0]
	}
	if !results[0].First || results[1].First {
		t.Fatalf("results %+v, %+v: want one first sync", *results[0], *results[1])
	}
	if got := stored(t, s, key); !cmp.Equal(second, got) {
		t.Errorf("stored list is not the one synced last")
	}
	want := append(diffMessages(nil, first), diffMessages(first, second)...)
	slices.Sort(want)
	if diff := cmp.Diff(want, sent(t, s, &seen)); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
	if got := results[0].Messages + results[1].Messages; got != len(want) {
		t.Errorf("results count %d messages, want %d", got, len(want))
	}
}

// testSyncDedup queues sync messages as Ingest would: one whose (source,
// messageId) is already stored is skipped, and a repeat within the sync
// keeps its first occurrence, each with one delivery per destination.
func testSyncDedup(t *testing.T, open func() store.Store, key string) {
	ctx := context.Background()
	s := openSync(t, open)
	defer s.Close()
	ingest(t, s, Msg("web", "known", 0, true))
	msg := func(id, user string, value []byte, dests ...string) store.Message {
		return store.Message{Source: "web", MessageID: id, Type: "identify", UserID: user, ReceivedAt: t0,
			Body: []byte(fmt.Sprintf("%s:%s=%s", id, user, value)), Destinations: dests}
	}
	sy := store.Sync{Kind: store.KindTrait, Key: key, Name: key, Now: t0, Removed: []byte("null"),
		Messages: func(user string, value []byte) []store.Message {
			switch user {
			case "a":
				return []store.Message{msg("known", user, value, store.DestinationWebhooks)}
			case "b":
				return []store.Message{msg("twice", user, value, store.DestinationWebhooks, "other")}
			case "c":
				return []store.Message{msg("twice", user, value, store.DestinationWebhooks), msg("quiet", user, value)}
			}
			return nil
		}}
	res, err := s.Sync(ctx, sy, values(map[string]string{"a": "1", "b": "2", "c": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages != 4 {
		t.Errorf("result counts %d messages, want the 4 made", res.Messages)
	}
	got := []string{}
	ds, err := s.List(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		full, err := s.Get(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.MessageID+" "+d.Destination+" "+string(full.Body))
	}
	slices.Sort(got)
	want := []string{
		"known webhooks " + string(Msg("web", "known", 0, true).Body),
		"twice other twice:b=2",
		"twice webhooks twice:b=2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries mismatch (-want +got):\n%s", diff)
	}
	if n := leftovers(t, s); n != 0 {
		t.Errorf("%d rows left over", n)
	}
}
