// Package demo runs evfwd's whole pipeline on loopback in one process: the
// collection service (pkg/serve) on a temporary SQLite store, a receiver
// (pkg/receiver) checking X-Signature with a random shared secret, and the
// batching client (pkg/analytics) sending events to the service, whose
// webhook destination posts each one to the receiver.
//
// `evfwd demo` is this package behind flags; a test or an example can use
// it to see messages through end to end:
//
//	p, err := demo.Start(ctx, demo.Options{})
//	...
//	defer p.Close()
//	err = p.Send(ctx, events)
//	report, err := p.Wait(ctx, 30*time.Second)
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/serve"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// writeKey is the demo source's; nothing outside the process sees it.
const writeKey = "wk_demo"

// Options are what the caller sees of the pipeline.
type Options struct {
	// Version is the evfwd version: the webhooks' User-Agent and the client's context.library.
	Version string
	// OnWebhook, when set, is called for every request the receiver
	// answers, one call at a time, until Wait returns.
	OnWebhook func(*receiver.Request)
	// OnError, when set, is called for each batch that failed for good,
	// refused by the service or undeliverable after retries, with the
	// batching client's status (-1 for a transport error) and message.
	OnError func(status int, msg string)
}

// Pipeline is a running service, receiver and their temporary store.
type Pipeline struct {
	opts    Options
	dir     string
	store   string
	hookURL string

	rcv      *receiver.Handler
	rsrv     *http.Server
	srv      *serve.Server
	stopSrv  context.CancelFunc
	srvDone  chan error
	arrived  chan struct{} // a wake-up for Wait: something arrived
	mu       sync.Mutex
	verified map[string]bool // messageId → arrived with a valid signature
	want     map[string]bool // messageIds sent
	rejected int
	quiet    bool // Wait returned: OnWebhook is not called again

	closeOnce sync.Once
	closeErr  error
}

// Start runs a receiver and a service on free loopback ports with a
// random shared secret and a store in a new temporary directory. ctx
// bounds the start only; Close stops them and removes the directory.
func Start(ctx context.Context, o Options) (p *Pipeline, err error) {
	p = &Pipeline{opts: o, arrived: make(chan struct{}, 1), verified: map[string]bool{}, want: map[string]bool{}}
	if p.dir, err = os.MkdirTemp("", "evfwd-demo-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	key := make([]byte, 16)
	rand.Read(key)
	secret := hex.EncodeToString(key)

	if p.rcv, err = receiver.New(receiver.Options{Secrets: [][]byte{[]byte(secret)}, OnRequest: p.onRequest}); err != nil {
		return nil, err
	}
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.rsrv = &http.Server{Handler: p.rcv, ReadHeaderTimeout: 5 * time.Second}
	go p.rsrv.Serve(rln)
	p.hookURL = "http://" + rln.Addr().String() + "/webhooks"

	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.store = filepath.Join(p.dir, "evfwd.db")
	cfg := serve.Config{Store: p.store, Sources: []serve.Source{{
		Name: "demo", WriteKey: writeKey,
		Webhooks: serve.Webhooks{Enabled: true, Destination: webhook.Destination{SharedSecret: secret, Endpoints: []webhook.Endpoint{{URL: p.hookURL}}}},
	}}}
	if p.srv, err = serve.New(ctx, cfg, serve.Options{Version: o.Version, Listener: sln, Grace: 2 * time.Second}); err != nil {
		sln.Close()
		return nil, err
	}
	// The service outlives ctx: Close drains it.
	srvCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stopSrv, p.srvDone = stop, make(chan error, 1)
	go func() { p.srvDone <- p.srv.Run(srvCtx) }()
	return p, nil
}

func (p *Pipeline) onRequest(r *receiver.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.verified[r.MessageID] = p.verified[r.MessageID] || r.Signature.Verdict == receiver.SigValid
	if p.opts.OnWebhook != nil && !p.quiet {
		p.opts.OnWebhook(r)
	}
	select { // a wake-up is enough; never block while holding mu
	case p.arrived <- struct{}{}:
	default:
	}
}

// ServeURL is the collection API's base URL.
func (p *Pipeline) ServeURL() string { return p.srv.URL() }

// HookURL is the receiver's URL, the service's webhook endpoint.
func (p *Pipeline) HookURL() string { return p.hookURL }

// StorePath is the service's SQLite file.
func (p *Pipeline) StorePath() string { return p.store }

// Send sends events to the service through a batching client and returns
// once every batch was answered.
func (p *Pipeline) Send(ctx context.Context, events []*message.Raw) error {
	client, err := analytics.New(analytics.Config{WriteKey: writeKey, Endpoint: p.srv.URL(), Version: p.opts.Version,
		OnError: func(status int, msg string) {
			p.mu.Lock()
			p.rejected++
			p.mu.Unlock()
			if p.opts.OnError != nil {
				p.opts.OnError(status, msg)
			}
		}})
	if err != nil {
		return err
	}
	return p.send(ctx, client, events)
}

// send queues events into client and closes it, on every path: an open
// client keeps its consumer goroutine.
func (p *Pipeline) send(ctx context.Context, client *analytics.Client, events []*message.Raw) error {
	for _, r := range events {
		if err := client.Enqueue(r); err != nil {
			client.Close(ctx) // still delivers the events queued before r
			return err
		}
		p.mu.Lock()
		p.want[r.MessageId()] = true
		p.mu.Unlock()
	}
	return client.Close(ctx)
}

// Report says how the events sent fared.
type Report struct {
	Sent     int // distinct messageIds sent
	Verified int // of them, arrived with a valid X-Signature
	Rejected int // batches that failed for good: refused, or undeliverable after retries
}

// OK reports whether every event arrived verified and no batch failed.
func (r Report) OK() bool { return r.Verified == r.Sent && r.Rejected == 0 }

// Wait returns once every event sent has arrived with a valid signature or
// timeout has passed; it returns ctx's error if ctx ends first. From then
// on OnWebhook is not called again, so the caller may print a summary
// that no late duplicate interleaves.
func (p *Pipeline) Wait(ctx context.Context, timeout time.Duration) (Report, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		if r, done := p.report(false); done {
			return r, nil
		}
		select {
		case <-p.arrived:
		case <-t.C:
			r, _ := p.report(true)
			return r, nil
		case <-ctx.Done():
			return Report{}, ctx.Err()
		}
	}
}

// report counts what arrived; when every event did, or stop is set, it
// ends the calls of OnWebhook.
func (p *Pipeline) report(stop bool) (r Report, done bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r = Report{Sent: len(p.want), Rejected: p.rejected}
	for id := range p.want {
		if p.verified[id] {
			r.Verified++
		}
	}
	done = r.Verified == r.Sent
	p.quiet = p.quiet || done || stop
	return r, done
}

// Close stops the service (draining it), then the receiver, and removes
// the temporary store. Calling it again returns the first call's error.
func (p *Pipeline) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

func (p *Pipeline) close() error {
	var err error
	if p.stopSrv != nil {
		p.stopSrv()
		err = <-p.srvDone // sent once: a second receive would block
	}
	if p.rsrv != nil {
		p.rsrv.Close()
	}
	if p.rcv != nil {
		p.rcv.Close()
	}
	if rmErr := os.RemoveAll(p.dir); err == nil {
		err = rmErr
	}
	return err
}

// Samples returns one realistic event of each type the client sends, for
// when no events file is at hand.
func Samples(now time.Time) ([]*message.Raw, error) {
	var out []*message.Raw
	for _, t := range message.Types {
		obj, err := webhook.Sample(t, now, message.NewID())
		if err != nil {
			return nil, err
		}
		obj.Delete("receivedAt")
		r, err := message.NewRaw(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
