package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/storetest"
)

// TestIngestOneDestinationEachInOrder: messages received together, each
// to one of three destinations or none (ingest's one-statement path, over
// more than one chunk), get their deliveries' ids in message order, so
// each destination's due order (received, then id) is the messages'.
func TestIngestOneDestinationEachInOrder(t *testing.T) {
	t.Parallel()
	s := open(t)
	defer s.Close()
	dests := []string{"c", "a", "b", ""}
	var msgs []store.Message
	var want []string
	for i := range 250 {
		id := fmt.Sprintf("m%03d", i)
		d := dests[i*7%len(dests)]
		if d == "" {
			msgs = append(msgs, storetest.MsgTo("web", id, 0))
			continue
		}
		msgs = append(msgs, storetest.MsgTo("web", id, 0, d))
		want = append(want, id+">"+d)
	}
	ctx := context.Background()
	if err := s.Ingest(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Lease(ctx, store.LeaseRequest{Owner: "n1", Source: "web", Limit: 1000,
		Now: msgs[0].ReceivedAt.Add(time.Second), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(ds, func(a, b store.Delivery) int { return int(a.ID - b.ID) })
	var got []string
	for _, d := range ds {
		got = append(got, d.MessageID+">"+d.Destination)
	}
	if !slices.Equal(got, want) {
		t.Errorf("deliveries by id:\n got %v\nwant %v", got, want)
	}
}
