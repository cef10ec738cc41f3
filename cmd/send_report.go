package cmd

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/analytics"
	"github.com/evfwd/evfwd/pkg/importer"
)

// progressMeter renders the progress line from summaries sampled as a run
// goes on. Its rates are over the last rateWindow, not the whole run: the
// reader races ahead while the queues fill, and a run slows or speeds up,
// so an average from the start gives an ETA that drifts for minutes.
// One goroutine calls line; the meter holds no lock.
type progressMeter struct {
	samples []progressSample // oldest first, spanning at most rateWindow
}

type progressSample struct {
	at       time.Duration // Summary.Elapsed
	done     int64         // lines settled, skipped ones apart
	accepted int64
}

// rateWindow is how far back rates look; minRateSpan is the least span
// they need before the windowed rate replaces the average since the start.
const (
	rateWindow  = 10 * time.Second
	minRateSpan = time.Second
)

// progressLine is the text of the progress line of one summary alone.
func progressLine(sum importer.Summary) string { return (&progressMeter{}).line(sum) }

// line adds sum as a sample and returns the progress line: counts, rate,
// bytes and ETA.
func (m *progressMeter) line(sum importer.Summary) string {
	settled := sum.Accepted + sum.Rejected + sum.Failed + sum.Unsent + sum.Blank
	m.samples = append(m.samples, progressSample{at: sum.Elapsed, done: settled, accepted: sum.Accepted})
	for len(m.samples) > 2 && sum.Elapsed-m.samples[1].at >= rateWindow {
		m.samples = m.samples[1:]
	}
	first := m.samples[0]
	span := (sum.Elapsed - first.at).Seconds()
	if sum.Elapsed-first.at < minRateSpan {
		first, span = progressSample{}, sum.Elapsed.Seconds()
	}
	doneRate := perSecond(settled-first.done, span)
	parts := []string{
		"read " + groupDigits(sum.Lines),
		"sent " + groupDigits(sum.Accepted),
		"failed " + groupDigits(sum.Rejected+sum.Failed),
		groupDigits(int64(perSecond(sum.Accepted-first.accepted, span))) + " ev/s",
	}
	read := sum.BytesRead
	if sum.TotalBytes <= 0 {
		return strings.Join(append(parts, humanBytes(read)), " · ")
	}
	parts = append(parts, humanBytes(read)+" of "+humanBytes(sum.TotalBytes))
	// The work left is the lines not yet settled, estimated from the
	// input's size at the bytes per line read so far.
	if read > 0 && doneRate > 0 {
		lines := float64(sum.TotalBytes) * float64(sum.Lines) / float64(read)
		if left := lines - float64(settled+sum.Skipped); left > 0 {
			eta := time.Duration(left / doneRate * float64(time.Second))
			parts = append(parts, "ETA "+eta.Round(time.Second).String())
		}
	}
	return strings.Join(parts, " · ")
}

// sendSummary is the account of a run; -o json prints it as is.
type sendSummary struct {
	Files           []string `json:"files"`
	Lines           int64    `json:"lines"`    // lines read and handled, blank ones included
	Accepted        int64    `json:"accepted"` // accepted by the collection API
	Rejected        int64    `json:"rejected"` // bad input, never sent
	Failed          int64    `json:"failed"`   // refused by the API or undeliverable after retries
	Unsent          int64    `json:"unsent"`   // queued when a second Ctrl-C or a refused key stopped the run
	Blank           int64    `json:"blank"`
	Skipped         int64    `json:"skipped"`    // --skip, --resume: read, not sent
	Bytes           int64    `json:"bytes"`      // NDJSON bytes read (for gzip, decompressed), as the text summary gives them
	InputBytes      int64    `json:"inputBytes"` // bytes read from the inputs: Bytes, or for gzip its compressed size
	Batches         int64    `json:"batches"`
	Retries         int64    `json:"retries"`
	Seconds         float64  `json:"seconds"`
	EventsPerSecond float64  `json:"eventsPerSecond"`
	// LastAccepted is FILE:LINE of the last line such that it and every
	// line before it was accepted or refused as bad input: where to resume.
	LastAccepted string `json:"lastAccepted"`
	Interrupted  bool   `json:"interrupted"`
	// Resume is the --resume argument that sends the rest of a run that
	// stopped before its end; "" when it went to the end or nothing was
	// settled (the same command again sends the rest).
	Resume string `json:"resume,omitempty"`
	// Error is why the run stopped on its own (a refused write key).
	Error string `json:"error,omitempty"`
	// Unread are the inputs that could not be opened or read to the end,
	// each with why: "cannot read a.ndjson: permission denied".
	Unread []string `json:"unread,omitempty"`

	// KeyRefused says the API refused the write key: sending again
	// changes nothing until it is fixed. Error says so to a script.
	KeyRefused bool `json:"-"`
}

func newSendSummary(files []string, sum importer.Summary, interrupted bool, unread []error) sendSummary {
	seconds := sum.Elapsed.Seconds()
	out := sendSummary{
		Files: files, Lines: sum.Lines, Accepted: sum.Accepted, Rejected: sum.Rejected,
		Failed: sum.Failed, Unsent: sum.Unsent, Blank: sum.Blank, Skipped: sum.Skipped, Bytes: sum.NDJSONRead,
		InputBytes: sum.BytesRead,
		Batches:    sum.Batches, Retries: sum.Retries,
		Seconds: seconds, EventsPerSecond: perSecond(sum.Accepted, seconds),
		LastAccepted: sum.LastAccepted.String(), Interrupted: interrupted,
	}
	if sum.Fatal != nil {
		out.Error = sum.Fatal.Error()
		out.KeyRefused = errors.Is(sum.Fatal, importer.ErrUnauthorized)
	}
	for _, err := range unread {
		out.Unread = append(out.Unread, err.Error())
	}
	// Lines after the last accepted one were never read or never sent:
	// lines merely refused run to the end, and --errors-file has them.
	if out.stoppedEarly() {
		out.Resume = out.LastAccepted
	}
	return out
}

// stoppedEarly reports whether the run ended before its inputs did.
func (s sendSummary) stoppedEarly() bool { return s.Interrupted || s.Error != "" || s.Unsent > 0 }

func printSendSummary(opts *SendOptions, sum sendSummary) error {
	out := opts.IO.Out
	if opts.Format.JSON() {
		return cli.WriteJSON(out, sum)
	}
	st := opts.IO.OutStyles()
	head := st.OK.Sprint(cli.SymOK) + " sent"
	if sum.Error != "" {
		head = st.Fail.Sprint(cli.SymFail) + " stopped"
	} else if sum.Interrupted {
		head = st.Warn.Sprint("!") + " interrupted"
	} else if sum.Rejected+sum.Failed+sum.Unsent > 0 || len(sum.Unread) > 0 {
		head = st.Fail.Sprint(cli.SymFail) + " sent with errors"
	}
	var b strings.Builder
	// File names are printed printable, as everything that could come
	// from outside the command line.
	fmt.Fprintf(&b, "%s: %s from %s in %s\n", head, plural(sum.Lines, "line", "lines"), cli.Printable(strings.Join(sum.Files, ", ")),
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
		note := "queued at the second Ctrl-C"
		if sum.Error != "" {
			note = "queued when the run stopped"
		}
		row("abandoned", groupDigits(sum.Unsent), note)
	}
	row("blank", groupDigits(sum.Blank), "")
	if sum.Skipped > 0 {
		row("skipped", groupDigits(sum.Skipped), "read, not sent (--skip, --resume)")
	}
	if sum.Retries > 0 {
		row("retries", groupDigits(sum.Retries), "requests tried again")
	}
	bytesNote := ""
	if sum.InputBytes != sum.Bytes {
		bytesNote = humanBytes(sum.InputBytes) + " read, gzip"
	}
	row("bytes", humanBytes(sum.Bytes), bytesNote)
	row("events/s", groupDigits(int64(sum.EventsPerSecond)), "")
	last := sum.LastAccepted
	if last == "" {
		last = "none"
	}
	row("last accepted", cli.Printable(last), "every line up to here is accepted or rejected")
	for _, u := range sum.Unread {
		fmt.Fprintf(&b, "  %-15s %s\n", "not read", cli.Printable(strings.TrimPrefix(u, "cannot read ")))
	}
	if notAccepted := sum.Rejected + sum.Failed + sum.Unsent; notAccepted > 0 && opts.ErrorsFile != "" {
		fmt.Fprintf(&b, "%s not accepted, each with why, in %s\n", plural(notAccepted, "line", "lines"), cli.Printable(shellArg(opts.ErrorsFile)))
	}
	if sum.stoppedEarly() {
		fixKey := "the API refused the write key: fix --write-key or " + cli.EnvName("write-key")
		switch {
		case sum.KeyRefused && sum.Resume == "":
			b.WriteString("nothing was settled: " + fixKey + ", then send again\n")
		case sum.KeyRefused:
			b.WriteString(fixKey + " first, then\n")
		}
		if sum.Resume != "" {
			// The position is absolute, so it replaces --skip (the two exclude each other).
			instead := ""
			if opts.Skip > 0 {
				instead = " instead of --skip"
			}
			fmt.Fprintf(&b, "to send the rest, run the same command with --resume %s%s\n", cli.Printable(shellArg(sum.Resume)), instead)
		} else if !sum.KeyRefused {
			b.WriteString("nothing was settled: run the same command again to send the rest\n")
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// shellArg quotes s for a POSIX shell when it needs it.
func shellArg(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func perSecond(n int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(n) / seconds
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// plural writes n as groupDigits does, with the noun that agrees with it:
// "1 line", "1,234 lines".
func plural[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return groupDigits(int64(n)) + " " + many
}

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

// retryRounds prints one stderr line per round of retries, on a terminal
// or not: a run against a down endpoint otherwise says nothing for as long
// as its retries take. With several workers, or batch after batch failing
// alike, a round is shown once: an event is printed when it goes to a later
// attempt than the last one printed, or retryQuiet after it.
type retryRounds struct {
	con *console
	now func() time.Time

	mu      sync.Mutex
	attempt int // of the last line printed
	at      time.Time
}

// retryQuiet is the least time between two lines for the same attempt.
const retryQuiet = 5 * time.Second

func newRetryRounds(con *console, now func() time.Time) *retryRounds {
	if now == nil {
		now = time.Now
	}
	return &retryRounds{con: con, now: now}
}

func (r *retryRounds) event(e analytics.RetryEvent) {
	r.mu.Lock() // held while printing, so that rounds print in order
	defer r.mu.Unlock()
	now := r.now()
	if e.Attempt > r.attempt || now.Sub(r.at) >= retryQuiet {
		r.attempt, r.at = e.Attempt, now
		r.con.line(fmt.Sprintf("retrying %s in %s: %s (attempt %d of %d failed)", plural(e.Messages, "event", "events"),
			roundDelay(e.Delay), cli.Printable(oneLine(importer.Cause(e.Err), 200)), e.Attempt, e.MaxAttempts))
	}
}

// roundDelay is d as a person reads it: 40ms, 2.3s.
func roundDelay(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
