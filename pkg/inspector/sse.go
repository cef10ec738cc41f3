package inspector

import (
	"net/http"
	"sync"
	"time"
)

// pingEvery is how often an idle event stream gets a comment line, so that
// proxies and browsers keep it open.
const pingEvery = 15 * time.Second

// subscriberBuffer is how many events a slow page may fall behind before
// it is cut off (it reconnects and reloads the list).
const subscriberBuffer = 256

// hub fans events out to the pages watching /api/events. Publish never
// blocks: a subscriber that cannot keep up loses its stream, not the
// sender's time.
type hub struct {
	mu     sync.Mutex
	subs   map[chan []byte]struct{}
	closed bool
}

func newHub() *hub { return &hub{subs: map[chan []byte]struct{}{}} }

// publish sends one event, name and a JSON line, to every subscriber.
func (h *hub) publish(name string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		return
	}
	ev := make([]byte, 0, len(name)+len(data)+16)
	ev = append(ev, "event: "...)
	ev = append(ev, name...)
	ev = append(ev, "\ndata: "...)
	ev = append(ev, data...)
	ev = append(ev, "\n\n"...)
	for c := range h.subs {
		select {
		case c <- ev:
		default: // too slow: close its stream; the page reconnects
			delete(h.subs, c)
			close(c)
		}
	}
}

// watched reports whether a page watches the events, so that nothing is
// encoded for no one.
func (h *hub) watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

func (h *hub) subscribe() chan []byte {
	c := make(chan []byte, subscriberBuffer)
	h.mu.Lock()
	if h.closed {
		close(c)
	} else {
		h.subs[c] = struct{}{}
	}
	h.mu.Unlock()
	return c
}

// close ends every stream, and any opened later, so that a server
// shutting down does not wait on pages that would watch forever.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.subs {
		delete(h.subs, c)
		close(c)
	}
}

func (h *hub) unsubscribe(c chan []byte) {
	h.mu.Lock()
	if _, ok := h.subs[c]; ok {
		delete(h.subs, c)
		close(c)
	}
	h.mu.Unlock()
}

// serve streams events to one page until it leaves or falls behind.
func (h *hub) serve(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	c := h.subscribe()
	defer h.unsubscribe(c)
	w.WriteHeader(http.StatusOK)
	w.Write([]byte("retry: 1000\n\n"))
	rc.Flush()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				return
			}
			if _, err := w.Write(ev); err != nil {
				return
			}
			// Send what else is waiting in the same write.
			for n := len(c); n > 0; n-- {
				if ev, ok = <-c; !ok {
					return
				}
				w.Write(ev)
			}
		case <-ping.C:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}
