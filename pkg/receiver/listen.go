package receiver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/tlscert"
)

// Server runs a Handler the way `evfwd listen` does: on its own port
// (HTTPS with a certificate pair), with a second port for a UI beside it
// (listen --ui's inspector), until its context ends, Count requests were
// accepted or Timeout passed; then it shuts both down. NewServer opens the
// ports, so that the caller knows the UI's address before it builds the UI;
// Serve serves them, once.
type Server struct {
	cfg   ServerConfig
	ln    net.Listener
	https bool
	uiLn  net.Listener // nil without a UI port
	quota quota
}

// ServerConfig says where a Server listens and when it stops.
type ServerConfig struct {
	// Addr is the HOST:PORT to listen on, unless Listener is set.
	Addr     string
	Listener net.Listener
	// TLSCert and TLSKey, when set, are the PEM files of the certificate
	// and key to serve HTTPS with.
	TLSCert, TLSKey string
	// UIAddr, or UIListener, opens the port Serve serves its UI on.
	UIAddr     string
	UIListener net.Listener
	// ReadTimeout bounds a request, body included (0: DefaultReadTimeout;
	// see Handler.Server).
	ReadTimeout time.Duration
	// ReadyFile, when set, is written with the receiver's URL and a
	// newline once the port serves.
	ReadyFile string
	// Count, when above 0, stops Serve once that many requests were
	// accepted (Request.Refused empty: on the path, readable, and not
	// refused for their signature), only those of CountType if it is set.
	Count     int
	CountType string
	// Timeout, when above 0, stops Serve after that long.
	Timeout time.Duration
}

// UI is what Serve serves on the UI port: inspector.Listen.
type UI interface {
	// SetURL is told the receiver's URL before the UI serves.
	SetURL(url string)
	// Handler serves the UI on a port listening on addr.
	Handler(addr string) http.Handler
	// Add is handed each request's report, after Options.OnRequest.
	Add(*Request)
	// Close ends what would keep the UI's server from shutting down (a
	// page's event stream).
	Close()
}

// Events are told what Serve does, for the caller to show; a nil field is
// skipped. They run on Serve's goroutine.
type Events struct {
	// UIServing: the UI serves on addr.
	UIServing func(addr net.Addr)
	// Listening: the receiver serves at url; ReadyFile is written next.
	Listening func(url string)
	// Ready: ReadyFile is written (when one is set).
	Ready func(url string)
}

// Stop says why Serve stopped.
type Stop int

const (
	StopDone    Stop = iota // its context ended, or serving failed
	StopCount               // ServerConfig.Count requests were accepted
	StopTimeout             // ServerConfig.Timeout passed
)

// SetupError is a Server's failure to load its TLS pair, open a port or
// write its ready file; Setting names the ServerConfig field at fault
// (TLS for the pair).
type SetupError struct {
	Setting string // "Addr", "UIAddr", "TLS" or "ReadyFile"
	Err     error
}

func (e *SetupError) Error() string { return "receiver: " + e.Setting + ": " + e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// The UI server's limits, serve's inspector's: a caller that trickles its
// headers or body, or idles, loses its connection. A replay (up to
// DefaultForwardTimeout) fits in the write timeout; an event stream lifts
// it for itself.
const (
	uiReadTimeout  = 60 * time.Second
	uiWriteTimeout = 60 * time.Second
)

// shutdownGrace bounds how long Serve waits for requests in flight.
const shutdownGrace = 5 * time.Second

// NewServer loads the TLS pair and opens the UI port and the receiver's
// port, in that order; Close them when Serve is not called.
func NewServer(cfg ServerConfig) (*Server, error) {
	s := &Server{cfg: cfg}
	var tlsCfg *tls.Config
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		certs, err := tlscert.NewReloader(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, &SetupError{"TLS", err}
		}
		tlsCfg = certs.ServerConfig()
	}
	var err error
	if cfg.UIAddr != "" || cfg.UIListener != nil {
		if s.uiLn, err = listenOn(cfg.UIListener, cfg.UIAddr, "UIAddr"); err != nil {
			return nil, err
		}
	}
	if s.ln, err = listenOn(cfg.Listener, cfg.Addr, "Addr"); err != nil {
		s.Close()
		return nil, err
	}
	if tlsCfg != nil {
		s.ln, s.https = tls.NewListener(s.ln, tlsCfg), true
	}
	s.quota.want, s.quota.typ = cfg.Count, cfg.CountType
	if cfg.Count > 0 {
		s.quota.reached = make(chan struct{})
	}
	return s, nil
}

// listenOn returns ln, or else listens on addr.
func listenOn(ln net.Listener, addr, setting string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &SetupError{setting, err}
	}
	return ln, nil
}

// UIAddr is the address of the UI port; nil without one.
func (s *Server) UIAddr() net.Addr {
	if s.uiLn == nil {
		return nil
	}
	return s.uiLn.Addr()
}

// Accepted is how many requests have counted toward ServerConfig.Count.
func (s *Server) Accepted() int { return s.quota.counted() }

// Close closes the ports; Serve closes them itself.
func (s *Server) Close() {
	if s.uiLn != nil {
		s.uiLn.Close()
	}
	if s.ln != nil {
		s.ln.Close()
	}
}

// Serve serves h, and ui on the UI port when both are there, until ctx
// ends, Count or Timeout stops it, or serving fails (an error). It hands
// each report to ui and counts it toward Count after h's OnRequest, then
// shuts both servers down: requests in flight get a few seconds, simulated
// delays are cut short, and the UI's event streams end. The caller closes
// h after. A ReadyFile it cannot write is a *SetupError.
func (s *Server) Serve(ctx context.Context, h *Handler, ui UI, ev Events) (Stop, error) {
	switch {
	case ui == nil && s.uiLn != nil:
		s.uiLn.Close()
		s.uiLn = nil
	case s.uiLn == nil:
		ui = nil // no port to serve it on
	}
	h.tap = s.tap(ui)
	// Cancelling base aborts simulated delays once the listener stops.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := h.Server(s.cfg.ReadTimeout)
	srv.BaseContext = func(net.Listener) context.Context { return base }
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.ln) }()

	scheme := "http"
	if s.https {
		scheme = "https"
	}
	url := scheme + "://" + s.ln.Addr().String() + h.opts.Path
	var uiSrv *http.Server
	if s.uiLn != nil {
		ui.SetURL(url)
		uiSrv = &http.Server{
			Handler:           ui.Handler(s.uiLn.Addr().String()),
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       uiReadTimeout,
			WriteTimeout:      uiWriteTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
		}
		go uiSrv.Serve(s.uiLn)
		if ev.UIServing != nil {
			ev.UIServing(s.uiLn.Addr())
		}
	}
	stop, err := s.wait(ctx, url, served, ev)
	cancelBase()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	shutdown(sctx, srv)
	if uiSrv != nil {
		ui.Close() // the event streams, which Shutdown would wait on
		shutdown(sctx, uiSrv)
	}
	return stop, err
}

// tap is what Serve adds to each report: the UI's copy and the count.
func (s *Server) tap(ui UI) func(*Request) {
	if ui == nil && s.cfg.Count <= 0 {
		return nil
	}
	return func(r *Request) {
		if ui != nil {
			ui.Add(r)
		}
		s.quota.add(r)
	}
}

// wait announces url, writes the ready file, and waits for a reason to
// stop.
func (s *Server) wait(ctx context.Context, url string, served <-chan error, ev Events) (Stop, error) {
	if ev.Listening != nil {
		ev.Listening(url)
	}
	if s.cfg.ReadyFile != "" {
		if err := writeReady(s.cfg.ReadyFile, url); err != nil {
			return StopDone, &SetupError{"ReadyFile", err}
		}
	}
	if ev.Ready != nil {
		ev.Ready(url)
	}
	var timeout <-chan time.Time
	if s.cfg.Timeout > 0 {
		t := time.NewTimer(s.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return StopDone, nil
	case <-s.quota.reached: // nil without a Count: never
		return StopCount, nil
	case <-timeout:
		return StopTimeout, nil
	case err := <-served:
		return StopDone, fmt.Errorf("serve: %w", err)
	}
}

// shutdown stops srv gracefully, or at once when ctx ends first.
func shutdown(ctx context.Context, srv *http.Server) {
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close()
	}
}

// writeReady writes url to path, then renames, so that a CI step polling
// for the file never reads half of it.
func writeReady(path, url string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// quota counts accepted requests toward ServerConfig.Count.
type quota struct {
	mu      sync.Mutex
	want    int
	typ     string
	n       int
	reached chan struct{} // closed at want; nil without a Count
}

func (q *quota) add(r *Request) {
	if q.want <= 0 || r.Refused != "" || (q.typ != "" && r.Type != q.typ) {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.n++
	if q.n == q.want {
		close(q.reached)
	}
}

func (q *quota) counted() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}
