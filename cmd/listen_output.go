package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/evfwd/evfwd/internal/cli"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
)

// listenPrinter shows each request on stdout: a line (text) or an NDJSON
// record (json). JSON goes through a batching LineWriter because scripts
// and benchmarks push many requests through it; text is for eyes.
type listenPrinter struct {
	out     io.Writer
	st      *cli.Styles
	verbose bool

	json *receiver.LineWriter
	mu   sync.Mutex // orders text lines from concurrent requests
}

// noSecretWarning follows the start line of a listen without a secret: it
// answers every request 200 and prints "sig –" on its line, easy to take
// for a check that passed.
func noSecretWarning(st *cli.Styles) string {
	return st.Warn.Sprint("! no secret: signatures are NOT checked, and every request is answered 200") +
		"\n  to check them: evfwd listen --secret-file FILE (or EVFWD_SECRET, or --secret)"
}

func newListenPrinter(ios *cli.IOStreams, format cli.Format, verbose bool) *listenPrinter {
	p := &listenPrinter{out: ios.Out, st: ios.OutStyles(), verbose: verbose}
	if format.JSON() {
		p.json = receiver.NewLineWriter(ios.Out)
	}
	return p
}

func (p *listenPrinter) print(r *receiver.Request) {
	if p.json != nil {
		p.json.WriteLine(r.Line())
		return
	}
	var b strings.Builder
	p.line(&b, r)
	if p.verbose {
		p.details(&b, r)
	}
	p.mu.Lock()
	io.WriteString(p.out, b.String())
	p.mu.Unlock()
}

func (p *listenPrinter) close() error {
	if p.json == nil {
		return nil
	}
	return p.json.Close()
}

// line writes e.g.
// 12:00:05.123  POST /hooks  track "Order Completed"  user=u_42  sig segment ✓  → 200  412 B  1.2ms
// 12:00:05.125  POST /hooks  track  sig stripe ✗ expired  → 401  412 B  1.2ms
func (p *listenPrinter) line(b *strings.Builder, r *receiver.Request) {
	st := p.st
	sep := func() { b.WriteString("  ") }
	b.WriteString(st.Muted.Sprint(r.ReceivedAt.Format("15:04:05.000")))
	sep()
	// Every field that comes from the request goes through cli.Printable:
	// anyone who reaches listen chooses them (the 401 line prints too).
	b.WriteString(st.Bold.Sprint(cli.Printable(r.Method)) + " " + cli.Printable(r.Path))
	if r.Query != "" {
		b.WriteString("?" + cli.Printable(r.Query))
	}
	if r.Batch > 0 {
		sep()
		b.WriteString(st.Accent.Sprint("batch") + " of " + strconv.Itoa(r.Batch))
	}
	if r.Type != "" {
		sep()
		b.WriteString(st.Accent.Sprint(cli.Printable(r.Type)))
		if r.Event != "" {
			b.WriteString(" " + strconv.Quote(r.Event)) // escapes what Printable does
		}
	}
	if r.UserID != "" {
		sep()
		b.WriteString("user=" + cli.Printable(r.UserID))
	}
	if r.Refused != receiver.RefusedPath {
		sep()
		sig := r.Signature
		b.WriteString("sig ")
		if sig.Scheme != "" && sig.Scheme != signature.Auto { // auto: no scheme's header came
			b.WriteString(string(sig.Scheme) + " ")
		}
		switch sig.Verdict {
		case receiver.SigValid:
			b.WriteString(st.OK.Sprint(cli.SymOK))
		case receiver.SigInvalid:
			b.WriteString(st.Fail.Sprint(cli.SymFail + " " + string(sig.Reason)))
		default:
			b.WriteString(st.Muted.Sprint(cli.SymNone))
		}
		if sig.Secret > 0 {
			b.WriteString(" " + st.Muted.Sprint("secret "+strconv.Itoa(sig.Secret)))
		}
		if !r.Shape.OK {
			sep()
			b.WriteString("shape " + st.Fail.Sprint(cli.SymFail+" "+cli.Printable(r.Shape.Reason)))
		}
	}
	if r.Duplicate {
		sep()
		b.WriteString(st.Warn.Sprint("dup"))
	}
	if r.Replay {
		sep()
		b.WriteString(st.Warn.Sprint("replay"))
	}
	sep()
	b.WriteString("→ " + p.status(r.Status))
	if fw := r.Forward; fw != nil {
		if fw.Error != "" {
			b.WriteString(" " + st.Fail.Sprint("(app unreachable)"))
		} else {
			b.WriteString(" " + st.Muted.Sprint("(app, "+formatLatency(fw.Latency)+")"))
		}
	}
	sep()
	b.WriteString(formatSize(r.Size))
	sep()
	b.WriteString(st.Muted.Sprint(formatLatency(r.Latency)))
	b.WriteByte('\n')
}

func (p *listenPrinter) status(code int) string {
	s := strconv.Itoa(code)
	switch {
	case code < 300:
		return p.st.OK.Sprint(s)
	case code < 500:
		return p.st.Warn.Sprint(s)
	}
	return p.st.Fail.Sprint(s)
}

// details is --verbose: why a signature is invalid, headers, the pretty
// body, and the app's answer.
func (p *listenPrinter) details(b *strings.Builder, r *receiver.Request) {
	if r.Signature.Verdict == receiver.SigInvalid {
		b.WriteString("    " + p.st.Fail.Sprint("sig:") + " " + cli.Printable(r.Signature.Message) + "\n")
	}
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString("    " + p.st.Muted.Sprint(cli.Printable(k)+":") + " " + cli.Printable(strings.Join(r.Header[k], ", ")) + "\n")
	}
	if len(r.Body) > 0 {
		b.WriteString("\n" + indent(prettyBody(r.Body)) + "\n")
	}
	if fw := r.Forward; fw != nil {
		if fw.Error != "" {
			b.WriteString("    " + p.st.Fail.Sprint("forward to "+cli.Printable(fw.URL)+" failed: "+cli.Printable(fw.Error)) + "\n")
		} else {
			fmt.Fprintf(b, "    %s\n", p.st.Muted.Sprintf("app %s answered %d:", cli.Printable(fw.URL), fw.Status))
			if len(fw.Body) > 0 {
				b.WriteString(indent(prettyBody(fw.Body)) + "\n")
			}
		}
	}
	b.WriteByte('\n')
}

// prettyBody indents a JSON body, or shows another as text; either way
// printable (json.Indent keeps a string's raw bidi runes and bytes).
func prettyBody(body []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, body, "", "  ") == nil {
		return cli.PrintableText(out.String())
	}
	return strings.TrimRight(cli.PrintableText(string(body)), "\n")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func formatSize(n int) string {
	if n < 10_000 {
		return strconv.Itoa(n) + " B"
	}
	return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KB"
}

func formatLatency(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// tally counts what arrived, for the summary and --timeout's shortfall
// (receiver.Server counts toward --count).
type tally struct {
	mu       sync.Mutex
	total    int
	byType   map[string]int
	bySig    map[receiver.SigVerdict]int
	badShape int
	dups     int
	replays  int
	byStatus map[int]int
	refused  map[string]int
}

func newTally() *tally {
	return &tally{byType: map[string]int{}, bySig: map[receiver.SigVerdict]int{}, byStatus: map[int]int{}, refused: map[string]int{}}
}

// add counts r.
func (t *tally) add(r *receiver.Request) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total++
	typ := r.Type
	if r.Batch > 0 {
		typ = "batch"
	}
	if typ == "" {
		typ = "(none)"
	}
	if r.Refused != receiver.RefusedPath { // nothing was checked
		t.byType[typ]++
		t.bySig[r.Signature.Verdict]++
		if !r.Shape.OK {
			t.badShape++
		}
	}
	if r.Duplicate {
		t.dups++
	}
	if r.Replay {
		t.replays++
	}
	t.byStatus[r.Status]++
	if r.Refused != "" {
		t.refused[r.Refused]++
	}
}

// shortfall is --timeout's error when counted of want requests (of typ,
// when set) were accepted in d.
func (t *tally) shortfall(d time.Duration, counted, want int, typ string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	what := "requests"
	if typ != "" {
		what = typ + " messages"
	}
	msg := fmt.Sprintf("timeout after %s: %d of %d %s arrived", d, counted, want, what)
	if n := t.refused[receiver.RefusedSignature]; n > 0 {
		msg += fmt.Sprintf("; %d refused for an invalid signature", n)
	}
	return errors.New(msg)
}

// summary prints, to stderr, what arrived while listening.
func (t *tally) summary(ios *cli.IOStreams) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := ios.ErrStyles()
	var b strings.Builder
	// One column of labels, values after it, as send's summary has; the
	// padding is part of the label so that styling does not shift it.
	label := func(s string) string { return fmt.Sprintf("%-11s", s) }
	b.WriteString(st.Bold.Sprint(label("requests")) + strconv.Itoa(t.total) + "\n")
	if t.total > 0 {
		b.WriteString(label("by type") + joinCounts(t.byType) + "\n")
		sig := map[string]int{}
		for v, n := range t.bySig {
			sig[string(v)] = n
		}
		b.WriteString(label("signature") + joinCounts(sig) + "\n")
		checked := t.total - t.refused[receiver.RefusedPath]
		fmt.Fprintf(&b, "%s%d ok, %d invalid\n", label("shape"), checked-t.badShape, t.badShape)
		if t.dups > 0 {
			fmt.Fprintf(&b, "%s%d\n", label("duplicates"), t.dups)
		}
		if t.replays > 0 {
			fmt.Fprintf(&b, "%s%d\n", label("replays"), t.replays)
		}
		status := map[string]int{}
		for c, n := range t.byStatus {
			status[strconv.Itoa(c)] = n
		}
		b.WriteString(label("answered") + joinCounts(status) + "\n")
	}
	out := b.String()
	if ios.ErrTTY {
		out = st.Box.Render(strings.TrimRight(out, "\n")) + "\n"
	}
	io.WriteString(ios.ErrOut, out)
}

// joinCounts renders {"track":3,"page":1} as "track 3, page 1", most first.
func joinCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = cli.Printable(k) + " " + strconv.Itoa(m[k]) // a type is the sender's
	}
	return strings.Join(parts, ", ")
}
