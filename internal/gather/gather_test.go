package gather

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

type req struct {
	id     int
	weight int
	ends   bool
	hurry  bool
}

func gatherer(in chan req, stop chan struct{}, max int) *Gatherer[req] {
	return &Gatherer[req]{In: in, Stop: stop, Max: max,
		Weight: func(r req) int { return r.weight },
		Ends:   func(r req) bool { return r.ends },
		Hurry:  func(r req) bool { return r.hurry }}
}

func ids(group []req) []int {
	var out []int
	for _, r := range group {
		out = append(out, r.id)
	}
	return out
}

// With everything queued before Run and Stop closed, the groups are what
// Max, Weight and Ends make them, every request in one, in order.
func TestGroups(t *testing.T) {
	for _, tc := range []struct {
		name string
		reqs []req // ids are their positions
		max  int
		want [][]int
	}{
		{"max by count", []req{{weight: 1}, {weight: 1}, {weight: 1}, {weight: 1}, {weight: 1}}, 2, [][]int{{0, 1}, {2, 3}, {4}}},
		{"max by weight", []req{{weight: 3}, {weight: 3}, {weight: 3}, {weight: 1}}, 7, [][]int{{0, 1, 2}, {3}}},
		{"a first request over max", []req{{weight: 9}, {weight: 1}}, 4, [][]int{{0}, {1}}},
		{"ends", []req{{weight: 1}, {weight: 1, ends: true}, {weight: 1}, {weight: 1, ends: true}}, 10, [][]int{{0, 1}, {2, 3}}},
		{"ends first", []req{{weight: 1, ends: true}, {weight: 1}}, 10, [][]int{{0}, {1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, stop := make(chan req, len(tc.reqs)), make(chan struct{})
			for i, r := range tc.reqs {
				r.id = i
				in <- r
			}
			close(stop)
			var got [][]int
			gatherer(in, stop, tc.max).Run(func(group []req) { got = append(got, ids(group)) })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("groups mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A request whose send completed before Stop closed is applied, however
// many wait and whatever Run was doing: nothing acknowledged is lost.
func TestStopAppliesWhatIsQueued(t *testing.T) {
	for _, linger := range []time.Duration{0, time.Hour} {
		in, stop := make(chan req, 64), make(chan struct{})
		g := gatherer(in, stop, 8)
		g.Linger = linger
		var sent, applied sync.Map
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.Run(func(group []req) {
				for _, r := range group {
					applied.Store(r.id, true)
				}
			})
		}()
		var wg sync.WaitGroup
		for p := range 4 {
			wg.Go(func() {
				for i := range 500 {
					id := p*1000 + i
					in <- req{id: id, weight: 1}
					sent.Store(id, true)
				}
			})
		}
		wg.Wait()
		close(stop)
		<-done
		n := 0
		sent.Range(func(id, _ any) bool {
			n++
			if _, ok := applied.Load(id); !ok {
				t.Errorf("linger %v: request %d queued before Stop was not applied", linger, id)
			}
			return true
		})
		if n != 2000 {
			t.Fatalf("sent %d requests, want 2000", n)
		}
	}
}

// Run ends once In is closed and what it held is applied (the forwarder's
// way to stop).
func TestClosedIn(t *testing.T) {
	in := make(chan req, 3)
	for i := range 3 {
		in <- req{id: i, weight: 1}
	}
	close(in)
	var got [][]int
	gatherer(in, nil, 2).Run(func(group []req) { got = append(got, ids(group)) })
	if diff := cmp.Diff([][]int{{0, 1}, {2}}, got); diff != "" {
		t.Errorf("groups mismatch (-want +got):\n%s", diff)
	}
}

// More takes what is queued and never waits.
func TestMore(t *testing.T) {
	in := make(chan req, 4)
	in <- req{id: 1, weight: 1}
	g := gatherer(in, nil, 10)
	if diff := cmp.Diff([]int{0, 1}, ids(g.More([]req{{id: 0, weight: 1}}))); diff != "" {
		t.Errorf("group mismatch (-want +got):\n%s", diff)
	}
}

// A group smaller than the last waits for more, up to half the last
// apply, and no longer once it is as large, a request that hurries comes,
// or Stop closes.
func TestLinger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const took = 2 * time.Millisecond // each apply: a group smaller than the last waits 1ms
		in, stop := make(chan req, 16), make(chan struct{})
		g := gatherer(in, stop, 10)
		g.Linger = 5 * time.Millisecond
		type group struct {
			ids []int
			at  time.Time
		}
		groups := make(chan group)
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.Run(func(reqs []req) {
				groups <- group{ids(reqs), time.Now()}
				time.Sleep(took)
			})
		}()
		send := func(ids ...int) {
			for _, id := range ids {
				in <- req{id: id, weight: 1, hurry: id == 9}
			}
		}
		// next takes the next group, which must start wait after the
		// last apply ended; its apply then runs until the test sleeps.
		end := time.Now()
		next := func(want []int, wait time.Duration) {
			t.Helper()
			got := <-groups
			if diff := cmp.Diff(want, got.ids); diff != "" {
				t.Fatalf("group mismatch (-want +got):\n%s", diff)
			}
			if d := got.at.Sub(end); d != wait {
				t.Errorf("group %v waited %v, want %v", want, d, wait)
			}
			end = got.at.Add(took)
		}
		// idle lets the last apply end, and Run wait for a request.
		idle := func() {
			time.Sleep(time.Until(end))
			synctest.Wait()
		}

		send(0)
		next([]int{0}, 0) // the first group has no last to wait for
		send(1, 2, 3)     // queued during the apply
		next([]int{1, 2, 3}, 0)

		// Smaller than the last (3): it waits, and goes once it holds 3.
		idle()
		send(4)
		time.Sleep(500 * time.Microsecond)
		send(5, 6)
		next([]int{4, 5, 6}, 500*time.Microsecond)

		// No more come: it goes after half the last apply.
		idle()
		send(7)
		next([]int{7}, time.Millisecond)

		// The last held one: none waits.
		send(10, 11)
		next([]int{10, 11}, 0)

		// A request that hurries ends the wait (9 hurries).
		idle()
		send(8)
		time.Sleep(100 * time.Microsecond)
		send(9)
		next([]int{8, 9}, 100*time.Microsecond)

		// The last held one request that may wait (9 hurried): none waits.
		idle()
		send(12)
		next([]int{12}, 0)

		// Stop ends a wait: the group goes at once.
		send(13, 14)
		next([]int{13, 14}, 0)
		idle()
		send(15)
		time.Sleep(100 * time.Microsecond)
		close(stop)
		next([]int{15}, 100*time.Microsecond)
		<-done
	})
}
