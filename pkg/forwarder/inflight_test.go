package forwarder

import (
	"fmt"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
)

// planLease on a lane of PerSource 64: lease-ahead depth 32, least group 8.
func TestPlanLease(t *testing.T) {
	const depth, group = 32, 8
	for _, tc := range []struct {
		name         string
		m            mode
		room, queued int
		busy         bool
		slots, ahead int
	}{
		{"idle lane fills every slot, nothing ahead", modeAll, 64, 0, false, 64, 0},
		{"busy lane leases ahead up to the depth", modeAll, 10, 20, true, 10, 12},
		{"full lane only leases ahead", modeAll, 0, 0, true, 0, 32},
		{"full lane with the depth ahead leases nothing", modeAll, 0, 32, true, 0, 0},
		{"busy lane waits for a group", modeAll, 3, 28, true, 0, 0},
		{"busy lane with exactly a group", modeAll, 4, 28, true, 4, 4},
		{"idle lane takes one slot, however small", modeAll, 1, 0, false, 1, 0},
		{"more held than the bound: no room", modeAll, -2, 0, false, 0, 0},
		{"endpoints open, no probe due", modeNone, 64, 5, true, 0, 0},
		{"probe on an idle lane: one", modeProbe, 64, 0, false, 1, 0},
		{"probe on a busy lane: under a group, none", modeProbe, 10, 0, true, 0, 0},
		{"probe with no room", modeProbe, 0, 0, false, 0, 0},
	} {
		p := planLease(tc.m, tc.room, tc.queued, tc.busy, depth, group)
		if p.slots != tc.slots || p.ahead != tc.ahead {
			t.Errorf("%s: planLease = %+v, want slots %d ahead %d", tc.name, p, tc.slots, tc.ahead)
		}
	}
}

// A pass's tokens go to what was leased ahead first, then to what it
// leased; what they do not cover waits ahead, and unused tokens go back.
// A delivery's token passes to the next one ahead once its requests end,
// in a slot of its own: its own slot is free only once its outcome is on
// record (free), so a lane whose slots all wait for records sends nothing
// more and its token goes back.
func TestInflightSlotsAndTokens(t *testing.T) {
	in := inflight{tokens: make(tokens, 4), perSource: 3}
	ds := func(ids ...int64) []store.Delivery {
		var out []store.Delivery
		for _, id := range ids {
			out = append(out, store.Delivery{ID: id})
		}
		return out
	}
	taken := func() int { return len(in.tokens) }
	in.ahead = ds(1)
	if n := in.tokens.takeUpTo(3); n != 3 {
		t.Fatalf("took %d tokens, want 3", n)
	}
	first := in.takeAhead(3)
	sent := in.start(3, first, ds(2, 3, 4, 5))
	if fmt.Sprint(ids(sent)) != "[1 2 3]" || fmt.Sprint(ids(in.ahead)) != "[4 5]" || in.slots != 3 || taken() != 3 {
		t.Fatalf("sent %v, ahead %v, %d slots, %d tokens", ids(sent), ids(in.ahead), in.slots, taken())
	}
	if room, queued, busy := in.look(); room != 0 || queued != 2 || !busy {
		t.Fatalf("look = %d, %d, %v", room, queued, busy)
	}
	// 1's requests are over but not its record: no slot for 4.
	if _, _, ok := in.next(false); ok || in.slots != 3 || taken() != 2 || in.sent() {
		t.Fatalf("next with every slot waiting: ok %v, %d slots, %d tokens; want the token back, the slots kept", ok, in.slots, taken())
	}
	in.free(1, false)
	if in.slots != 2 {
		t.Fatalf("%d slots after 1 was recorded, want 2", in.slots)
	}
	if d, left, ok := in.next(false); !ok || d.ID != 4 || left != 1 || in.slots != 3 || taken() != 2 {
		t.Fatalf("next = %d, %d, %v (%d slots, %d tokens); want 4, 1 left, in 1's slot", d.ID, left, ok, in.slots, taken())
	}
	if _, _, ok := in.next(true); ok || in.slots != 3 || taken() != 1 {
		t.Fatalf("stopping: ok %v, %d slots, %d tokens; want the token freed", ok, in.slots, taken())
	}
	if _, _, ok := in.next(true); ok || taken() != 0 || !in.sent() {
		t.Fatalf("stopping: ok %v, %d tokens; want every token back", ok, taken())
	}
	for _, id := range []int64{2, 3, 4} {
		in.free(id, false)
	}
	if n := in.claimFresh(5); n != 3 || in.fresh != 3 || taken() != 3 {
		t.Fatalf("claimed %d fresh (%d tokens held), want 3: the lane's bound", n, taken())
	}
	in.endFresh(3)
	if got := in.dropAhead(); fmt.Sprint(ids(got)) != "[5]" || in.fresh != 0 || in.slots != 0 || taken() != 0 {
		t.Fatalf("dropped %v, %d fresh, %d slots, %d tokens", ids(got), in.fresh, in.slots, taken())
	}
	// A pass whose tokens outnumber what it got hands the rest back.
	if n := in.tokens.takeUpTo(1); n != 1 {
		t.Fatal("no token")
	}
	if sent := in.start(1, nil, nil); len(sent) != 0 || taken() != 0 {
		t.Fatalf("sent %v, %d tokens held; want the pass's token back", ids(sent), taken())
	}
}

// What a Lease returns that the lane holds already (its lease ran out
// while it was being sent) is dropped, once; what the lane no longer
// holds is admitted again.
func TestInflightAdmitDropsHeld(t *testing.T) {
	in := inflight{tokens: make(tokens, 4), perSource: 3}
	d := func(id int64) store.Delivery { return store.Delivery{ID: id} }
	kept, dropped := in.admit([]store.Delivery{d(1), d(2)})
	if fmt.Sprint(ids(kept)) != "[1 2]" || dropped != 0 {
		t.Fatalf("first lease: kept %v, dropped %d", ids(kept), dropped)
	}
	kept, dropped = in.admit([]store.Delivery{d(2), d(3), d(1)})
	if fmt.Sprint(ids(kept)) != "[3]" || dropped != 2 || in.holding() != 3 {
		t.Fatalf("lease of held ones: kept %v, dropped %d, holding %d; want [3], 2, 3", ids(kept), dropped, in.holding())
	}
	in.slots = 1
	in.free(2, false)
	in.forget([]store.Delivery{d(3)})
	kept, _ = in.admit([]store.Delivery{d(1), d(2), d(3)})
	if fmt.Sprint(ids(kept)) != "[2 3]" {
		t.Fatalf("after 2 was recorded and 3 given back: kept %v, want [2 3]", ids(kept))
	}
}

func ids(ds []store.Delivery) []int64 {
	var out []int64
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}
