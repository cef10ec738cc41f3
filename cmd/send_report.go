package cmd

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/retry"

	"github.com/evfwd/evfwd/internal/cli"
)

// console serialises stderr lines from the workers with the progress line,
// which is redrawn in place on a terminal.
type console struct {
	mu       sync.Mutex
	w        io.Writer
	shown    bool // a progress line is on screen
	stop     chan struct{}
	stopped  chan struct{}
	lastDraw string
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
		t := time.NewTicker(progressEvery)
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

// progress is the text of the progress line: counts, rate, bytes, ETA.
func (s *sendJob) progress() string {
	elapsed := s.f.Now().Sub(s.began).Seconds()
	read := s.bytesDone.Load()
	if r := s.current.Load(); r != nil {
		read += r.Offset()
	}
	parts := []string{
		"read " + groupDigits(s.lines.Load()),
		"sent " + groupDigits(s.accepted.Load()),
		"failed " + groupDigits(s.rejected.Load()+s.failed.Load()),
		groupDigits(int64(perSecond(s.accepted.Load(), elapsed))) + " ev/s",
	}
	total := s.totalSize()
	if total > 0 {
		parts = append(parts, humanBytes(read)+" of "+humanBytes(total))
		if read > 0 && elapsed > 0 && read < total {
			eta := time.Duration(float64(total-read) / (float64(read) / elapsed) * float64(time.Second))
			parts = append(parts, "ETA "+eta.Round(time.Second).String())
		}
	} else {
		parts = append(parts, humanBytes(read))
	}
	return strings.Join(parts, " · ")
}

// totalSize is the size of all inputs, or -1 when one is unknown (a pipe).
func (s *sendJob) totalSize() int64 {
	var n int64
	for _, in := range s.inputs {
		if in.size < 0 {
			return -1
		}
		n += in.size
	}
	return n
}

// sendSummary is the account of a run; -o json prints it as is.
type sendSummary struct {
	Files           []string `json:"files"`
	Lines           int64    `json:"lines"`    // lines read and handled, blank ones included
	Accepted        int64    `json:"accepted"` // accepted by the collection API
	Rejected        int64    `json:"rejected"` // bad input, never sent
	Failed          int64    `json:"failed"`   // refused by the API or undeliverable after retries
	Unsent          int64    `json:"unsent"`   // queued when a second Ctrl-C abandoned the flush
	Blank           int64    `json:"blank"`
	Bytes           int64    `json:"bytes"` // input bytes read (compressed size for gzip)
	Batches         int64    `json:"batches"`
	Retries         int64    `json:"retries"`
	Seconds         float64  `json:"seconds"`
	EventsPerSecond float64  `json:"eventsPerSecond"`
	// LastAccepted is FILE:LINE of the last line such that it and every
	// line before it was accepted or refused as bad input: where to resume.
	LastAccepted string `json:"lastAccepted"`
	Interrupted  bool   `json:"interrupted"`
}

func (s *sendJob) summary(interrupted bool) sendSummary {
	elapsed := s.f.Now().Sub(s.began).Seconds()
	sum := sendSummary{
		Lines: s.lines.Load(), Accepted: s.accepted.Load(), Rejected: s.rejected.Load(),
		Failed: s.failed.Load(), Unsent: s.unsent.Load(), Blank: s.blank.Load(),
		Bytes:   s.bytesDone.Load(),
		Seconds: elapsed, EventsPerSecond: perSecond(s.accepted.Load(), elapsed),
		Interrupted: interrupted,
	}
	for _, in := range s.inputs {
		sum.Files = append(sum.Files, in.name)
	}
	for _, w := range s.workers {
		st := w.client.Stats()
		sum.Batches += st.Batches
		sum.Retries += st.Retries
	}
	last := s.lastSeq
	for _, first := range []int64{s.firstFailed.Load(), s.firstUnsent.Load()} {
		if first > 0 {
			last = min(last, first-1)
		}
	}
	sum.LastAccepted = s.position(last)
	return sum
}

// position turns a line's seq into FILE:LINE ("" for none).
func (s *sendJob) position(seq int64) string {
	if seq <= 0 {
		return ""
	}
	for i := len(s.inputs) - 1; i >= 0; i-- {
		if in := s.inputs[i]; in.firstSeq > 0 && in.firstSeq <= seq {
			return in.name + ":" + itoa(seq-in.firstSeq+1)
		}
	}
	return ""
}

func (s *sendJob) printSummary(interrupted bool) error {
	sum := s.summary(interrupted)
	out := s.f.IO.Out
	if s.f.Format.JSON() {
		return cli.WriteJSON(out, sum)
	}
	st := s.f.IO.OutStyles()
	head := st.OK.Sprint(cli.SymOK) + " sent"
	if interrupted {
		head = st.Warn.Sprint("!") + " interrupted"
	} else if sum.Rejected+sum.Failed+sum.Unsent > 0 {
		head = st.Fail.Sprint(cli.SymFail) + " sent with errors"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s lines from %s in %s\n", head, groupDigits(sum.Lines), strings.Join(sum.Files, ", "),
		time.Duration(sum.Seconds*float64(time.Second)).Round(time.Millisecond))
	row := func(label, value, note string) {
		if note != "" {
			note = "  " + st.Muted.Sprint(note)
		}
		fmt.Fprintf(&b, "  %-15s %12s%s\n", label, value, note)
	}
	row("accepted", groupDigits(sum.Accepted), "")
	row("rejected", groupDigits(sum.Rejected), "bad input, not sent")
	row("not delivered", groupDigits(sum.Failed), "refused by the API or out of retries")
	if sum.Unsent > 0 {
		row("abandoned", groupDigits(sum.Unsent), "queued at the second Ctrl-C")
	}
	row("blank", groupDigits(sum.Blank), "")
	if sum.Retries > 0 {
		row("retries", groupDigits(sum.Retries), "requests tried again")
	}
	row("bytes", humanBytes(sum.Bytes), "")
	row("events/s", groupDigits(int64(sum.EventsPerSecond)), "")
	last := sum.LastAccepted
	if last == "" {
		last = "none"
	}
	row("last accepted", last, "every line up to here is accepted or rejected")
	_, err := io.WriteString(out, b.String())
	return err
}

func perSecond(n int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(n) / seconds
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// groupDigits writes n with thousands separators: 1,234,567.
func groupDigits(n int64) string {
	s := itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// pacer spaces events evenly to at most rate per second, shared by the
// workers. It sleeps only when ahead by more than minSleep, so high rates
// do not pay for a timer per event; idle time earns no burst.
type pacer struct {
	mu    sync.Mutex
	next  time.Time
	every time.Duration
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

const minSleep = 2 * time.Millisecond

func newPacer(rate float64, now func() time.Time, sleep func(context.Context, time.Duration) error) *pacer {
	if sleep == nil {
		sleep = retry.Sleep
	}
	return &pacer{every: time.Duration(float64(time.Second) / rate), now: now, sleep: sleep}
}

func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := p.now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(p.every)
	p.mu.Unlock()
	if d := at.Sub(now); d > minSleep {
		return p.sleep(ctx, d)
	}
	return nil
}
