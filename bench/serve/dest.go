//go:build linux

package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The destinations rows: a source's `destinations:` list (pkg/destination)
// as serve runs it, each row against a reference measured in the same run.

// destEvents are the event names the ingest rows' events draw in turn,
// ten of each in every batch of 100 (Segment's e-commerce spec).
var destEvents = []string{
	"Order Completed", "Product Viewed", "Product Added", "Checkout Started", "Cart Viewed",
	"Signed Up", "Coupon Applied", "Product Removed", "Payment Info Entered", "Order Refunded",
}

// destSubscription is the condition of the i-th of the ten destinations:
// its own event; with overlap, an even one takes the next event too, so an
// event with an odd index goes to two destinations: 1.5 deliveries an
// event on average.
func destSubscription(i int, overlap bool) string {
	if overlap && i%2 == 0 {
		return fmt.Sprintf(`type = "track" and (event = %q or event = %q)`, destEvents[i], destEvents[i+1])
	}
	return fmt.Sprintf(`type = "track" and event = %q`, destEvents[i])
}

// destSpec is one entry of a source's destinations: list in the config
// file.
type destSpec struct {
	Name         string           `yaml:"name"`
	Endpoints    []endpointConfig `yaml:"endpoints"`
	SharedSecret string           `yaml:"shared_secret"`
	Subscribe    string           `yaml:"subscribe,omitempty"`
	Mapping      *destMapping     `yaml:"mapping,omitempty"`
	Batch        *batchSpec       `yaml:"batch,omitempty"`
	RateLimit    *rateSpec        `yaml:"rate_limit,omitempty"`
	Paused       bool             `yaml:"paused,omitempty"`
}

type batchSpec struct {
	Size int `yaml:"size"`
}

type rateSpec struct {
	PerSecond float64 `yaml:"per_second"`
}

// destMapping is the ten destinations' mapping-kit object, five fields in
// this order. It keeps the messageId, so the receiver can count what each
// destination got.
type destMapping struct {
	MessageID pathRef `yaml:"messageId"`
	Event     pathRef `yaml:"event"`
	UserID    pathRef `yaml:"userId"`
	Total     pathRef `yaml:"total"`
	Currency  pathRef `yaml:"currency"`
}

type pathRef struct {
	Path string `yaml:"@path"`
}

var fiveFields = &destMapping{
	MessageID: pathRef{"$.messageId"},
	Event:     pathRef{"$.event"},
	UserID:    pathRef{"$.userId"},
	Total:     pathRef{"$.properties.total"},
	Currency:  pathRef{"$.properties.currency"},
}

// dest is a destination named name posting to the destinations receiver.
func (b *bench) dest(name string) destSpec {
	return destSpec{Name: name, Endpoints: []endpointConfig{{b.drcv.endpoint(name)}}, SharedSecret: secret}
}

// tenDests are the ingest row's ten destinations, each with its
// subscription and the five-field mapping.
func (b *bench) tenDests(paused, overlap bool) []destSpec {
	ds := make([]destSpec, len(destEvents))
	for i := range ds {
		ds[i] = b.dest(fmt.Sprintf("dest-%d", i))
		ds[i].Subscribe, ds[i].Mapping, ds[i].Paused = destSubscription(i, overlap), fiveFields, paused
	}
	return ds
}

// destRun is one serve run of a destinations row.
type destRun struct {
	rate       float64 // events/s
	items      int     // events the run's serve handled
	deliveries int64   // the store held once serve exited; -1: not counted
	cpu        time.Duration
	rss        float64
	note       string // what else the run saw
	fail       *row   // the run's row when it failed
	// wrong is what the run measured that makes its rate meaningless
	// (e.g. the subscriptions routed otherwise): the row shows the rate
	// and fails.
	wrong string
}

// destRunOnce runs serve with src on the SQLite file of its name (a
// backlog may be there already) and measures with fn (its rate, items
// and note); once serve has exited it counts the deliveries stored, and
// removes the file.
func (b *bench) destRunOnce(name string, src source, fn func(base string, run *destRun) error) destRun {
	run := destRun{deliveries: -1}
	db := b.sqlite(name)
	defer removeDB(db)
	failed := func(err error) destRun {
		r := b.fail(row{measure: "destinations run " + name}, err)
		run.fail = &r
		return run
	}
	p, base, err := b.start(name, db, src, false)
	if err != nil {
		return failed(err)
	}
	err = fn(base, &run)
	if stopErr := p.stop(30 * time.Second); err == nil {
		err = stopErr
	}
	run.cpu, run.rss = p.cpu(), p.rssMB()
	if run.rss > b.rssMax {
		b.rssMax, b.rssAt = run.rss, name
	}
	if err == nil {
		run.deliveries, err = countDeliveries(b.ctx, db)
	}
	if err != nil {
		return failed(err)
	}
	return run
}

// destinationRows runs the destinations group: ingest into ten
// destinations, batches and the rate limit.
func (b *bench) destinationRows() {
	var err error
	if b.drcv, err = startDestReceiver(secret); err != nil {
		b.print(b.fail(row{measure: "destinations"}, err))
		return
	}
	defer func() { b.drcv.close(); b.drcv = nil }()
	b.destIngestRow(true, false)
	b.destIngestRow(true, true)
	b.destIngestRow(false, true)
	b.destBatchRow()
	b.destRateRows()
}

// destIngestRow measures ingest (8 clients, batches of 100, durable) into
// a source with ten destinations, each with a subscription and a mapping,
// over the same ingest into a source with one plain destination, the
// configurations interleaved (plain, ten, plain, ten ...) and the ratio
// over their means.
//
// paused: every destination is paused, in both configurations, so the
// rate is the collector's and the store's alone: routing each message
// through ten conditions and storing its 1–2 deliveries, against storing
// one. The plain destination is then a destinations: entry without
// condition or mapping (the webhooks block cannot be paused in the file);
// the router treats both alike. Mappings run when a delivery is sent, so
// paused, they cost nothing here.
//
// Not paused: the ten forward (mapped) and the plain one is the webhooks
// block, all to the receiver, which accepts everything; forwarding shares
// the cores with ingest, and the ten send 1.5 deliveries an event against
// the plain one's 1, so this variant is information, not the target.
//
// Without overlap each event matches exactly one of the ten, so both
// sides store one delivery an event and the row measures routing (the
// target); with it, 1.5, and the row says what the extra deliveries cost.
func (b *bench) destIngestRow(paused, overlap bool) {
	n := b.opt.events
	per, matches := 1.0, "exactly 1 of them"
	if overlap {
		per, matches = 1.5, "1 or 2 of them, 1.5 on average"
	}
	variant := "forwarding"
	plainSrc := source{webhooks: true, hook: b.drcv.endpoint("webhooks")}
	if paused {
		variant = "paused"
		plain := b.dest("plain")
		plain.Paused = true
		plainSrc = source{dests: []destSpec{plain}}
	}
	tenSrc := source{dests: b.tenDests(paused, overlap)}
	ingest := func(base string, run *destRun) error {
		b.drcv.reset(nil, nil)
		c := newClient(base)
		defer c.close()
		c.events = destEvents
		elapsed, err := c.postAll(b.ctx, clients, n, "i")
		if err != nil {
			return err
		}
		run.rate, run.items = float64(n)/elapsed.Seconds(), n
		if !paused {
			run.note = num(float64(b.drcv.total()))
		}
		return nil
	}
	// routed checks that the run stored the deliveries its destinations'
	// subscriptions call for: per events an event.
	routed := func(run destRun, name string, per float64) destRun {
		if want := int64(per * float64(n)); run.fail == nil && run.deliveries != want {
			run.wrong = fmt.Sprintf("%s stored %d deliveries (%.2f an event), want %d (%.1f an event): the subscriptions do not route as designed",
				name, run.deliveries, float64(run.deliveries)/float64(n), want, per)
		}
		return run
	}
	var plain, ten []destRun
	for round := range max(1, b.opt.destRounds) {
		plain = append(plain, routed(b.destRunOnce(fmt.Sprintf("dest-ingest-%s-plain-%d", variant, round), plainSrc, ingest), "plain", 1))
		ten = append(ten, routed(b.destRunOnce(fmt.Sprintf("dest-ingest-%s-ten-%d", variant, round), tenSrc, ingest), "ten", per))
	}
	r := row{
		measure: fmt.Sprintf("ingest, SQLite, %d clients, %d events, durable, into 10 destinations (each an FQL subscription on the event name "+
			"and a 5-field mapping; an event matches %s) over 1 plain destination; destinations %s", clients, n, matches, variant),
		target: "≥ 0.8× plain", verdict: "info",
	}
	if overlap {
		r.target = "—"
	}
	if !paused {
		r.measure += " (the plain one is the webhooks block; the receiver takes everything)"
		r.target = "—"
	}
	b.destSummary(r, "ten", ten, "plain", plain, "events/s", 0.8, paused && !overlap,
		func(d destRun) string {
			s := fmt.Sprintf("%.2f deliveries stored an event", float64(d.deliveries)/float64(n))
			if d.note != "" {
				s += ", " + d.note + " forwarded meanwhile"
			}
			return s
		})
}

// destBatchRow measures forwarding a stored backlog by a destination with
// batch {size: 100} over one that sends an event a request, the same
// receiver, interleaved; the receiver checks that every event arrived
// exactly once.
func (b *bench) destBatchRow() {
	b.destBatchRowAt(0)
	b.destBatchRowAt(10 * time.Millisecond)
}

// destBatchRowAt is destBatchRow with a receiver that answers after
// latency: 0 (in this process, where the store's work per delivery is what
// bounds both), or a network's (where requests in flight bound both).
func (b *bench) destBatchRowAt(latency time.Duration) {
	b.drcv.latency.Store(int64(latency))
	defer b.drcv.latency.Store(0)
	n := b.opt.events
	if latency > 0 {
		n = min(n, 50_000)
	}
	const size = 100
	forward := func(name string, batch bool) destRun {
		d := b.dest(name)
		if batch {
			d.Batch = &batchSpec{Size: size}
		}
		run := fmt.Sprintf("dest-forward-%s", name)
		if err := preloadFor(b.ctx, b.sqlite(run), n, name); err != nil {
			r := b.fail(row{measure: "preload " + run}, err)
			return destRun{fail: &r}
		}
		b.drcv.reset(nil, []string{name})
		res := b.destRunOnce(run, source{dests: []destSpec{d}}, func(base string, run *destRun) error {
			if err := b.drcv.waitItems(name, n, 30*time.Second, 10*time.Minute); err != nil {
				return err
			}
			l := b.drcv.snapshot(name)
			run.rate, run.items = l.rate(), n
			run.note = num(float64(l.requests)) + " requests"
			return nil
		})
		// Checked once serve has exited: nothing can arrive twice later.
		if err := b.drcv.exactlyOnce(name, n); err != nil && res.fail == nil {
			r := b.fail(row{measure: "forward " + name}, err)
			res.fail = &r
		}
		return res
	}
	var single, batch []destRun
	for round := range max(1, b.opt.destRounds) {
		ms := latency.Milliseconds()
		single = append(single, forward(fmt.Sprintf("single%d-%dms", round, ms), false))
		batch = append(batch, forward(fmt.Sprintf("batch%d-%dms", round, ms), true))
	}
	r := row{
		measure: fmt.Sprintf("batch forward, SQLite, a backlog of %d events: a destination with batch {size: %d} over one sending an event a request, "+
			"the same receiver answering in %v, every event exactly once", n, size, latency),
		target: "≥ 5.0× single",
	}
	b.destSummary(r, "batch", batch, "single", single, "events/s", 5, true, func(d destRun) string { return d.note })
}

// destSummary prints the row of a destinations comparison: got's runs
// over ref's, the ratio of their means judged against min (when judge).
func (b *bench) destSummary(r row, gotName string, got []destRun, refName string, ref []destRun, unit string, min float64, judge bool, note func(destRun) string) {
	wrong := ""
	for _, d := range slices.Concat(got, ref) {
		r.rss = max(r.rss, d.rss)
		if d.fail != nil {
			r.verdict = d.fail.verdict
			r.result = d.fail.measure
			b.print(r)
			return
		}
		wrong = or(wrong, d.wrong)
	}
	describe := func(name string, runs []destRun) (string, float64) {
		var rates, notes []string
		var sum float64
		var cpu time.Duration
		items := 0
		for _, d := range runs {
			rates = append(rates, num(d.rate))
			if s := note(d); s != "" {
				notes = append(notes, s)
			}
			sum += d.rate
			cpu += d.cpu
			items += d.items
		}
		s := fmt.Sprintf("%s %s %s", name, strings.Join(rates, " / "), unit)
		if items > 0 && cpu > 0 {
			s += fmt.Sprintf(", %.1f µs CPU each", float64(cpu.Microseconds())/float64(items))
		}
		if len(notes) > 0 {
			s += " (" + strings.Join(notes, " / ") + ")"
		}
		return s, sum / float64(len(runs))
	}
	g, gm := describe(gotName, got)
	f, fm := describe(refName, ref)
	r.result = g + "; " + f
	var v string
	r.ratio, v = b.ratio(gm, fm, min)
	if judge {
		r.verdict = v
	}
	if wrong != "" {
		r = b.fail(r, errors.New(wrong))
	}
	b.print(r)
}

// destRateRows runs one source with two destinations, one with
// rate_limit {per_second: 50}, the other unlimited, while a client posts
// rateInput events/s for rateWindow; it reports the limited one's request
// rate over the window (requests from its first to its last arrival, and
// the most in any 1 s), and the unlimited one's events/s against the
// input: it must keep up.
func (b *bench) destRateRows() {
	const limit = 50.0
	in, window := max(1, b.opt.rateInput), b.opt.rateWindow
	per := max(1, in/100) // events a post, a post every 10 ms at 100 ev/s or more
	every := time.Duration(float64(time.Second) * float64(per) / float64(in))
	ticks := max(1, int(window/every))
	posted := ticks * per
	lim := b.dest("limited")
	lim.RateLimit = &rateSpec{PerSecond: limit}
	lr := row{
		measure: fmt.Sprintf("rate limit, SQLite: a destination with rate_limit {per_second: %.0f} while %d events/s flow for %s "+
			"(requests from its first to its last arrival in the window, and the most in any 1 s)", limit, in, window),
		target: "50/s ± 5%, ≤ 52 in any 1 s",
	}
	ur := row{
		measure: "… the unlimited destination of the same source, the same events (its events/s from first to last arrival, " +
			"over the rate posted; every event exactly once)",
		target: "≥ 0.95× input, caught up ≤ 5 s after the last post",
	}
	b.drcv.reset([]string{"limited"}, []string{"unlimited"})
	var limLog, unlLog laneLog
	var sent []time.Time
	var end time.Time
	var catchErr error
	rows := b.withServe("dest-rate", b.sqlite("dest-rate"), source{dests: []destSpec{lim, b.dest("unlimited")}}, lr, func(base string) []row {
		c := newClient(base)
		defer c.close()
		var err error
		sent, err = c.paced(b.ctx, "r", ticks, per, every)
		end = time.Now()
		if err != nil {
			return []row{b.fail(lr, err), b.fail(ur, err)}
		}
		limLog = b.drcv.snapshot("limited")
		catchErr = b.drcv.waitItems("unlimited", posted, 10*time.Second, 30*time.Second)
		unlLog = b.drcv.snapshot("unlimited")
		return []row{lr, ur}
	})
	if rows[0].rss > b.rssMax {
		b.rssMax, b.rssAt = rows[0].rss, "dest-rate"
	}
	if len(rows) == 1 || strings.HasPrefix(rows[0].verdict, "FAIL") {
		b.printAll(rows)
		return
	}
	lr, ur = rows[0], rows[1]
	lr.cpu, ur.cpu = 0, 0 // one process for both rows: its CPU a request means little here

	// The limited destination within the window.
	times := slices.DeleteFunc(limLog.times, func(t time.Time) bool { return t.After(end) })
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	if len(times) < 2 {
		lr = b.fail(lr, fmt.Errorf("the limited destination got %d requests in the window", len(times)))
	} else {
		span := times[len(times)-1].Sub(times[0])
		rate := float64(len(times)-1) / span.Seconds()
		most := 0
		for i, j := 0, 0; i < len(times); i++ {
			for j < len(times) && times[j].Sub(times[i]) < time.Second {
				j++
			}
			most = max(most, j-i)
		}
		lr.result = fmt.Sprintf("%.1f requests/s (%d over %.1f s), at most %d in any 1 s; %d events waiting at the window's end",
			rate, len(times), span.Seconds(), most, posted-limLog.items)
		lr.ratio = fmt.Sprintf("%.3f× the limit", rate/limit)
		switch {
		case math.Abs(rate-limit) > 0.05*limit:
			lr.verdict = fmt.Sprintf("FAIL: %.1f/s", rate)
		case float64(most) > 1.05*limit:
			lr.verdict = fmt.Sprintf("FAIL: %d in 1 s", most)
		default:
			lr.verdict = "pass"
		}
	}

	// The unlimited one: every event, at the input's pace.
	input := float64(posted) / end.Sub(sent[0]).Seconds()
	caughtUp := unlLog.last.Sub(sent[len(sent)-1])
	ur.result = fmt.Sprintf("%s events/s in %s requests, %s events/s posted; the last arrived %s after the last post",
		num(unlLog.rate()), num(float64(unlLog.requests)), num(input), ms(caughtUp))
	err := catchErr
	if err == nil {
		err = b.drcv.exactlyOnce("unlimited", posted)
	}
	if err != nil {
		ur = b.fail(ur, err)
	} else {
		var v string
		ur.ratio, v = b.ratio(unlLog.rate(), input, 0.95)
		ur.verdict = verdict(v == "pass" && caughtUp <= 5*time.Second)
	}
	b.printAll([]row{lr, ur})
}
