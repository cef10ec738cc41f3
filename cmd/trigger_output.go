package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/loadgen"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// What `evfwd trigger` prints: each attempt as it happens, the verdict of
// one message, and the summary of a load test (--count), as text or NDJSON.

// attemptPrinter writes attempts and summaries in the chosen format.
type attemptPrinter struct {
	now       func() time.Time
	w         io.Writer
	st        *cli.Styles
	json      bool
	endpoints int
	mu        sync.Mutex // load mode prints from many workers
}

func newAttemptPrinter(opts *TriggerOptions, endpoints int) *attemptPrinter {
	return &attemptPrinter{now: opts.Now, w: opts.IO.Out, st: opts.IO.OutStyles(), json: opts.Format.JSON(), endpoints: endpoints}
}

func (p *attemptPrinter) intro(t message.Type, msg *rawjson.Object, body []byte, fields []signature.Field) {
	if p.json {
		return
	}
	id, _ := msg.GetString("messageId")
	signed := p.st.Muted.Sprint("unsigned")
	if len(fields) > 0 {
		lines := make([]string, len(fields))
		for i, f := range fields {
			lines[i] = f.Name + ": " + f.Value
		}
		// One header a line, under the first.
		signed = "signed " + p.st.Muted.Sprint(strings.Join(lines, "\n  "))
	}
	fmt.Fprintf(p.w, "%s %s  %d bytes  %s\n%s\n\n", p.st.Bold.Sprint(string(t)), p.st.Muted.Sprint(cli.Printable(id)), len(body), signed, cli.PrintableText(string(body)))
}

// attempt prints one attempt line, or one NDJSON record.
func (p *attemptPrinter) attempt(a webhook.Attempt, msg *rawjson.Object) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		b, _ := json.Marshal(a)
		id, _ := msg.GetString("messageId")
		rec := append([]byte(`{"record":"attempt","messageId":`), rawjson.AppendString(nil, id)...)
		rec = append(append(rec, ','), b[1:]...)
		p.w.Write(append(rec, '\n'))
		return
	}
	st := p.st
	var answer string
	switch {
	case a.Status != 0 && a.Outcome == webhook.Delivered:
		answer = st.OK.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
	case a.Status != 0:
		answer = st.Fail.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
	default:
		answer = st.Fail.Sprint(string(a.Class))
	}
	fmt.Fprintf(p.w, "%s  #%d  %s  → %s  %s  %s\n",
		st.Muted.Sprint(a.Start.Local().Format("15:04:05.000")), a.Delivery, cli.Printable(a.URL), answer,
		fmtLatency(a.Latency), p.next(a))
	if a.Err != nil {
		fmt.Fprintf(p.w, "    %s\n", st.Muted.Sprint(cli.Printable(a.Err.Error())))
	} else if a.Outcome != webhook.Delivered && len(a.Body) > 0 {
		fmt.Fprintf(p.w, "    %s\n", st.Muted.Sprint(excerptLine(a.Body)))
	}
}

// next says what follows an attempt, in words.
func (p *attemptPrinter) next(a webhook.Attempt) string {
	st := p.st
	why := a.Outcome.String()
	if a.Outcome == webhook.TLSError {
		why = "TLS error"
	}
	switch a.Then {
	case webhook.ThenDone:
		return st.OK.Sprint("delivered")
	case webhook.ThenNextURL:
		return st.Warn.Sprintf("%s, trying the next URL", why)
	case webhook.ThenRetry:
		wait := a.RetryAt.Sub(p.now()).Round(10 * time.Millisecond)
		s := fmt.Sprintf("retryable, retry in %s at %s", wait, a.RetryAt.Local().Format("15:04:05"))
		if a.RetryAfter > 0 {
			s += fmt.Sprintf(" (Retry-After %s)", a.RetryAfter)
		}
		return st.Warn.Sprint(s)
	case webhook.ThenGiveUp:
		if a.Class == webhook.ClassRefused {
			return st.Fail.Sprint("connection refused: giving up")
		}
		if a.Outcome == webhook.Retryable {
			return st.Fail.Sprint("retryable, but the retry window is over: giving up")
		}
		return st.Fail.Sprintf("%s, not retried", why)
	case webhook.ThenStop:
		return st.Warn.Sprint("interrupted")
	}
	return st.Fail.Sprint(why)
}

// excerptLine is the start of an endpoint's answer on one line, printable:
// the endpoint chose it.
func excerptLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return cli.Printable(s)
}

func fmtLatency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return d.Round(10 * time.Millisecond).String()
}

// onceSummary is the -o json summary of a single message.
type onceSummary struct {
	Record      string          `json:"record"`
	Type        string          `json:"type"`
	MessageID   string          `json:"messageId,omitempty"`
	Scheme      string          `json:"scheme,omitempty"` // that signed; none when unsigned
	Outcome     webhook.Outcome `json:"outcome"`
	DeliveredTo string          `json:"deliveredTo,omitempty"`
	Deliveries  int             `json:"deliveries"`
	Attempts    int             `json:"attempts"`
	Body        json.RawMessage `json:"body"`
}

// verdict prints the end of a single delivery and picks the exit code.
func (p *attemptPrinter) verdict(res webhook.Result, deliveries, attempts int, msg *rawjson.Object, body []byte, scheme signature.Scheme) error {
	last := res.Last()
	if p.json {
		id, _ := msg.GetString("messageId")
		typ, _ := msg.GetString("type")
		s := onceSummary{Record: "summary", Type: typ, MessageID: id, Scheme: string(scheme), Outcome: res.Outcome,
			Deliveries: deliveries, Attempts: attempts, Body: body}
		if res.Delivered() {
			s.DeliveredTo = last.URL
		}
		if err := cli.WriteJSON(p.w, s); err != nil {
			return err
		}
	} else {
		st := p.st
		// A try is one pass over the URLs (the #N of the attempt lines);
		// requests are worth naming only when a pass made more than one.
		tries := plural(deliveries, "try", "tries")
		if attempts != deliveries {
			tries += ", " + plural(attempts, "request", "requests")
		}
		switch res.Outcome {
		case webhook.Delivered:
			fmt.Fprintf(p.w, "\n%s delivered to %s (%s)\n", st.OK.Sprint(cli.SymOK), cli.Printable(last.URL), tries)
		case webhook.Interrupted:
			fmt.Fprintf(p.w, "\n%s interrupted, not delivered (%s)\n", st.Warn.Sprint(cli.SymNone), tries)
		default:
			fmt.Fprintf(p.w, "\n%s not delivered: %s (%s)\n", st.Fail.Sprint(cli.SymFail), res.Outcome, tries)
		}
	}
	switch res.Outcome {
	case webhook.Delivered:
		return nil
	case webhook.Interrupted:
		return cli.Silent(cli.ExitInterrupted)
	}
	return cli.Silent(cli.ExitFailure)
}

// bucket is a histogram bucket as -o json prints it.
type bucket struct {
	LE    *float64 `json:"leMs"` // nil: above the last bound
	Count int      `json:"count"`
}

type loadSummaryJSON struct {
	Record      string             `json:"record"`
	Type        string             `json:"type"`
	Scheme      string             `json:"scheme,omitempty"` // that signed; none when unsigned
	Count       int                `json:"count"`
	Sent        int                `json:"sent"`
	Delivered   int                `json:"delivered"`
	Failed      int                `json:"failed"`
	Interrupted bool               `json:"interrupted,omitempty"`
	Concurrency int                `json:"concurrency"`
	ElapsedMS   float64            `json:"elapsedMs"`
	PerSecond   float64            `json:"perSecond"`
	LatencyMS   map[string]float64 `json:"latencyMs"`
	Status      map[string]int     `json:"status"`
	Histogram   []bucket           `json:"histogram"`
}

func (p *attemptPrinter) loadSummary(t message.Type, scheme signature.Scheme, r *loadgen.Report) error {
	n, c, elapsed := r.Count, r.Concurrency, r.Elapsed
	sent, rate := r.Sent(), r.PerSecond()
	pcts := []struct {
		name string
		d    time.Duration
	}{
		{"p50", r.Latency.Percentile(0.50)}, {"p90", r.Latency.Percentile(0.90)}, {"p99", r.Latency.Percentile(0.99)}, {"max", r.Latency.Percentile(1)},
	}
	status := map[string]int{}
	for k, v := range r.Status {
		status[strconv.Itoa(k)] = v
	}
	for k, v := range r.Errors {
		status[string(k)] = v
	}
	hist := r.Latency.Buckets()
	if p.json {
		ms := map[string]float64{}
		for _, q := range pcts {
			ms[q.name] = float64(q.d.Microseconds()) / 1000
		}
		var buckets []bucket
		for _, h := range hist {
			b := bucket{Count: h.Count}
			if h.UpTo > 0 {
				le := float64(h.UpTo.Microseconds()) / 1000
				b.LE = &le
			}
			buckets = append(buckets, b)
		}
		return cli.WriteJSON(p.w, loadSummaryJSON{
			Record: "summary", Type: string(t), Scheme: string(scheme), Count: n, Sent: sent, Delivered: r.Delivered, Failed: r.Failed,
			Interrupted: r.Interrupted, Concurrency: c,
			ElapsedMS: float64(elapsed.Microseconds()) / 1000, PerSecond: rate,
			LatencyMS: ms, Status: status, Histogram: buckets,
		})
	}
	st := p.st
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %d of %d sent by %s in %s: %s deliveries/s\n",
		st.Bold.Sprint(string(t)), sent, n, plural(c, "worker", "workers"), elapsed.Round(time.Millisecond), st.Bold.Sprintf("%.0f", rate))
	verdict := st.OK.Sprint(cli.SymOK)
	if r.Failed > 0 {
		verdict = st.Fail.Sprint(cli.SymFail)
	}
	fmt.Fprintf(&b, "%s delivered %d  failed %d", verdict, r.Delivered, r.Failed)
	if sent < n {
		fmt.Fprintf(&b, "  %s", st.Warn.Sprintf("interrupted, %d not sent", n-sent))
	}
	b.WriteString("\nstatus  ")
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range status {
			if !yield(k) {
				return
			}
		}
	})
	for i, k := range keys {
		if i > 0 {
			b.WriteString("  ")
		}
		fmt.Fprintf(&b, "%s ×%d", k, status[k])
	}
	b.WriteString("\nlatency ")
	for _, q := range pcts {
		fmt.Fprintf(&b, " %s %s", q.name, fmtLatency(q.d))
	}
	b.WriteString("\n")
	most := 0
	for _, h := range hist {
		most = max(most, h.Count)
	}
	for _, h := range hist {
		label := "> " + fmtLatency(h.Above)
		if h.UpTo > 0 {
			label = "≤ " + fmtLatency(h.UpTo)
		}
		bar := strings.Repeat("█", max(1, h.Count*40/max(most, 1)))
		fmt.Fprintf(&b, "  %9s %s %d\n", label, st.Accent.Sprint(bar), h.Count)
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}
