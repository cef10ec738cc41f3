package message

import (
	"regexp"
	"testing"
)

func TestNewID(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 10000 {
		id := NewID()
		if !v4.MatchString(id) {
			t.Fatalf("%q is not a UUIDv4", id)
		}
		if seen[id] {
			t.Fatalf("%q repeated", id)
		}
		seen[id] = true
	}
	if n := testing.AllocsPerRun(100, func() { _ = NewID() }); n > 1 {
		t.Errorf("NewID allocates %v times, want 1", n)
	}
}

// BenchmarkNewID: a messageId is made per event on the client's enqueue
// path, from several goroutines at once.
func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = NewID()
		}
	})
}
