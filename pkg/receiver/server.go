package receiver

import (
	"net/http"
	"time"
)

// The limits of one connection. A webhook is one message of at most 32 KB
// that a sender (evfwd's destination among them) gives up on after 5 s,
// so a sender slower than these has failed by its own clock already.
const (
	// DefaultReadTimeout bounds the whole request, body included (6x a
	// sender's deadline, or 170 KB/s for a body at DefaultMaxBodyBytes).
	// Without it a sender that stopped mid-body held its connection,
	// goroutine and buffer until it hung up. net/http lifts the deadline
	// once the body is read, so a simulated delay and ForwardTo are not
	// cut by it.
	DefaultReadTimeout = 30 * time.Second
	// Headers come in a packet or two; a sender that trickles them
	// holds a connection for nothing.
	readHeaderTimeout = 10 * time.Second
	// Longer than senders keep an idle connection (Go's http.Transport:
	// 90 s), so a keep-alive sender closes first rather than reuse a
	// connection the receiver is closing.
	idleTimeout = 120 * time.Second
	// Writing the answer, on top of all the handler may wait for.
	writeSlack = 10 * time.Second
	// Webhook headers take a few hundred bytes; net/http's default is 1 MB.
	maxHeaderBytes = 64 << 10
)

// Server returns an http.Server for h with limits fit for webhook
// senders: readTimeout bounds a request, body included (0:
// DefaultReadTimeout), and a body it cuts short is answered 408; headers,
// idle connections and the answer's write are bounded too.
func (h *Handler) Server(readTimeout time.Duration) *http.Server {
	if readTimeout <= 0 {
		readTimeout = DefaultReadTimeout
	}
	// WriteTimeout counts from the end of the headers, so it covers the
	// handler's whole work: reading the body, the simulated delay, the
	// app behind ForwardTo. It only stops a sender that never reads its
	// answer.
	writeTimeout := readTimeout + h.opts.Simulate.Delay + writeSlack
	if h.forward != nil {
		writeTimeout += DefaultForwardTimeout
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(readHeaderTimeout, readTimeout),
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}
