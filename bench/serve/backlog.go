//go:build linux

package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/storeurl"
)

// preload stores n forwarded track events of the bench source in the store
// at url, as serve's collector would have stored them: the backlog that
// the forward rows' serve finds when it starts, so that those rows time
// forwarding alone, not forwarding while the same process ingests.
func preload(ctx context.Context, url string, n int) error {
	return preloadFor(ctx, url, n, store.DestinationWebhooks)
}

// preloadFor is preload with a pending delivery of every event to each of
// destinations (the destinations rows' backlog).
func preloadFor(ctx context.Context, url string, n int, destinations ...string) error {
	st, err := storeurl.Open(ctx, url, storeurl.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	ts := message.FormatTime(now)
	batch := make([]store.Message, 0, 500)
	var line []byte
	for i := range n {
		line = append(line[:0], `{"type":"track","userId":"u_`...)
		line = strconv.AppendInt(line, int64(i%100), 10)
		line = append(line, `","event":"Order Completed","messageId":"p-`...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, `","timestamp":"`...)
		line = append(line, ts...)
		line = append(line, `","properties":{"total":12.5,"currency":"EUR","sku":"SKU-123"},"context":{"ip":"203.0.113.7","library":{"name":"bench","version":"1"}}}`...)
		obj, err := rawjson.ParseObject(line)
		if err != nil {
			return err
		}
		m, err := queued.New("bench", obj, now, destinations)
		if err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		if batch = append(batch, m); len(batch) == cap(batch) || i == n-1 {
			if err := st.Ingest(ctx, batch); err != nil {
				return fmt.Errorf("preload: %w", err)
			}
			batch = batch[:0]
		}
	}
	return nil
}

// countDeliveries is how many deliveries the store at url holds, in every
// status (read once serve has exited).
func countDeliveries(ctx context.Context, url string) (int64, error) {
	st, err := storeurl.Open(ctx, url, storeurl.Options{MustExist: true})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	counts, err := st.Counts(ctx)
	var n int64
	for _, c := range counts {
		n += c.N
	}
	return n, err
}
