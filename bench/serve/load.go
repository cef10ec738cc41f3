//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
)

const (
	writeKey  = "wk_bench"
	batchSize = 100
)

// client posts batches to one collector with the write key, keep-alive.
type client struct {
	base string
	auth string
	http *http.Client
	// events are the event names postAll's batches draw in turn (the
	// destinations rows' subscriptions tell them apart); nil: every
	// event is "Order Completed".
	events []string
}

func newClient(base string) *client {
	return &client{
		base: base,
		auth: "Basic " + base64.StdEncoding.EncodeToString([]byte(writeKey+":")),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}},
	}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// post sends one body to /v1/batch until it gets 200, waiting a little
// after each 429; any other answer is an error.
func (c *client) post(ctx context.Context, body []byte) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/batch", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", c.auth)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return nil
		case http.StatusTooManyRequests:
			time.Sleep(5 * time.Millisecond)
		default:
			return fmt.Errorf("POST /v1/batch: %s: %s", resp.Status, bytes.TrimSpace(msg))
		}
	}
}

// postAll has workers clients post total events (rounded up to whole
// batches of 100, messageIds prefix-batch-i) as fast as they can, and
// reports the time from the first request to the last 200.
func (c *client) postAll(ctx context.Context, workers, total int, prefix string) (time.Duration, error) {
	batches := int64((total + batchSize - 1) / batchSize)
	var next atomic.Int64
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			var body []byte
			for k := next.Add(1) - 1; k < batches && ctx.Err() == nil; k = next.Add(1) - 1 {
				body = appendBatch(body[:0], prefix, int(k), batchSize, false, c.events, time.Now())
				if err := c.post(ctx, body); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), context.Cause(ctx)
}

// appendBatch appends a /v1/batch body of n track events with messageIds
// prefix-k-0 … prefix-k-(n-1), in that order or the reverse, built without
// fmt so that the bench spends little CPU of its own. Event i is named
// events[i%len(events)], or "Order Completed" when events is empty.
func appendBatch(b []byte, prefix string, k, n int, reverse bool, events []string, at time.Time) []byte {
	ts := message.FormatTime(at)
	b = append(b, `{"batch":[`...)
	for j := range n {
		i := j
		if reverse {
			i = n - 1 - j
		}
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"track","userId":"u_`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","event":"`...)
		if len(events) == 0 {
			b = append(b, "Order Completed"...)
		} else {
			b = append(b, events[i%len(events)]...)
		}
		b = append(b, `","messageId":"`...)
		b = append(b, prefix...)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(k), 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","timestamp":"`...)
		b = append(b, ts...)
		b = append(b, `","properties":{"total":12.5,"currency":"EUR","sku":"SKU-123"},"context":{"ip":"203.0.113.7","library":{"name":"bench","version":"1"}}}`...)
	}
	b = append(b, `],"sentAt":"`...)
	b = append(b, ts...)
	return append(b, `"}`...)
}

// tagID is the messageId appendBatch gives event i of tagged batch k.
func tagID(k, i int) string {
	return tagPrefix + strconv.Itoa(k) + "-" + strconv.Itoa(i)
}

// tagged posts ticks batches of per tagged events, one batch every
// interval without waiting for the previous answer, and reports when
// each batch was sent.
func (c *client) tagged(ctx context.Context, ticks, per int, every time.Duration) ([]time.Time, error) {
	return c.paced(ctx, "lat", ticks, per, every)
}

// paced posts ticks batches of per events (messageIds prefix-k-i), one
// batch every interval without waiting for the previous answer (catching
// up when it falls behind), and reports when each batch was sent.
func (c *client) paced(ctx context.Context, prefix string, ticks, per int, every time.Duration) ([]time.Time, error) {
	sent := make([]time.Time, ticks)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	// Batch k is due at start + (k+1)·every: one sent late (a busy
	// machine) does not move the rest, so the rate holds over the run.
	start := time.Now()
	for k := range ticks {
		if d := time.Until(start.Add(time.Duration(k+1) * every)); d > 0 {
			time.Sleep(d)
		}
		sent[k] = time.Now()
		body := appendBatch(nil, prefix, k, per, false, nil, sent[k])
		wg.Go(func() {
			if err := c.post(ctx, body); err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errc:
		return sent, err
	default:
		return sent, nil
	}
}
