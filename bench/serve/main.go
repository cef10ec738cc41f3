//go:build linux

// Command serve-bench measures `evfwd serve` as a whole process against
// issue 17's targets, each as a ratio to a reference measured in the same
// run so that machine noise cancels out:
//
//   - forward: webhooks/s from serve, draining a backlog stored before it
//     starts, into a local receiver, over the rate of `evfwd trigger` into
//     the same receiver (the mean of a run right before and one right
//     after);
//   - ingest: events/s with 8 clients posting batches of 100 (durable: a
//     200 comes after the commit), over a null collector's (the same HTTP
//     stack and validation on a store that keeps nothing, nullStore; the
//     mean of a run right before and one right after);
//   - web (issue 28): req/s and latency of single-event requests, one
//     message each as Analytics.js posts them, on 16 and 128 keep-alive
//     connections (durable), over the null collector's under the same load;
//   - latency: ingest→webhook p99 at 1,000 events/s while a backlog drains;
//   - destinations (a source's destinations: list, dest.go): ingest (as
//     above) into 10 destinations, each an FQL subscription on the event
//     name (an event matches 1 or 2) and a 5-field mapping, over ingest
//     into 1 plain destination, every destination paused (and a variant
//     forwarding, for information), the two configurations interleaved
//     -dest-rounds times; a backlog forwarded by a destination with batch
//     {size: 100} over one sending an event a request, every event
//     exactly once; and a destination with rate_limit {per_second: 50}
//     beside an unlimited one while -rate-input events/s flow for
//     -rate-window: its requests/s and the most in any 1 s, and whether
//     the unlimited one keeps up;
//   - PostgreSQL (with -postgres or EVFWD_BENCH_POSTGRES /
//     EVFWD_TEST_POSTGRES): ingest and forward on one node, a fresh schema
//     per row; and two clients on 128 connections posting batches with
//     messageIds of their own, then sharing them (issue 43: deadlocks,
//     p99 against the unique run's), a database of its own per row;
//   - the peak RSS of every serve process.
//
// serve runs as a subprocess (evfwd serve --config FILE) so that its RSS
// can be read from /proc; the receiver runs in this process and verifies
// every X-Signature. One Markdown table is printed, a row as soon as it is
// measured. bench/serve/run.sh builds evfwd and runs this.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/evfwd/evfwd/bench/internal/benchpg"
)

const (
	secret  = "bench-secret"
	clients = 8
)

type options struct {
	evfwd      string // the evfwd binary
	postgres   string // base URL; empty: SQLite only
	cpuprofile string // directory for one CPU profile per serve row
	events     int    // per forward and ingest row
	backlog    int    // of the latency row
	rows       string // groups of rows to run, comma-separated; empty: all
	webEvents  int    // requests per run of the web rows
	webPath    string // where the web rows post single events
	webKind    string // the kind of the web rows' source; empty: none written
	// overlapBatches is what each client of the overlap rows posts.
	overlapBatches int
	// destRounds is how many times the destinations rows run each of
	// their two configurations, interleaved.
	destRounds int
	// rateWindow is how long the rate-limit row posts; rateInput its
	// events/s.
	rateWindow time.Duration
	rateInput  int
}

func main() {
	var o options
	null := flag.Bool("null-collector", false, "run as the null collector (the bench starts it)")
	config := flag.String("config", "", "the null collector's config file")
	flag.StringVar(&o.evfwd, "evfwd", "evfwd", "the evfwd `binary` to measure")
	flag.IntVar(&o.events, "events", envInt("EVFWD_BENCH_EVENTS", 200_000), "events per forward and ingest row (env EVFWD_BENCH_EVENTS)")
	flag.IntVar(&o.backlog, "backlog", envInt("EVFWD_BENCH_BACKLOG", 1_000_000), "backlog of the latency row (env EVFWD_BENCH_BACKLOG)")
	flag.StringVar(&o.postgres, "postgres", firstEnv("EVFWD_BENCH_POSTGRES", "EVFWD_TEST_POSTGRES"), "postgres:// URL for the PostgreSQL rows (default: env EVFWD_BENCH_POSTGRES, EVFWD_TEST_POSTGRES)")
	flag.StringVar(&o.rows, "rows", "", "run only these groups of rows, comma-separated: forward, ingest, web, latency, destinations, pg, overlap (default: all)")
	flag.IntVar(&o.webEvents, "web-events", envInt("EVFWD_BENCH_WEB_EVENTS", 100_000), "single-event requests per run of the web rows (env EVFWD_BENCH_WEB_EVENTS)")
	flag.StringVar(&o.webPath, "web-path", webPath, "the `path` the web rows post single events to")
	flag.StringVar(&o.webKind, "web-kind", webKind, "the `kind` of the web rows' source (empty: no kind key in the config)")
	flag.IntVar(&o.overlapBatches, "overlap-batches", envInt("EVFWD_BENCH_OVERLAP_BATCHES", 10_000), "batches of 10 events each client of the overlap rows posts (env EVFWD_BENCH_OVERLAP_BATCHES)")
	flag.IntVar(&o.destRounds, "dest-rounds", envInt("EVFWD_BENCH_DEST_ROUNDS", 2), "runs of each configuration the ingest and batch destinations rows interleave (env EVFWD_BENCH_DEST_ROUNDS)")
	flag.DurationVar(&o.rateWindow, "rate-window", envDuration("EVFWD_BENCH_RATE_WINDOW", time.Minute), "how long the rate-limit row posts (env EVFWD_BENCH_RATE_WINDOW)")
	flag.IntVar(&o.rateInput, "rate-input", envInt("EVFWD_BENCH_RATE_INPUT", 500), "events/s the rate-limit row posts (env EVFWD_BENCH_RATE_INPUT)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write each serve row's CPU profile to `DIR`/<row>.prof")
	flag.Parse()
	if *null {
		prof := ""
		if o.cpuprofile != "" {
			prof = filepath.Join(o.cpuprofile, "null.prof")
		}
		if err := runNull(*config, prof); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	o.events = roundUp(o.events)
	o.backlog = roundUp(o.backlog)
	os.Exit(run(o))
}

// bench is one run: its temp dir, the receiver, the processes it started
// and what the rows measured so far.
type bench struct {
	opt   options
	dir   string
	procs procs
	rcv   *receiver
	drcv  *destReceiver // the destinations rows' receiver, while they run
	ctx   context.Context

	rssMax float64 // MB, over every serve process
	rssAt  string
	failed bool
}

// row is one line of the table.
type row struct {
	measure, result, ratio, target, verdict string
	rss                                     float64 // MB; 0: none
	// items is what the row's process handled (webhooks, events), and
	// cpu the CPU time it used: printed per item, the cost to compare.
	items int
	cpu   time.Duration
}

func run(o options) int {
	dir, err := os.MkdirTemp("", "evfwd-serve-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b := &bench{opt: o, dir: dir, ctx: context.Background()}
	defer b.close()
	if b.rcv, err = startReceiver(secret); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if o.cpuprofile != "" {
		if b.opt.cpuprofile, err = filepath.Abs(o.cpuprofile); err == nil {
			err = os.MkdirAll(b.opt.cpuprofile, 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "interrupted: stopping")
		b.close()
		os.Exit(130)
	}()

	fmt.Printf("%d CPUs (nproc), %s, %s; %d events per forward/ingest row, backlog %d\n\n",
		runtime.NumCPU(), runtime.Version(), time.Now().Format("2006-01-02 15:04 MST"), o.events, o.backlog)
	fmt.Println("| measure | result | ratio | target | verdict | serve RSS |")
	fmt.Println("|---|---|---|---|---|---|")

	on := func(group string) bool { return o.rows == "" || slices.Contains(strings.Split(o.rows, ","), group) }
	if on("forward") {
		b.forwardRow("SQLite", "forward-sqlite", b.sqlite("forward"), 0.7)
	}
	if on("ingest") {
		b.ingestRow("SQLite", "ingest8-sqlite", b.sqlite("ingest8"), batchLoad(clients, o.events), target{floor: 100_000, min: 0.6})
		b.ingestRow("SQLite", "ingest1-sqlite", b.sqlite("ingest1"), batchLoad(1, roundUp(o.events/4)), target{})
	}
	if on("web") {
		// A web source's browsers: one event a request, many at once
		// (issue 28).
		b.ingestRow("SQLite", "web16-sqlite", b.sqlite("web16"), webLoad(o.webPath, o.webKind, 16, o.webEvents), target{ref: true})
		b.ingestRow("SQLite", "web128-sqlite", b.sqlite("web128"), webLoad(o.webPath, o.webKind, 128, o.webEvents), target{min: 0.5, p99: 50 * time.Millisecond})
	}
	if on("latency") {
		b.latencyRows()
	}
	if on("destinations") {
		b.destinationRows()
	}
	if pg := o.postgres; pg != "" && on("pg") {
		b.pgRow(func(url string) {
			b.ingestRow("PostgreSQL", "ingest8-pg", url, batchLoad(clients, o.events), target{floor: 80_000})
		}, "ingest")
		b.pgRow(func(url string) { b.forwardRow("PostgreSQL", "forward-pg", url, 0.5) }, "forward")
	}
	if o.postgres != "" && on("overlap") {
		b.overlapRows()
	}
	b.print(row{
		measure: "serve RSS, peak over all rows", result: fmt.Sprintf("%.0f MB (%s)", b.rssMax, b.rssAt),
		target: "< 128 MB", verdict: verdict(b.rssMax > 0 && b.rssMax < 128),
	})
	if b.failed {
		return 1
	}
	return 0
}

func (b *bench) close() {
	b.procs.killAll()
	if b.rcv != nil {
		b.rcv.close()
	}
	if b.drcv != nil {
		b.drcv.close()
	}
	os.RemoveAll(b.dir)
}

func (b *bench) sqlite(name string) string { return filepath.Join(b.dir, name+".db") }

// pgRow runs fn on a fresh schema, dropped afterwards.
func (b *bench) pgRow(fn func(url string), name string) {
	url := benchpg.SchemaURL(b.opt.postgres, name)
	defer benchpg.Drop(b.opt.postgres, url)
	fn(url)
}

// triggerRow measures `evfwd trigger` into the receiver: the reference of
// the forward rows, by the same measure (N over first to last arrival).
func (b *bench) triggerRow(when string) float64 {
	n := b.opt.events
	b.rcv.reset()
	secretFile := filepath.Join(b.dir, "secret")
	os.WriteFile(secretFile, []byte(secret), 0o600)
	r := row{measure: fmt.Sprintf("trigger → receiver, %d webhooks, concurrency 64 (reference, %s)", n, when), target: "—", verdict: "info"}
	args := []string{"trigger", "track", "--url", b.rcv.url, "--count", strconv.Itoa(n), "--concurrency", "64",
		"--secret-file", secretFile}
	if b.opt.cpuprofile != "" {
		args = append(args, "--cpuprofile", filepath.Join(b.opt.cpuprofile, "trigger-"+when+".prof"))
	}
	quiet()
	p, err := b.procs.start(b.dir, "trigger", b.opt.evfwd, args, b.env())
	if err == nil {
		err = p.wait(b.ctx, 5*time.Minute)
	}
	if err == nil {
		err = b.rcv.check(n, 0)
	}
	if err != nil {
		b.print(b.fail(r, err))
		return 0
	}
	rate := b.rcv.rate()
	r.result = fmt.Sprintf("%s webhooks/s", num(rate))
	r.items, r.cpu = n, p.cpu()
	if m := regexp.MustCompile(`(\d+) deliveries/s`).FindSubmatch(must(os.ReadFile(p.log))); m != nil {
		r.result += fmt.Sprintf(" (trigger says %s/s)", num(must(strconv.ParseFloat(string(m[1]), 64))))
	}
	b.print(r)
	return rate
}

// forwardRow stores a backlog of events as serve's collector would have
// (preload), measures trigger's rate, then starts serve on the backlog with
// webhooks on and measures the webhooks' arrival rate at the receiver,
// then trigger's rate again: forwarding alone, as trigger's rate is
// sending alone. (The latency rows time forwarding while the same process
// ingests.)
func (b *bench) forwardRow(label, name, storeURL string, min float64) {
	n := b.opt.events
	r := row{measure: fmt.Sprintf("forward, %s, a backlog of %d events, 200 receiver", label, n), target: fmt.Sprintf("≥ %.1f× trigger", min)}
	if err := preload(b.ctx, storeURL, n); err != nil {
		b.print(b.fail(r, err))
		return
	}
	// The reference is measured right before and right after the row, and
	// the ratio is over their mean: this machine's speed drifts over a run
	// by more than the targets' margins.
	before := b.triggerRow("before")
	b.rcv.reset()
	var rate float64
	rows := b.withServe(name, storeURL, source{webhooks: true}, r, func(base string) []row {
		if err := b.rcv.waitFor(n, 0, 30*time.Second, 10*time.Minute); err != nil {
			return []row{b.fail(r, err)}
		}
		rate = b.rcv.rate()
		r.result, r.items = fmt.Sprintf("%s webhooks/s", num(rate)), n
		return []row{r}
	})
	b.judge(rows, rate, mean(before, b.triggerRow("after")), min)
	b.printAll(rows)
}

// mean is the mean of the references that were measured (not 0).
func mean(refs ...float64) float64 {
	sum, n := 0.0, 0
	for _, r := range refs {
		if r > 0 {
			sum, n = sum+r, n+1
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// load is what an ingest row posts, to serve and to its null-collector
// references alike.
type load struct {
	who  string // "8 clients", "128 connections"
	what string // "100000 events", "100000 single-event POST /v1/t"
	kind string // the source's kind (see source)
	// run posts the load to the collector at base, its messageIds
	// starting with prefix.
	run func(ctx context.Context, base, prefix string) (measured, error)
}

// measured is what one run of a load did.
type measured struct {
	n       int             // events stored
	elapsed time.Duration   // from the first request to the last answer
	lat     []time.Duration // each request's latency, sorted; none for batches
}

func (m measured) rate() float64 { return float64(m.n) / m.elapsed.Seconds() }

// result is m's rate (events/s, or req/s for single events, which are one
// each) and latency percentiles.
func (m measured) result() string {
	if m.lat == nil {
		return fmt.Sprintf("%s events/s", num(m.rate()))
	}
	return fmt.Sprintf("%s req/s, p50 %s, p99 %s", num(m.rate()), ms(pct(m.lat, 0.50)), ms(pct(m.lat, 0.99)))
}

// batchLoad is workers clients posting n events in batches of 100.
func batchLoad(workers, n int) load {
	who := "1 client"
	if workers > 1 {
		who = fmt.Sprintf("%d clients", workers)
	}
	return load{who: who, what: fmt.Sprintf("%d events", n), run: func(ctx context.Context, base, prefix string) (measured, error) {
		c := newClient(base)
		defer c.close()
		elapsed, err := c.postAll(ctx, workers, n, prefix)
		return measured{n: n, elapsed: elapsed}, err
	}}
}

// webLoad is conns keep-alive connections posting n single-event
// requests to path, as a web source's browsers do (postSingles).
func webLoad(path, kind string, conns, n int) load {
	return load{who: fmt.Sprintf("%d connections", conns), what: fmt.Sprintf("%d single-event POST %s", n, path), kind: kind,
		run: func(ctx context.Context, base, prefix string) (measured, error) {
			return postSingles(ctx, base, path, conns, n, prefix, webLimit)
		}}
}

// target is what an ingest row is judged by; zero values judge nothing.
type target struct {
	floor float64       // events/s at least
	min   float64       // × the null collector at least
	ref   bool          // measure the null collector (implied by min) and show the ratio
	p99   time.Duration // request latency p99 below
}

func (t target) String() string {
	var parts []string
	if t.floor > 0 {
		parts = append(parts, "≥ "+num(t.floor)+" ev/s")
	}
	if t.min > 0 {
		parts = append(parts, fmt.Sprintf("≥ %.1f× null", t.min))
	}
	if t.p99 > 0 {
		parts = append(parts, "p99 < "+ms(t.p99))
	}
	return or(strings.Join(parts, ", "), "—")
}

// nullRow measures the null collector under l, the reference of an
// ingest row: its rate, 0 when it failed.
func (b *bench) nullRow(when string, l load) float64 {
	r := row{measure: fmt.Sprintf("null collector (no store), %s, %s (reference, %s)", l.who, l.what, when), target: "—", verdict: "info"}
	p, base, err := b.start("null", "", source{kind: l.kind}, true)
	if err != nil {
		b.print(b.fail(r, err))
		return 0
	}
	m, err := l.run(b.ctx, base, "n")
	if stopErr := p.stop(30 * time.Second); err == nil {
		err = stopErr
	}
	if err != nil {
		b.print(b.fail(r, err))
		return 0
	}
	r.result = m.result()
	r.rss, r.items, r.cpu = p.rssMB(), m.n, p.cpu()
	b.print(r)
	return m.rate()
}

// ingestRow measures serve's ingest under l with webhooks off, judged by
// t. With a reference the null collector runs right before and right
// after under the same load, as trigger does around the forward rows, and
// the row's ratio is over their mean.
func (b *bench) ingestRow(label, name, storeURL string, l load, t target) {
	r := row{measure: fmt.Sprintf("ingest, %s, %s, %s, durable", label, l.who, l.what), target: t.String(), verdict: "info"}
	ref := t.ref || t.min > 0
	var before float64
	if ref {
		before = b.nullRow("before", l)
	}
	var rate float64
	rows := b.withServe(name, storeURL, source{kind: l.kind}, r, func(base string) []row {
		m, err := l.run(b.ctx, base, "i")
		if err != nil {
			return []row{b.fail(r, err)}
		}
		rate = m.rate()
		r.result, r.items = m.result(), m.n
		if t.floor > 0 || t.p99 > 0 {
			r.verdict = verdict(rate >= t.floor && (t.p99 == 0 || pct(m.lat, 0.99) < t.p99))
		}
		return []row{r}
	})
	if !ref {
		b.printAll(rows)
		return
	}
	refRate := mean(before, b.nullRow("after", l))
	if t.min > 0 {
		b.judge(rows, rate, refRate, t.min)
	} else {
		for i := range rows {
			rows[i].ratio, _ = b.ratio(rate, refRate, 0)
		}
	}
	b.printAll(rows)
}

// latencyRows posts a backlog, then 1,000 tagged events/s (batches of 10
// every 10 ms for 5 s) while it drains, and reports their ingest→webhook
// latency and the backlog's drain rate.
func (b *bench) latencyRows() {
	const ticks, per = 500, 10
	B := b.opt.backlog
	r := row{measure: fmt.Sprintf("ingest→webhook latency at 1,000 ev/s, SQLite, %d-event backlog draining", B), target: "p99 < 20 ms"}
	drain := row{measure: fmt.Sprintf("backlog drain, SQLite, %d events", B), target: "—", verdict: "info"}
	b.printAll(b.withServe("latency-sqlite", b.sqlite("latency"), source{webhooks: true}, r, func(base string) []row {
		b.rcv.reset()
		c := newClient(base)
		defer c.close()
		posting, err := c.postAll(b.ctx, clients, B, "bl")
		if err != nil {
			return []row{b.fail(r, err)}
		}
		sent, err := c.tagged(b.ctx, ticks, per, 10*time.Millisecond)
		left := int64(B) - b.rcv.n.Load() // still to drain when the window ended
		if err != nil {
			return []row{b.fail(r, err)}
		}
		waitErr := b.rcv.waitFor(B, ticks*per, 30*time.Second, 10*time.Minute)
		var lat []time.Duration
		missing := 0
		for k, t := range sent {
			for i := range per {
				if at, ok := b.rcv.arrival(tagID(k, i)); ok {
					lat = append(lat, at.Sub(t))
				} else {
					missing++
				}
			}
		}
		slices.Sort(lat)
		r.result = fmt.Sprintf("p50 %s, p99 %s, max %s (%d events", ms(pct(lat, 0.50)), ms(pct(lat, 0.99)), ms(pct(lat, 1)), len(lat))
		if missing > 0 {
			r.result += fmt.Sprintf(", %d MISSING", missing)
		}
		if left > 0 {
			r.result += fmt.Sprintf("; %d backlog left at the window's end)", left)
		} else {
			r.result += "; the backlog had DRAINED before the window ended: not measured under backlog, raise -backlog)"
		}
		r.verdict = verdict(missing == 0 && left > 0 && len(lat) > 0 && pct(lat, 0.99) < 20*time.Millisecond)
		drain.result = fmt.Sprintf("%s webhooks/s (posted in %.1f s: %s ev/s)", num(b.rcv.rate()), posting.Seconds(), num(float64(B)/posting.Seconds()))
		if waitErr != nil {
			drain = b.fail(drain, waitErr)
		}
		return []row{r, drain}
	}))
}

// withServe starts serve on storeURL, runs fn, stops serve and returns
// fn's rows with serve's peak RSS and CPU.
func (b *bench) withServe(name, storeURL string, src source, r row, fn func(base string) []row) []row {
	p, base, err := b.start(name, storeURL, src, false)
	if err != nil {
		return []row{b.fail(r, err)}
	}
	rows := fn(base)
	stopErr := p.stop(30 * time.Second)
	removeDB(storeURL)
	rss := p.rssMB()
	if rss > b.rssMax {
		b.rssMax, b.rssAt = rss, name
	}
	for i := range rows {
		rows[i].rss, rows[i].cpu = rss, p.cpu()
		if stopErr != nil {
			rows[i] = b.fail(rows[i], stopErr)
		}
	}
	return rows
}

// removeDB removes the SQLite file at storeURL (not a postgres:// URL):
// the next rows do not need it, and removed, its pages are not written
// back while they measure.
func removeDB(storeURL string) {
	if !strings.Contains(storeURL, "://") {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(storeURL + suffix)
		}
	}
}

// source is how the config file sets up the one source.
type source struct {
	webhooks bool   // on, to the receiver
	kind     string // the source's kind (issue 28); empty: none written, serve's default
	// dests is its destinations: list (the destinations rows).
	dests []destSpec
	// hook is the webhooks block's endpoint; empty: the receiver's.
	hook string
}

type endpointConfig struct {
	URL string `yaml:"url"`
}

// start runs serve (or the null collector) with a config file of one
// source on a free loopback port and waits until it is ready.
func (b *bench) start(name, storeURL string, src source, null bool) (*proc, string, error) {
	quiet()
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	file := filepath.Join(b.dir, name+".yaml")
	if err := writeConfig(file, addr, storeURL, src, b.rcv.url); err != nil {
		return nil, "", err
	}
	bin, args := b.opt.evfwd, []string{"serve", "--config", file}
	if b.opt.cpuprofile != "" {
		args = append(args, "--cpuprofile", filepath.Join(b.opt.cpuprofile, name+".prof"))
	}
	if null {
		if bin, err = os.Executable(); err != nil {
			return nil, "", err
		}
		args = []string{"-null-collector", "-config", file, "-cpuprofile", b.opt.cpuprofile}
	}
	p, err := b.procs.start(b.dir, name, bin, args, b.env())
	if err != nil {
		return nil, "", err
	}
	base := "http://" + addr
	if err := p.waitReady(base, 30*time.Second); err != nil {
		p.stop(5 * time.Second)
		return nil, "", err
	}
	return p, base, nil
}

// quiet writes back what earlier rows and the preload left in the page
// cache, so that a process measured next does not share the disk with
// their writeback.
func quiet() { syscall.Sync() }

// env is the bench's environment without EVFWD_* settings and with the
// config and state directories in the temp dir, so that only the config
// file configures the subprocesses.
func (b *bench) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EVFWD_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_CONFIG_HOME="+b.dir, "XDG_STATE_HOME="+b.dir)
}

func writeConfig(file, addr, storeURL string, src source, endpoint string) error {
	type webhooksConfig struct {
		Enabled      bool             `yaml:"enabled"`
		SharedSecret string           `yaml:"shared_secret"`
		Endpoints    []endpointConfig `yaml:"endpoints"`
	}
	type sourceConfig struct {
		Name         string         `yaml:"name"`
		WriteKey     string         `yaml:"write_key"`
		Kind         string         `yaml:"kind,omitempty"`
		Webhooks     webhooksConfig `yaml:"webhooks"`
		Destinations []destSpec     `yaml:"destinations,omitempty"`
	}
	if src.hook != "" {
		endpoint = src.hook
	}
	cfg := struct {
		Addr    string         `yaml:"addr"`
		Store   string         `yaml:"store,omitempty"`
		Sources []sourceConfig `yaml:"sources"`
	}{addr, storeURL, []sourceConfig{{"bench", writeKey, src.kind, webhooksConfig{src.webhooks, secret, []endpointConfig{{endpoint}}}, src.dests}}}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o600)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ratio formats got/ref and judges it against min.
func (b *bench) ratio(got, ref, min float64) (string, string) {
	if ref <= 0 {
		return "n/a", "FAIL (no reference)"
	}
	q := got / ref
	return fmt.Sprintf("%.2f×", q), verdict(q >= min)
}

// judge gives rows the ratio of rate to ref and fails them below min. A
// row that did not run (b.fail) is left as it is, and one that failed
// another target stays failed.
func (b *bench) judge(rows []row, rate, ref, min float64) {
	for i := range rows {
		if strings.HasPrefix(rows[i].verdict, "FAIL:") {
			continue
		}
		var v string
		if rows[i].ratio, v = b.ratio(rate, ref, min); v != "pass" || rows[i].verdict == "" {
			rows[i].verdict = v
		}
	}
}

// fail marks r failed by err: the row gets err's first line, stderr all
// of it.
func (b *bench) fail(r row, err error) row {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	fmt.Fprintf(os.Stderr, "%s: %v\n", r.measure, err)
	r.verdict = "FAIL: " + strings.ReplaceAll(msg, "|", "/")
	return r
}

func (b *bench) printAll(rows []row) {
	for _, r := range rows {
		b.print(r)
	}
}

func (b *bench) print(r row) {
	if strings.HasPrefix(r.verdict, "FAIL") {
		b.failed = true
	}
	if r.cpu > 0 && r.items > 0 {
		r.result += fmt.Sprintf(", %.0f µs CPU each", float64(r.cpu.Microseconds())/float64(r.items))
	}
	rss := "—"
	if r.rss > 0 {
		rss = fmt.Sprintf("%.0f MB", r.rss)
	}
	fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.measure, r.result, or(r.ratio, "—"), r.target, r.verdict, rss)
}

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// num formats n with thousands separators.
func num(n float64) string {
	s := strconv.FormatInt(int64(n+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ms formats d in milliseconds, or in seconds from 10 s up.
func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// pct is the q-quantile of sorted durations.
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

func roundUp(n int) int { return max(batchSize, (n+batchSize-1)/batchSize*batchSize) }

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return n
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return d
	}
	return def
}

func firstEnv(keys ...string) string {
	for _, k := range keys {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

func must[T any](v T, _ error) T { return v }
