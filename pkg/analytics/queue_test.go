package analytics

import (
	"bytes"
	"fmt"
	"testing"
)

// A stream of messages through the slabs, released in queue order as the
// consumer does, never sees a message's bytes change before its release,
// and settles into reusing a few slabs instead of allocating.
func TestSlabsReuseWithoutClobbering(t *testing.T) {
	var p slabs
	type kept struct {
		want []byte
		data []byte
		slab *slab
	}
	var queue []kept
	made := map[*slab]bool{}
	for i := range 20_000 {
		msg := []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, bytes.Repeat([]byte("x"), i%700)))
		if i%997 == 0 {
			msg = bytes.Repeat([]byte("L"), slabSize/4) // large: a copy of its own
		}
		data, s := p.keep(msg)
		if s != nil {
			made[s] = true
		}
		queue = append(queue, kept{msg, data, s})
		// Keep about a batch's worth queued; release the oldest.
		for len(queue) > 150 {
			k := queue[0]
			if !bytes.Equal(k.data, k.want) {
				t.Fatalf("message changed before its release: got %.40q, want %.40q", k.data, k.want)
			}
			p.release(k.slab)
			queue = queue[1:]
		}
	}
	if len(made) > 8 {
		t.Errorf("%d slabs made for a queue of ~150 messages; want a few reused", len(made))
	}
}
