// Package faultproxy is a TCP proxy for tests that puts a sick network
// between a client and a server: it can delay every chunk, black-hole the
// link (accept and read, but pass nothing, as a cut cable does), or refuse
// and reset connections (as a stopped server does). Faults change while
// connections are open, and apply to them at once.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Mode is what the proxy does with traffic.
type Mode int

const (
	Pass      Mode = iota // forward, after the delay
	Blackhole             // accept and read, forward nothing, answer nothing
	Refuse                // reset open connections and every new one
)

// Proxy forwards connections on its address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	mode   Mode
	delay  time.Duration
	conns  map[net.Conn]bool
	change chan struct{} // closed and replaced when the mode changes
	wg     sync.WaitGroup
}

// New starts a proxy on a loopback port to target ("host:port"), stopped
// when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}, change: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// InFront starts a proxy to the host of the URL raw (a database's, say)
// and returns raw with the proxy's address as its host: a client given it
// connects through the proxy.
func InFront(t testing.TB, raw string) (string, *Proxy) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := New(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

// Addr is the proxy's "host:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay delays each chunk by d in each direction (0: none).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// SetMode changes what the proxy does, for open connections too: Refuse
// resets them all.
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	close(p.change)
	p.change = make(chan struct{})
	if m == Refuse {
		for c := range p.conns {
			reset(c)
		}
	}
}

// Close stops the proxy and resets every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.SetMode(Refuse)
	p.wg.Wait()
}

func (p *Proxy) state() (Mode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.change
}

// track adds c to the open connections, or reports false when the proxy
// refuses.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Refuse {
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *Proxy) serve(c net.Conn) {
	if mode, _, _ := p.state(); mode == Refuse {
		reset(c)
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		reset(c)
		return
	}
	if !p.track(c, up) {
		reset(c)
		up.Close()
		return
	}
	defer p.untrack(c, up)
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, c); done <- struct{}{} }()
	go func() { p.pipe(c, up); done <- struct{}{} }()
	<-done
	// One side ended: end the other, so neither waits on a dead peer.
	c.Close()
	up.Close()
	<-done
}

// pipe copies src to dst chunk by chunk, each after the delay; while the
// link is black-holed, chunks are read and held until it passes again.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
			}
			return
		}
	}
}

// wait holds a chunk for the delay and for as long as the link is
// black-holed; false when the proxy refuses or closed it meanwhile.
func (p *Proxy) wait() bool {
	_, delay, _ := p.state()
	if delay > 0 {
		time.Sleep(delay)
	}
	for {
		mode, _, change := p.state()
		switch mode {
		case Pass:
			return true
		case Refuse:
			return false
		}
		<-change
	}
}

// reset closes c with a RST, as a host with nothing listening does.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
