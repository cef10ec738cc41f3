package analytics

import (
	"context"
	"encoding/base64"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
)

// Client queues messages and sends them in batches. Its methods are safe
// for concurrent use; several clients may live side by side.
type Client struct {
	cfg  Config
	url  string
	auth string
	ua   string
	enc  message.EncodeOptions

	scratch sync.Pool // *[]byte encode buffers

	mu       sync.Mutex
	q        ring
	slabs    slabs         // where push copies messages
	closed   bool          // no more messages accepted
	enqueued uint64        // messages ever accepted
	done     uint64        // messages sent or failed, in queue order
	changed  chan struct{} // closed when messages are done: Flush waits on it
	room     chan struct{} // closed when the queue shrinks or the client closes: EnqueueWait waits on it

	wake    chan struct{} // capacity 1: there is work, or closing
	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{}

	sent, failed, refused, batches, retries atomic.Int64
}

// Stats are a client's counters since New.
type Stats struct {
	Queued  int64 // messages accepted into the queue
	Sent    int64 // messages the server accepted (or Stub counted)
	Failed  int64 // messages whose batch finally failed
	Refused int64 // calls refused: invalid, too large, queue full, closed
	Batches int64 // batches finished, sent or failed
	Retries int64 // attempts after the first
}

// BatchResult is the final outcome of one batch, given to Config.OnBatch.
type BatchResult struct {
	// MessageIds of the batch's messages, in queue order.
	MessageIds []string
	// Tags of the batch's messages, in the same order: what each was
	// queued with by EnqueueWaitTagged, 0 for the others (so a caller
	// that tags from 1 can tell untagged messages apart).
	Tags []uint64
	// Status is the final HTTP status; -1 for a transport error or a
	// batch dropped by Close; 200 under Stub.
	Status int
	// Err is nil when the server accepted the whole batch.
	Err      error
	Attempts int
}

// Accepted reports whether the server accepted every message of the batch.
func (r BatchResult) Accepted() bool { return r.Err == nil }

// New returns a running client; a bad config gives a *ConfigError.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg:     cfg,
		url:     cfg.Endpoint + "/v1/batch",
		auth:    "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.WriteKey+":")),
		ua:      "evfwd/" + cfg.Version,
		enc:     encodeOptions(cfg.Version),
		changed: make(chan struct{}),
		room:    make(chan struct{}),
		wake:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
	}
	c.scratch.New = func() any { b := make([]byte, 0, 1024); return &b }
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c, nil
}

// fill gives a message the messageId and timestamp it lacks.
func (c *Client) fill(id string, ts time.Time) (string, time.Time) {
	if id == "" {
		id = c.newID()
	}
	if ts.IsZero() {
		ts = c.cfg.Now()
	}
	return id, ts
}

func (c *Client) newID() string {
	if c.cfg.NewID != nil {
		return c.cfg.NewID()
	}
	return message.NewID()
}

// Identify queues an identify message. Like every call it never blocks
// and never makes a request: it validates, encodes and queues.
func (c *Client) Identify(m message.Identify) error {
	return enqueueTyped(c, &m, &m.MessageId, &m.Timestamp)
}

// Track queues a track message.
func (c *Client) Track(m message.Track) error {
	return enqueueTyped(c, &m, &m.MessageId, &m.Timestamp)
}

// Page queues a page message.
func (c *Client) Page(m message.Page) error {
	return enqueueTyped(c, &m, &m.MessageId, &m.Timestamp)
}

// Screen queues a screen message.
func (c *Client) Screen(m message.Screen) error {
	return enqueueTyped(c, &m, &m.MessageId, &m.Timestamp)
}

// Group queues a group message.
func (c *Client) Group(m message.Group) error {
	return enqueueTyped(c, &m, &m.MessageId, &m.Timestamp)
}

// Alias queues an alias message.
func (c *Client) Alias(m message.Alias) error {
	return enqueueTyped(c, &m, &m.MessageId, &m.Timestamp)
}

// enqueueTyped validates *m, fills in its messageId and timestamp (id and
// ts point into *m) and queues it. It is generic so each message type is
// encoded by a direct call, without boxing the struct in an interface.
func enqueueTyped[M message.Message](c *Client, m *M, id *string, ts *time.Time) error {
	if err := (*m).Validate(); err != nil {
		return c.refuse(err)
	}
	*id, *ts = c.fill(*id, *ts)
	bp := c.scratch.Get().(*[]byte)
	b, err := (*m).AppendJSON((*bp)[:0], &c.enc)
	err = c.push(context.Background(), b, *id, 0, err, false)
	*bp = b[:0]
	c.scratch.Put(bp)
	return err
}

// Enqueue queues a raw message (one decoded from JSON, e.g. an NDJSON
// line). It fills in r's messageId and timestamp when missing (read them
// back from r afterwards) and queues its own copy of the message, so the
// caller may reuse r, and the bytes r was parsed from, once Enqueue
// returns; r itself reads those bytes until its next Parse.
func (c *Client) Enqueue(r *message.Raw) error {
	return c.enqueueRaw(context.Background(), r, 0, false)
}

// EnqueueWait is Enqueue that waits for room when the queue is full
// instead of refusing with ErrQueueFull: back-pressure for bulk senders.
// It returns ctx's error if ctx ends first.
func (c *Client) EnqueueWait(ctx context.Context, r *message.Raw) error {
	return c.enqueueRaw(ctx, r, 0, true)
}

// EnqueueWaitTagged is EnqueueWait for a message that carries tag, a value
// of the caller's that BatchResult.Tags hands back with the batch the
// message went in: which record of the caller's (a line of input, say) was
// sent, refused or abandoned, however batches form.
func (c *Client) EnqueueWaitTagged(ctx context.Context, r *message.Raw, tag uint64) error {
	return c.enqueueRaw(ctx, r, tag, true)
}

func (c *Client) enqueueRaw(ctx context.Context, r *message.Raw, tag uint64, wait bool) error {
	if err := r.Validate(); err != nil {
		return c.refuse(err)
	}
	r.Fill(c.newID, c.cfg.Now)
	var id string
	if c.cfg.OnBatch != nil {
		id = r.MessageId()
	}
	bp := c.scratch.Get().(*[]byte)
	b, err := r.AppendJSON((*bp)[:0], &c.enc)
	err = c.push(ctx, b, id, tag, err, wait)
	*bp = b[:0]
	c.scratch.Put(bp)
	return err
}

func (c *Client) refuse(err error) error {
	c.refused.Add(1)
	return err
}

// push copies an encoded message into the queue; b is scratch space.
func (c *Client) push(ctx context.Context, b []byte, id string, tag uint64, encErr error, wait bool) error {
	if encErr != nil {
		return c.refuse(encErr)
	}
	if err := message.CheckSize(len(b)); err != nil {
		return c.refuse(err)
	}
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return c.refuse(ErrClosed)
		}
		if c.q.len() < c.cfg.MaxQueueSize {
			break
		}
		if !wait {
			c.mu.Unlock()
			return c.refuse(ErrQueueFull)
		}
		ch := c.room
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return c.refuse(ctx.Err())
		}
		c.mu.Lock()
	}
	data, slab := c.slabs.keep(b)
	c.q.push(entry{data: data, id: id, tag: tag, slab: slab})
	c.enqueued++
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// wakeAll wakes everyone waiting on *ch; c.mu must be held. Flush and
// EnqueueWait wait on different channels so that neither is woken for
// the other's news: a sender blocked on a full queue sleeps through
// finished batches until the next one is taken.
func wakeAll(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}

// Flush blocks until every message queued before the call has been sent
// or has failed (after its retries). It returns ctx's error if ctx ends
// first; failures themselves are reported through OnError and OnBatch.
func (c *Client) Flush(ctx context.Context) error {
	c.mu.Lock()
	target := c.enqueued
	for c.done < target {
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	return nil
}

// Close refuses new messages, flushes, and stops the consumer. If ctx ends
// first, the request in flight is abandoned and what is still queued fails
// with ErrClosed; Close then returns ctx's error. Calling Close again is
// harmless.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	wakeAll(&c.room) // a sender waiting for room gets ErrClosed now
	c.mu.Unlock()
	err := c.Flush(ctx)
	if err != nil {
		c.cancel()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.stopped
	c.cancel()
	return err
}

// Stats returns the client's counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	queued := c.enqueued // counted under the lock push holds anyway
	c.mu.Unlock()
	return Stats{
		Queued:  int64(queued),
		Sent:    c.sent.Load(),
		Failed:  c.failed.Load(),
		Refused: c.refused.Load(),
		Batches: c.batches.Load(),
		Retries: c.retries.Load(),
	}
}
