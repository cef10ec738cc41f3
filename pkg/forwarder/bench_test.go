package forwarder

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// benchStore is a store in memory for the lanes' bookkeeping alone: Lease
// hands out what is due per source, IngestLeased leases the first of a
// message's deliveries and queues the rest, and Complete counts the final
// outcomes until want is reached. Every other method is the nil Store's.
type benchStore struct {
	store.Store
	body []byte
	form store.Form
	mu   sync.Mutex
	due  map[string][]store.Delivery
	next int64
	want int64
	got  atomic.Int64
	done chan struct{}
}

func newBenchStore(body []byte, form store.Form, want int) *benchStore {
	return &benchStore{body: body, form: form, due: map[string][]store.Delivery{}, want: int64(want), done: make(chan struct{})}
}

func (s *benchStore) delivery(source string) store.Delivery {
	s.next++
	return store.Delivery{ID: s.next, Source: source, MessageID: "m" + strconv.FormatInt(s.next, 10), Body: s.body, Form: s.form}
}

func (s *benchStore) queue(source string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.due[source] = append(s.due[source], s.delivery(source))
	}
}

func (s *benchStore) Lease(_ context.Context, r store.LeaseRequest) ([]store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.due[r.Source]
	n := min(r.Limit, len(q))
	out := append([]store.Delivery(nil), q[:n]...)
	s.due[r.Source] = q[n:]
	return out, nil
}

func (s *benchStore) IngestLeased(_ context.Context, msgs []store.Message, l store.IngestLease) ([]store.Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Delivery
	for _, m := range msgs {
		d := s.delivery(m.Source)
		if len(out) < l.Limit {
			out = append(out, d)
		} else {
			s.due[m.Source] = append(s.due[m.Source], d)
		}
	}
	return out, nil
}

func (s *benchStore) Complete(_ context.Context, cs []store.Completion) error {
	n := int64(0)
	for _, c := range cs {
		if c.Status != store.Pending {
			n++
		}
	}
	if n > 0 && s.got.Add(n) == s.want {
		close(s.done)
	}
	return nil
}

func (s *benchStore) SaveEndpoint(context.Context, store.EndpointState) error { return nil }

// BenchmarkForwardLanes is what the lanes cost per delivery: leasing,
// slots and process tokens, leasing ahead, handing to the completer. Four
// sources share a process bound smaller than their lanes' sum, so lanes
// wait for tokens. "backlog" leases every delivery; "fresh" hands them in
// through Ingest one message at a time (what does not fit is leased).
// "failing" deliveries fail before a request (their body is not a
// message), which leaves the forwarder's own work; "loopback" sends each
// to an endpoint on loopback.
func BenchmarkForwardLanes(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	wire := []byte(`{"type":"track","event":"E","userId":"u","messageId":"m"}`)
	sources := []string{"a", "b", "c", "d"}
	for _, bc := range []struct {
		name  string
		body  []byte
		form  store.Form
		fresh bool
	}{
		{"backlog/failing", []byte(`{"event":"no type"}`), store.FormCollected, false},
		{"backlog/loopback", wire, store.FormWire, false},
		{"fresh/failing", []byte(`{"event":"no type"}`), store.FormCollected, true},
		{"fresh/loopback", wire, store.FormWire, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sender, err := webhook.NewSender(webhook.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer sender.CloseIdleConnections()
			dests := map[string]*webhook.Destination{}
			for _, src := range sources {
				dests[src] = &webhook.Destination{SharedSecret: "s", Endpoints: []webhook.Endpoint{{URL: srv.URL}}}
			}
			n := b.N * len(sources)
			s := newBenchStore(bc.body, bc.form, n)
			f, err := New(Config{Store: s, Sender: sender, Owner: "bench", Destinations: dests, MaxInFlight: 128, PerSource: 64})
			if err != nil {
				b.Fatal(err)
			}
			if !bc.fresh {
				for _, src := range sources {
					s.queue(src, b.N)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			b.ResetTimer()
			go func() { defer close(ran); f.Run(ctx) }()
			if bc.fresh {
				ingestAll(b, f, sources)
			}
			<-s.done
			b.StopTimer()
			cancel()
			<-ran
		})
	}
}

// ingestAll hands b.N messages of each source to f, one at a time per
// source, the sources at once.
func ingestAll(b *testing.B, f *Forwarder, sources []string) {
	for !f.accepting() {
		runtime.Gosched() // Run has not started taking fresh deliveries yet
	}
	var wg sync.WaitGroup
	for _, src := range sources {
		wg.Go(func() {
			m := store.Message{Source: src, Destinations: []string{store.DestinationWebhooks}}
			for range b.N {
				if err := f.Ingest(context.Background(), []store.Message{m}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// accepting reports that Run takes fresh deliveries.
func (f *Forwarder) accepting() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running != nil
}
