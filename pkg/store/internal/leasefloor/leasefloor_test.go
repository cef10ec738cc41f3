package leasefloor

import (
	"testing"
	"time"
)

// Aged by the leases' Now, a floor is used for less than TTL after the
// last head read, however many leases read on from it; a lease whose
// clock went back reads from the head.
func TestAgedByTheLeases(t *testing.T) {
	f := New(nil)
	web := Key{Source: "web"}
	fl := Floor{Due: 100, ID: 7}
	f.Set(web, fl, 1000, true)
	f.Set(web, Floor{Due: 200, ID: 9}, 1500, false) // read on: the age still counts from 1000
	if got, ok := f.Get(web, 1999); !ok || got != (Floor{Due: 200, ID: 9}) {
		t.Fatalf("at 999 ms: %v %v, want the floor", got, ok)
	}
	if _, ok := f.Get(web, 2000); ok {
		t.Fatal("a floor TTL old is used")
	}
	f.Set(web, fl, 3000, false)
	if _, ok := f.Get(web, 3000); ok {
		t.Fatal("a floor forgotten was set again from a read after it")
	}
	f.Set(web, fl, 3000, true)
	if _, ok := f.Get(web, 2999); ok {
		t.Fatal("a lease whose clock went back used the floor")
	}
}

// Aged by a clock of its own, a floor expires whatever the leases' Now.
func TestAgedByItsClock(t *testing.T) {
	now := time.Unix(1000, 0)
	f := New(func() time.Time { return now })
	web := Key{Source: "web"}
	f.Set(web, Floor{Due: 100, ID: 7}, 5, true)
	if _, ok := f.Get(web, 5+int64(time.Hour/time.Millisecond)); !ok {
		t.Fatal("the leases' clock aged a floor that has its own")
	}
	now = now.Add(TTL)
	if _, ok := f.Get(web, 5); ok {
		t.Fatal("a floor TTL old by its clock is used")
	}
}

func TestLowerForgetAndRestore(t *testing.T) {
	f := New(nil)
	a, b := Key{Source: "a"}, Key{Source: "b"}
	f.Set(a, Floor{Due: 100, ID: 1}, 0, true)
	f.Set(b, Floor{Due: 200, ID: 1}, 0, true)
	f.Lower("a", 101) // after the floor: kept
	if _, ok := f.Get(a, 0); !ok {
		t.Error("a delivery due after the floor lowered it")
	}
	f.LowerAll(150)
	if _, ok := f.Get(a, 0); !ok {
		t.Error("LowerAll forgot a floor before due")
	}
	if _, ok := f.Get(b, 0); ok {
		t.Error("LowerAll kept a floor not before due")
	}
	saved := f.Save(a)
	f.Forget(a)
	f.Restore(a, saved)
	if got, ok := f.Get(a, 0); !ok || got != (Floor{Due: 100, ID: 1}) {
		t.Errorf("restored: %v %v", got, ok)
	}
	f.Restore(a, f.Save(Key{Source: "none"}))
	if _, ok := f.Get(a, 0); ok {
		t.Error("restoring an absent floor kept one")
	}
}

// Each destination of a source has a floor of its own, apart from the
// source's as a whole; a delivery of the source made due lowers them all.
func TestKeysOfOneSource(t *testing.T) {
	f := New(nil)
	all, hooks, crm := Key{Source: "web"}, Key{"web", "hooks"}, Key{"web", "crm"}
	other := Key{"app", "hooks"}
	f.Set(all, Floor{Due: 100, ID: 1}, 0, true)
	f.Set(hooks, Floor{Due: 300, ID: 2}, 0, true)
	f.Set(crm, Floor{Due: 50, ID: 3}, 0, true)
	f.Set(other, Floor{Due: 300, ID: 4}, 0, true)
	if got, ok := f.Get(hooks, 0); !ok || got != (Floor{Due: 300, ID: 2}) {
		t.Fatalf("hooks: %v %v", got, ok)
	}
	f.Forget(crm)
	if _, ok := f.Get(crm, 0); ok {
		t.Error("Forget(crm) kept its floor")
	}
	if _, ok := f.Get(hooks, 0); !ok {
		t.Error("Forget(crm) forgot hooks' floor")
	}
	f.Set(crm, Floor{Due: 50, ID: 3}, 0, true)
	f.Lower("web", 100)
	for _, tt := range []struct {
		k    Key
		want bool
	}{{all, false}, {hooks, false}, {crm, true}, {other, true}} {
		if _, ok := f.Get(tt.k, 0); ok != tt.want {
			t.Errorf("after Lower(web, 100), floor of %+v kept: %v, want %v", tt.k, ok, tt.want)
		}
	}
}
