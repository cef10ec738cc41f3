package sqlite_test

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/evfwd/evfwd/internal/testsize"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/internal/synchook"
	"github.com/evfwd/evfwd/pkg/store/sqlite"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

func TestSyncConformance(t *testing.T) {
	t.Parallel()
	storetest.RunSync(t, func(t *testing.T) func() store.Store {
		path := filepath.Join(t.TempDir(), "evfwd.db")
		return func() store.Store {
			s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

// killLists are the two lists TestSyncKilled syncs back and forth: 5,000
// users, then 500 leaving, 500 joining and 500 changing value (1,500
// messages: two chunks to move). Under -race, 2,000 users and 600
// messages: a sync still takes seconds there and moves in two chunks or
// more (the move pacer starts at 500 and shrinks on a slow machine), so the
// kills still land before, during and after the flip.
func killLists() [2]map[string]string {
	users := testsize.Pick(5000, 2000)
	a, b := map[string]string{}, map[string]string{}
	for i := range users {
		a[fmt.Sprintf("u%05d", i)] = "1"
		b[fmt.Sprintf("u%05d", i+users/10)] = "1"
	}
	for i := users / 2; i < users/2+users/10; i++ {
		b[fmt.Sprintf("u%05d", i)] = "2"
	}
	return [2]map[string]string{a, b}
}

// killSync syncs list to path: the work of the child process of
// TestSyncKilled. It prints each step of the sync as it reaches it, one
// line each, for the parent to aim its kills.
func killSync(path string, list map[string]string) error {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	s.SetSyncHook(func(step string) error {
		fmt.Println(stepLine + step)
		return nil
	})
	b := make([]byte, 4)
	crand.Read(b)
	run, n := hex.EncodeToString(b), 0
	sy := store.Sync{Kind: store.KindTrait, Key: "ltv", Name: "ltv", Now: time.Now(), Removed: []byte("null"),
		Messages: func(user string, value []byte) []store.Message {
			n++
			return []store.Message{{Source: "web", MessageID: fmt.Sprintf("%s-%d", run, n), Type: "identify", UserID: user,
				ReceivedAt: time.Now(), Body: []byte(user + "=" + string(value)), Destinations: []string{store.DestinationWebhooks}}}
		}}
	_, err = s.Sync(ctx, sy, func(yield func(store.Value, error) bool) {
		for _, u := range slices.Sorted(maps.Keys(list)) {
			if !yield(store.Value{UserID: u, Value: []byte(list[u])}, nil) {
				return
			}
		}
	})
	return err
}

// killAim is where TestSyncKilled kills its child: at a random moment up
// to within after the child reports step.
type killAim struct {
	step   string
	within time.Duration
}

// stepLine starts the lines in which killSync reports a step.
const stepLine = "evfwd-sync-step "

// TestSyncKilled kills a process with SIGKILL during a sync and checks,
// after each kill, that the store holds the list before or the list after,
// never a mix, and has queued the sync's messages exactly once if and only
// if it holds the list after. The kills alternate between the two sides
// of the flip: a random moment early in the diff or just after it, then
// one up to 10ms after the flip or a chunk moved or dropped; so
// that both outcomes occur in few tries, where kills at random moments of
// the whole sync mostly landed after the flip (1 of 13 before, once).
func TestSyncKilled(t *testing.T) {
	lists := killLists()
	if path := os.Getenv("EVFWD_SYNC_KILL_CHILD"); path != "" {
		list := lists[0]
		if os.Getenv("EVFWD_SYNC_KILL_LIST") == "1" {
			list = lists[1]
		}
		if err := killSync(path, list); err != nil {
			t.Fatal(err)
		}
		return
	}
	if testing.Short() {
		t.Skip("kills processes")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "evfwd.db")
	// child starts a sync to list and returns its step lines as they come.
	child := func(list int) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSyncKilled$")
		cmd.Env = append(os.Environ(), "EVFWD_SYNC_KILL_CHILD="+path, fmt.Sprintf("EVFWD_SYNC_KILL_LIST=%d", list))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, bufio.NewScanner(out)
	}
	// The first sync runs to the end.
	start := time.Now()
	first, lines := child(0)
	for lines.Scan() {
	}
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	ctx := context.Background()
	var seen int64 // deliveries up to here are checked
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := s.List(ctx, store.Filter{}); err != nil || len(ds) != len(lists[0]) {
		t.Fatalf("first sync queued %d messages (%v), want %d", len(ds), err, len(lists[0]))
	} else {
		seen = ds[len(ds)-1].ID
	}
	s.Close()
	cur, kills := 0, map[string]int{}
	// Under the race detector a sync takes seconds: fewer kills.
	tries := testsize.Pick(8, 2)
	for i := 0; i < tries || kills["old"] == 0 || kills["new"] == 0; i++ {
		if i == 20 {
			t.Fatalf("no kill left the old and the new list both in 20 tries: %v", kills)
		}
		next := 1 - cur
		cmd, lines := child(next)
		// The diff takes hundreds of milliseconds under -race, the flip a
		// few: a kill aimed before the flip comes at most 10ms into the
		// diff, or as soon as the diff is done.
		aims := []killAim{{synchook.Staged, 10 * time.Millisecond}, {synchook.Diffed, 0}}
		if i%2 == 1 {
			aims = []killAim{{synchook.Flipped, 10 * time.Millisecond}, {synchook.Moved, 10 * time.Millisecond}, {synchook.Dropped, 10 * time.Millisecond}}
		}
		aim := aims[rand.IntN(len(aims))]
		for lines.Scan() {
			if lines.Text() == stepLine+aim.step {
				if aim.within > 0 {
					time.Sleep(time.Duration(rand.Int64N(int64(aim.within))))
				}
				break
			}
		}
		cmd.Process.Kill()
		cmd.Wait()

		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for v, err := range s.SyncValues(ctx, store.KindTrait, "ltv") {
			if err != nil {
				t.Fatal(err)
			}
			got[v.UserID] = string(v.Value)
		}
		<-s.Recovered() // what the kill left queues its messages in the background
		ds, err := s.List(ctx, store.Filter{After: seen})
		if err != nil {
			t.Fatal(err)
		}
		var sent []string
		for _, d := range ds {
			full, err := s.Get(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, string(full.Body))
			seen = d.ID
		}
		slices.Sort(sent)
		n, err := s.SyncLeftovers(ctx)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("kill %d: %d rows left over after Open", i, n)
		}
		switch {
		case maps.Equal(got, lists[cur]):
			kills["old"]++
			if len(sent) != 0 {
				t.Errorf("kill %d: the list is the old one, but %d messages were queued", i, len(sent))
			}
		case maps.Equal(got, lists[next]):
			kills["new"]++
			if want := diffOf(lists[cur], lists[next]); !slices.Equal(want, sent) {
				t.Errorf("kill %d: the list is the new one; %d messages queued, want %d exactly once", i, len(sent), len(want))
			}
			cur = next
		default:
			t.Fatalf("kill %d: the list is neither the old nor the new (%d users)", i, len(got))
		}
	}
	t.Logf("the first sync took %v; kills left the old list %d times, the new one %d", took, kills["old"], kills["new"])
}

// diffOf is what a sync from old to new sends, "user=value" sorted.
func diffOf(old, new map[string]string) []string {
	var out []string
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
