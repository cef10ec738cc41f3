package loadgen

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// Options say what to send, where, and how hard.
type Options struct {
	Sender      *webhook.Sender
	Destination *webhook.Destination
	// Message is the collected message sent; each copy gets a fresh
	// messageId (but delete, which carries none). Run does not change it.
	Message *rawjson.Object
	// Count is how many copies to send (at least 1); Concurrency how many
	// are in flight at once (at least 1; at most Count are used).
	Count, Concurrency int

	// OnAttempt, when set, sees every attempt with the copy it carried.
	// Workers call it concurrently. msg is valid only during the call: the
	// worker rewrites it for its next copy (copying it per attempt would
	// cost the load test an allocation), so clone what must be kept.
	OnAttempt func(a webhook.Attempt, msg *rawjson.Object)
}

// Report is what a run saw.
type Report struct {
	Count       int // copies asked for
	Concurrency int // workers used
	Elapsed     time.Duration
	Delivered   int // copies an endpoint answered 2xx
	Failed      int // copies every endpoint failed
	// Interrupted: the context ended before every copy was sent; the copy
	// in flight then is neither delivered nor failed.
	Interrupted bool
	// Status counts attempts by HTTP status, Errors the attempts that got
	// no answer by transport error class.
	Status map[int]int
	Errors map[webhook.Class]int
	// Latency holds one latency per copy sent (delivered or failed): its
	// whole delivery, every endpoint tried.
	Latency Histogram
}

// Sent is the number of copies whose delivery ended.
func (r *Report) Sent() int { return r.Latency.Count() }

// PerSecond is the throughput: copies sent per second of the run.
func (r *Report) PerSecond() float64 { return float64(r.Sent()) / r.Elapsed.Seconds() }

// Generator is one load test: New checks the options, Run sends, Done
// tells how far it got meanwhile.
type Generator struct {
	opts Options
	done atomic.Int64
}

// New checks o and returns a Generator ready to Run.
func New(o Options) (*Generator, error) {
	switch {
	case o.Sender == nil || o.Destination == nil || o.Message == nil:
		return nil, errors.New("loadgen: Sender, Destination and Message are required")
	case o.Count < 1:
		return nil, errors.New("loadgen: Count must be at least 1")
	case o.Concurrency < 1:
		return nil, errors.New("loadgen: Concurrency must be at least 1")
	}
	if _, err := webhook.Body(o.Message); err != nil {
		return nil, err
	}
	return &Generator{opts: o}, nil
}

// Done is the number of copies whose delivery has ended so far; safe to
// call while Run runs.
func (g *Generator) Done() int { return int(g.done.Load()) }

// worker is what one worker saw; merged at the end, so workers share
// nothing while they run.
type worker struct {
	Report
	interrupted bool
}

// Run sends the copies and returns the report once all were sent or ctx
// ended. A Generator runs once.
func (g *Generator) Run(ctx context.Context) *Report {
	o := g.opts
	n, c := o.Count, min(o.Concurrency, o.Count)
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		workers = make([]worker, c)
	)
	typ, _ := o.Message.GetString("type")
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			st := &workers[w]
			st.Latency.samples = make([]time.Duration, 0, n/c+1)
			st.Status, st.Errors = map[int]int{}, map[webhook.Class]int{}
			msg := &rawjson.Object{Fields: slices.Clone(o.Message.Fields)}
			var onAttempt func(webhook.Attempt)
			if o.OnAttempt != nil {
				onAttempt = func(a webhook.Attempt) { o.OnAttempt(a, msg) }
			}
			size := 256
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				if message.Type(typ) != webhook.TypeDelete {
					msg.SetString("messageId", message.NewID())
				}
				// A fresh body per copy: the transport may still hold
				// the last one after DeliverFunc returns.
				body, _ := webhook.AppendBody(make([]byte, 0, size), msg)
				size = len(body) + 64
				t0 := time.Now()
				res := o.Sender.DeliverFunc(ctx, o.Destination, body, onAttempt)
				lat := time.Since(t0)
				if res.Outcome == webhook.Interrupted {
					st.interrupted = true
					break
				}
				for _, a := range res.Attempts {
					if a.Status != 0 {
						st.Status[a.Status]++
					} else {
						st.Errors[a.Class]++
					}
				}
				st.Latency.Record(lat)
				if res.Delivered() {
					st.Delivered++
				} else {
					st.Failed++
				}
				g.done.Add(1)
			}
		})
	}
	wg.Wait()

	rep := &Report{Count: n, Concurrency: c, Elapsed: time.Since(start), Status: map[int]int{}, Errors: map[webhook.Class]int{}}
	for _, st := range workers {
		rep.Latency.Merge(&st.Latency)
		for k, v := range st.Status {
			rep.Status[k] += v
		}
		for k, v := range st.Errors {
			rep.Errors[k] += v
		}
		rep.Delivered += st.Delivered
		rep.Failed += st.Failed
		rep.Interrupted = rep.Interrupted || st.interrupted
	}
	rep.Interrupted = rep.Interrupted || rep.Sent() < n
	return rep
}
