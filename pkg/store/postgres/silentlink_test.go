package postgres_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/postgres"
	"github.com/evfwd/evfwd/pkg/store/postgres/pgtest"
)

// TestSilentLinkRecovery (issue 43, row 2): the server restarts behind a
// stateful middlebox (a NAT, a firewall, a cloud load balancer) that drops
// the state of the connections it had. Their packets then vanish: no FIN,
// no RST, nothing, until the client's kernel gives up on them (minutes).
// Connections opened while the server is down hang the same way, as a
// dropped SYN does. The restart outlasts a call's deadline. Once the server
// answers new connections again, a call made then must succeed within
// connectTimeout (store.CallTimeout) and a little: the pool's slots must
// not stay with connections that will never answer, or with their
// cleanup.
func TestSilentLinkRecovery(t *testing.T) {
	t.Parallel()
	// Calls as serve makes them: six ingests at a time with the
	// collector's deadline, a completer with the forwarder's, a probe;
	// a small pool, so that the calls of one deadline can take every
	// slot (serve's 16 take longer, not otherwise).
	silentLink(t, 4, func(s *postgres.Store, caller func(func(context.Context) error, time.Duration)) {
		var n atomic.Int64
		for range 6 {
			caller(func(ctx context.Context) error {
				id := fmt.Sprint("m", n.Add(1))
				_, err := s.IngestLeased(ctx, []store.Message{{Source: "web", MessageID: id, Type: "track", ReceivedAt: time.Now(),
					Body: []byte(`{}`), Destinations: []string{store.DestinationWebhooks}}}, store.IngestLease{Owner: "n1", Until: time.Now().Add(time.Minute), Limit: 1})
				return err
			}, store.CallTimeout)
		}
		caller(s.Ping, store.CallTimeout)
		caller(func(ctx context.Context) error { return complete1(ctx, s) }, 2*store.CallTimeout)
	})
}

// complete1 completes a delivery that is not there: a Complete's
// statements, and nothing changes.
func complete1(ctx context.Context, s *postgres.Store) error {
	return s.Complete(ctx, []store.Completion{{ID: -1, Owner: "n1", Status: store.Delivered, Attempts: 1, FirstAttempt: time.Now()}})
}

// silentLink opens a store with a pool of size through a middlebox, has
// start start its callers (each makes its call with a deadline, again and
// again, 50 ms after a failure), drops the middlebox's connections for longer
// than a call's deadline, heals it, and checks how soon a call made after
// the heal succeeds.
func silentLink(t *testing.T, size int, start func(s *postgres.Store, caller func(fn func(context.Context) error, timeout time.Duration))) {
	mb := newMiddlebox(t, pgtest.URL(t))
	s := open(t, fmt.Sprintf("%s&pool_max_conns=%d", mb.url, size), postgres.Options{})
	defer s.Close()
	var (
		healed  atomic.Int64 // Unix ns; 0 before the heal
		back    = make(chan time.Time, 1)
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		calls   = make(chan struct{}, 1)
		lastErr atomic.Value
	)
	loop := func(fn func(ctx context.Context) error, timeout time.Duration) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			begun := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := fn(ctx)
			cancel()
			if err != nil {
				lastErr.Store(err)
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond): // a caller's pause before it tries again
				}
				continue
			}
			select {
			case calls <- struct{}{}:
			default:
			}
			if h := healed.Load(); h != 0 && begun.UnixNano() > h {
				select {
				case back <- time.Now():
				default:
				}
			}
		}
	}
	start(s, func(fn func(ctx context.Context) error, timeout time.Duration) {
		wg.Add(1)
		go loop(fn, timeout)
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	<-calls // the pool is in use before the fault

	mb.forget()
	time.Sleep(store.CallTimeout + 2*time.Second) // the restart: longer than a call waits
	mb.heal()
	at := time.Now()
	healed.Store(at.UnixNano())
	bound := store.CallTimeout + 2*time.Second
	select {
	case got := <-back:
		t.Logf("a call made after the heal succeeded %v after it", got.Sub(at).Round(time.Millisecond))
		if got.Sub(at) > bound {
			t.Errorf("calls succeeded again %v after the heal, want within %v", got.Sub(at), bound)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("no call succeeded within 30 s of the heal; the last error: %v", lastErr.Load())
	}
}

// middlebox forwards connections to a PostgreSQL server. forget drops
// the state of every connection it has: from then on they pass nothing
// either way and are never closed, as a NAT that lost its table does, and
// new connections hang the same way until heal; after heal new
// connections pass again. mute loses the server's answers on every
// connection until unmute.
type middlebox struct {
	url    string
	ln     net.Listener
	target string

	mu     sync.Mutex
	down   bool
	flows  map[*flow]bool
	closed bool
	muted  atomic.Bool // the server's answers are dropped (mute)
}

type flow struct {
	client, server net.Conn
	silent         atomic.Bool
}

func newMiddlebox(t *testing.T, raw string) *middlebox {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &middlebox{ln: ln, target: u.Host, flows: map[*flow]bool{}}
	u.Host = ln.Addr().String()
	m.url = u.String()
	go m.accept()
	t.Cleanup(m.close)
	return m
}

func (m *middlebox) accept() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		f := &flow{client: c}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			c.Close()
			return
		}
		m.flows[f] = true
		down := m.down
		m.mu.Unlock()
		if down {
			f.silent.Store(true)
			go drain(c)
			continue
		}
		go m.serve(f)
	}
}

func (m *middlebox) serve(f *flow) {
	up, err := net.Dial("tcp", m.target)
	if err != nil {
		f.silent.Store(true)
		drain(f.client)
		return
	}
	m.mu.Lock()
	f.server = up
	m.mu.Unlock()
	go func() {
		// Until forget closes up; while muted, the server's answers are
		// lost.
		buf := make([]byte, 32<<10)
		for {
			k, err := up.Read(buf)
			if k > 0 && !f.silent.Load() && !m.muted.Load() {
				f.client.Write(buf[:k])
			}
			if err != nil {
				break
			}
		}
		if !f.silent.Load() {
			f.client.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		k, err := f.client.Read(buf)
		if k > 0 && !f.silent.Load() {
			up.Write(buf[:k])
		}
		if err != nil {
			up.Close()
			return
		}
	}
}

// drain reads and drops what c sends until it closes.
func drain(c net.Conn) { io.Copy(io.Discard, c) }

// forget drops every connection's state: their server side closes (the
// server restarted), their client side hears nothing more, ever.
func (m *middlebox) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = true
	for f := range m.flows {
		f.silent.Store(true)
		if f.server != nil {
			f.server.Close()
		}
	}
}

func (m *middlebox) heal() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = false
}

// mute drops what the server sends, on every connection, until unmute:
// requests reach it, and their answers are lost.
func (m *middlebox) mute()   { m.muted.Store(true) }
func (m *middlebox) unmute() { m.muted.Store(false) }

func (m *middlebox) close() {
	m.ln.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for f := range m.flows {
		f.client.Close()
		if f.server != nil {
			f.server.Close()
		}
	}
}
