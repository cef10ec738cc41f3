package cmd

import (
	"io"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
)

// console serialises stderr lines from the workers with the progress line,
// which is redrawn in place on a terminal: send's and trigger --count's.
type console struct {
	mu       sync.Mutex
	w        io.Writer
	shown    bool // a progress line is on screen
	stop     chan struct{}
	stopped  chan struct{}
	lastDraw string
	every    time.Duration // between redraws; 0 for progressEvery
}

func newConsole(ios *cli.IOStreams) *console { return &console{w: ios.ErrOut} }

// line prints msg on its own line, above the progress line.
func (c *console) line(msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown {
		io.WriteString(c.w, "\r\x1b[K")
		c.shown = false
	}
	io.WriteString(c.w, msg+"\n")
}

// progressEvery is how often the progress line is redrawn.
const progressEvery = 250 * time.Millisecond

func (c *console) startProgress(render func() string) {
	c.stop, c.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(c.stopped)
		every := c.every
		if every <= 0 {
			every = progressEvery
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.draw(render())
			}
		}
	}()
}

func (c *console) draw(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.w, "\r\x1b[K"+s)
	c.shown, c.lastDraw = true, s
}

// stopProgress ends the redraws and clears the line.
func (c *console) stopProgress() {
	if c.stop == nil {
		return
	}
	close(c.stop)
	<-c.stopped
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown {
		io.WriteString(c.w, "\r\x1b[K")
		c.shown = false
	}
}
