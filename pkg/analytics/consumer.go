package analytics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/evfwd/evfwd/internal/retry"
)

// batch is the consumer's reusable state for the batch being sent.
type batch struct {
	entries []entry // popped from the queue, in order
	body    []byte  // bodyHead + messages; sentAt is appended per attempt
}

// run is the one consumer of a client: it sends as soon as a message
// waits and nothing is outstanding, so batches form by themselves from
// whatever queued during the previous request.
func (c *Client) run() {
	defer close(c.stopped)
	var b batch
	for {
		c.mu.Lock()
		for c.q.len() == 0 {
			if c.closed || c.ctx.Err() != nil {
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
			select {
			case <-c.wake:
			case <-c.ctx.Done():
			}
			c.mu.Lock()
		}
		if c.ctx.Err() != nil {
			// Close ran out of time: what is left fails without a request.
			for c.q.len() > 0 {
				b.entries = append(b.entries, c.q.pop())
			}
			wakeAll(&c.room)
			c.mu.Unlock()
			c.finish(&b, BatchResult{Status: -1, Err: ErrClosed})
			continue
		}
		c.take(&b)
		wakeAll(&c.room)
		c.mu.Unlock()

		c.finish(&b, c.deliver(&b))
	}
}

// take pops the next batch: at most BatchSize messages and MaxBatchBytes
// of body; a message is never split. c.mu must be held.
func (c *Client) take(b *batch) {
	size := len(bodyHead) + len(bodyTail)
	for c.q.len() > 0 && len(b.entries) < c.cfg.BatchSize {
		n := len(c.q.front().data)
		if len(b.entries) > 0 {
			n++ // comma
			if size+n > MaxBatchBytes {
				break
			}
		}
		size += n
		b.entries = append(b.entries, c.q.pop())
	}
}

// finish reports a batch's outcome, then marks its messages done so that a
// Flush returns only after the callbacks have seen them.
func (c *Client) finish(b *batch, res BatchResult) {
	n := int64(len(b.entries))
	if res.Err == nil {
		c.sent.Add(n)
	} else {
		c.failed.Add(n)
		if c.cfg.OnError != nil && !errors.Is(res.Err, ErrClosed) {
			c.cfg.OnError(res.Status, errorMessage(res.Err))
		}
	}
	c.batches.Add(1)
	if c.cfg.OnBatch != nil {
		res.MessageIds = make([]string, len(b.entries))
		res.Tags = make([]uint64, len(b.entries))
		for i, e := range b.entries {
			res.MessageIds[i], res.Tags[i] = e.id, e.tag
		}
		c.cfg.OnBatch(res)
	}
	c.mu.Lock()
	for _, e := range b.entries {
		c.slabs.release(e.slab)
	}
	c.done += uint64(n)
	wakeAll(&c.changed)
	c.mu.Unlock()
	clear(b.entries)
	b.entries = b.entries[:0]
}

func errorMessage(err error) string {
	var api *APIError
	if errors.As(err, &api) {
		return api.Message
	}
	return err.Error()
}

// deliver sends b with retries and returns its final outcome.
func (c *Client) deliver(b *batch) BatchResult {
	if c.cfg.Stub {
		return BatchResult{Status: http.StatusOK, Attempts: 0}
	}
	b.body = append(b.body[:0], bodyHead...)
	for i, e := range b.entries {
		if i > 0 {
			b.body = append(b.body, ',')
		}
		b.body = append(b.body, e.data...)
	}
	prefix := len(b.body)
	p := c.cfg.Retry
	for attempt := 1; ; attempt++ {
		// sentAt is the time of this attempt, for the server's clock-skew
		// correction; the messages (and their ids) stay the same.
		b.body = appendTail(b.body[:prefix], c.cfg.Now())

		status, retryAfterHdr, err := c.attempt(b.body)
		if err == nil {
			return BatchResult{Status: status, Attempts: attempt}
		}
		if !retryable(err) || attempt >= p.MaxAttempts || c.ctx.Err() != nil || (p.StopOnRefused && IsRefused(err)) {
			return BatchResult{Status: status, Err: err, Attempts: attempt}
		}
		wait := p.backoff(attempt)
		if ra, ok := retry.After(retryAfterHdr, c.cfg.Now()); ok {
			wait = min(ra, p.MaxRetryAfter)
		}
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(RetryEvent{Attempt: attempt, MaxAttempts: p.MaxAttempts, Delay: wait, Status: status, Err: err, Messages: len(b.entries)})
		}
		if c.cfg.sleep(c.ctx, wait) != nil {
			return BatchResult{Status: status, Err: err, Attempts: attempt}
		}
		c.retries.Add(1)
	}
}

// attempt makes one request. status is -1 for a *TransportError; err is
// nil for a 2xx answer, else an *APIError.
func (c *Client) attempt(body []byte) (status int, retryAfter string, err error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return -1, "", &TransportError{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.ua)
	req.Header.Set("Authorization", c.auth)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return -1, "", &TransportError{Err: err}
	}
	defer resp.Body.Close()
	// Read a little for the error message; drain a bit more so the
	// connection can be reused.
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, "", nil // the status alone says "stored"
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), &APIError{Status: resp.StatusCode, Message: apiMessage(resp.StatusCode, excerpt)}
}

// apiMessage is the text of an error answer: the "error" member of a JSON
// body (with "details" when present), else the body, else the status text.
func apiMessage(status int, body []byte) string {
	var v struct {
		Error   string          `json:"error"`
		Details json.RawMessage `json:"details"`
	}
	if json.Unmarshal(body, &v) == nil && v.Error != "" {
		if len(v.Details) > 0 && string(v.Details) != "null" {
			return v.Error + " " + string(v.Details)
		}
		return v.Error
	}
	s := strings.TrimSpace(string(body))
	if s == "" || !utf8.ValidString(s) {
		return http.StatusText(status)
	}
	if r := []rune(s); len(r) > 512 {
		s = string(r[:512]) + "…"
	}
	return s
}
