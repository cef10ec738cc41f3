package syncrun

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
)

// fake is a Driver over maps, for one key; its steps do not roll back, so
// the tests fail only outside statements.
type fake struct {
	current string
	has     bool
	runs    []Run
	lists   map[string]map[string][]byte
	outbox  map[string][]store.Message
	queue   []store.Message // moved messages, in order
	writes  []int           // messages per WriteOutbox
	pages   int             // diff pages read
}

type tx struct{}

func newFake() *fake {
	return &fake{lists: map[string]map[string][]byte{}, outbox: map[string][]store.Message{}}
}

func (f *fake) Step(ctx context.Context, fn func(ctx context.Context, tx *tx) error) error {
	return fn(ctx, &tx{})
}

func (f *fake) Current(context.Context) (string, bool, error) { return f.current, f.has, nil }
func (f *fake) Runs(context.Context) ([]Run, error)           { return slices.Clone(f.runs), nil }

func (f *fake) sorted(list string) []string {
	var users []string
	for u := range f.lists[list] {
		users = append(users, u)
	}
	sort.Strings(users)
	return users
}

func (f *fake) page(list, after string, limit int, row func(u string) Row) []Row {
	f.pages++
	var rows []Row
	for _, u := range f.sorted(list) {
		if u > after && len(rows) < limit {
			rows = append(rows, row(u))
		}
	}
	return rows
}

func (f *fake) Listed(_ context.Context, r Run, after string, limit int) ([]Row, error) {
	return f.page(r.ID, after, limit, func(u string) Row {
		return Row{User: u, Value: f.lists[r.ID][u], Prev: f.lists[r.Replaces][u], Listed: true}
	}), nil
}

func (f *fake) Replaced(_ context.Context, r Run, after string, limit int) ([]Row, error) {
	return f.page(r.Replaces, after, limit, func(u string) Row {
		_, listed := f.lists[r.ID][u]
		return Row{User: u, Value: f.lists[r.Replaces][u], Listed: listed}
	}), nil
}

func (f *fake) InsertRun(_ context.Context, _ *tx, r Run) error {
	f.runs = append(f.runs, r)
	return nil
}

func (f *fake) Stage(_ context.Context, _ *tx, list string, values []store.Value) error {
	if f.lists[list] == nil {
		f.lists[list] = map[string][]byte{}
	}
	seen := map[string]bool{}
	for _, v := range values {
		if seen[v.UserID] {
			return fmt.Errorf("user %s twice in one statement", v.UserID) // as PostgreSQL refuses
		}
		seen[v.UserID] = true
		f.lists[list][v.UserID] = v.Value
	}
	return nil
}

func (f *fake) WriteOutbox(_ context.Context, _ *tx, run string, msgs []store.Message) error {
	f.outbox[run] = append(f.outbox[run], msgs...)
	f.writes = append(f.writes, len(msgs))
	return nil
}

func (f *fake) Flip(_ context.Context, _ *tx, r Run, _ store.Sync, first bool) (bool, error) {
	if first == f.has || f.current != r.Replaces {
		return false, nil
	}
	f.current, f.has = r.ID, true
	return true, nil
}

func (f *fake) Commit(_ context.Context, _ *tx, run string) error {
	for i := range f.runs {
		if f.runs[i].ID == run {
			f.runs[i].Committed = true
		}
	}
	return nil
}

func (f *fake) MoveOutbox(_ context.Context, _ *tx, r Run, limit int) (int, error) {
	n := min(limit, len(f.outbox[r.ID]))
	f.queue = append(f.queue, f.outbox[r.ID][:n]...)
	f.outbox[r.ID] = f.outbox[r.ID][n:]
	return n, nil
}

func (f *fake) DropList(_ context.Context, _ *tx, list string, limit int) (int, error) {
	users := f.sorted(list)[:min(limit, len(f.lists[list]))]
	for _, u := range users {
		delete(f.lists[list], u)
	}
	return len(users), nil
}

func (f *fake) DropOutbox(_ context.Context, _ *tx, run string, limit int) (int, error) {
	n := min(limit, len(f.outbox[run]))
	f.outbox[run] = f.outbox[run][n:]
	return n, nil
}

func (f *fake) ForgetRun(_ context.Context, _ *tx, run string) error {
	f.runs = slices.DeleteFunc(f.runs, func(r Run) bool { return r.ID == run })
	return nil
}

// leftovers counts the rows of runs not finished and of lists not current.
func (f *fake) leftovers() int {
	n := len(f.runs)
	for _, msgs := range f.outbox {
		n += len(msgs)
	}
	for list, users := range f.lists {
		if list != f.current {
			n += len(users)
		}
	}
	return n
}

// trait is a sync whose messages name the user and value.
func trait() store.Sync {
	return store.Sync{Kind: store.KindTrait, Key: "ltv", Name: "LTV", Now: time.UnixMilli(1000), Removed: []byte("null"),
		Messages: func(u string, v []byte) []store.Message {
			return []store.Message{{MessageID: u + "=" + string(v)}}
		}}
}

func list(kv ...string) iter.Seq2[store.Value, error] {
	return func(yield func(store.Value, error) bool) {
		for i := 0; i+1 < len(kv); i += 2 {
			if !yield(store.Value{UserID: kv[i], Value: []byte(kv[i+1])}, nil) {
				return
			}
		}
	}
}

func ids(msgs []store.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.MessageID)
	}
	return out
}

func TestSyncCountsAndOrders(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	cfg := Config{Sizes: Paced()}
	res, err := Sync(ctx, f, cfg, trait(), list("a", "1", "b", "2", "c", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.SyncResult{First: true, Added: 3, Messages: 3}); *res != want {
		t.Errorf("first sync = %+v, want %+v", *res, want)
	}
	f.queue = nil
	// A user listed twice takes the last value (d: 5, not 9).
	res, err = Sync(ctx, f, cfg, trait(), list("d", "9", "c", "4", "b", "2", "d", "5"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.SyncResult{Added: 1, Changed: 1, Unchanged: 1, Removed: 1, Messages: 3}); *res != want {
		t.Errorf("second sync = %+v, want %+v", *res, want)
	}
	// The listed users' changes in user id order, then the users gone.
	if got, want := ids(f.queue), []string{"c=4", "d=5", "a=null"}; !slices.Equal(got, want) {
		t.Errorf("messages %v, want %v", got, want)
	}
	if n := f.leftovers(); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

func TestSyncPages(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	n := 2*syncPage + 1
	var kv []string
	for i := range n {
		kv = append(kv, fmt.Sprintf("u%05d", i), "true")
	}
	res, err := Sync(ctx, f, Config{Sizes: Fixed()}, trait(), list(kv...))
	if err != nil {
		t.Fatal(err)
	}
	if res.Added != n || res.Messages != n || len(f.queue) != n {
		t.Fatalf("%+v, %d queued; want %d added and queued", *res, len(f.queue), n)
	}
	if !slices.IsSortedFunc(f.queue, func(a, b store.Message) int { return strings.Compare(a.MessageID, b.MessageID) }) {
		t.Error("messages not in user id order")
	}
	if f.pages != 4 { // three full or partial pages and the empty one
		t.Errorf("%d pages read, want 4", f.pages)
	}
	for _, w := range f.writes {
		if w > Fixed().outbox.most {
			t.Errorf("an outbox write of %d messages", w)
		}
	}
}

func TestSyncFailureBeforeFlip(t *testing.T) {
	ctx := context.Background()
	bad := errors.New("bad line")
	failing := func(yield func(store.Value, error) bool) {
		for v := range list("a", "1", "b", "2") {
			if !yield(v, nil) {
				return
			}
		}
		yield(store.Value{}, bad)
	}
	f := newFake()
	if _, err := Sync(ctx, f, Config{Sizes: Paced()}, trait(), failing); !errors.Is(err, bad) {
		t.Fatalf("Sync = %v, want %v", err, bad)
	}
	if n := f.leftovers(); n != 0 || f.has {
		t.Errorf("a failed sync left %d rows (current list: %v)", n, f.has)
	}
	// Stopped by the hook: what a crash leaves, which Recover drops.
	stop := errors.New("stop")
	hook := func(step string) error {
		if step == synchook.Diffed {
			return stop
		}
		return nil
	}
	if _, err := Sync(ctx, f, Config{Sizes: Paced(), Hook: hook}, trait(), list("a", "1")); !errors.Is(err, stop) {
		t.Fatalf("Sync = %v, want %v", err, stop)
	}
	if f.leftovers() == 0 || f.has {
		t.Fatalf("a stop at %s left nothing or flipped", synchook.Diffed)
	}
	if err := Recover(ctx, f, Paced()); err != nil {
		t.Fatal(err)
	}
	if n := f.leftovers(); n != 0 || len(f.queue) != 0 {
		t.Errorf("after recovery: %d rows left, %d queued", n, len(f.queue))
	}
}

func TestSyncRecoversCommitted(t *testing.T) {
	ctx := context.Background()
	f := newFake()
	if _, err := Sync(ctx, f, Config{Sizes: Paced()}, trait(), list("a", "1", "b", "2")); err != nil {
		t.Fatal(err)
	}
	f.queue = nil
	stop := errors.New("stop")
	var steps []string
	hook := func(step string) error {
		steps = append(steps, step)
		if step == synchook.Flipped {
			return stop
		}
		return nil
	}
	if _, err := Sync(ctx, f, Config{Sizes: Paced(), Hook: hook}, trait(), list("b", "3")); !errors.Is(err, stop) {
		t.Fatalf("Sync = %v, want %v", err, stop)
	}
	if want := []string{synchook.Staged, synchook.Diffed, synchook.Flipped}; !slices.Equal(steps, want) {
		t.Errorf("hook steps %v, want %v", steps, want)
	}
	if len(f.queue) != 0 || len(f.runs) != 1 || !f.runs[0].Committed {
		t.Fatalf("stopped after the flip: %d queued, runs %+v", len(f.queue), f.runs)
	}
	// The next sync of the key finishes it first.
	res, err := Sync(ctx, f, Config{Sizes: Paced()}, trait(), list("b", "3"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.SyncResult{Unchanged: 1}); *res != want {
		t.Errorf("next sync = %+v, want %+v", *res, want)
	}
	if got, want := ids(f.queue), []string{"b=3", "a=null"}; !slices.Equal(got, want) {
		t.Errorf("recovered messages %v, want %v", got, want)
	}
	if n := f.leftovers(); n != 0 {
		t.Errorf("%d rows left", n)
	}
}

func TestLastValues(t *testing.T) {
	in := []store.Value{{UserID: "a", Value: []byte("1")}, {UserID: "b"}, {UserID: "a", Value: []byte("2")}}
	got := lastValues(in)
	if len(got) != 2 || got[0].UserID != "b" || string(got[1].Value) != "2" {
		t.Errorf("lastValues = %+v", got)
	}
}
