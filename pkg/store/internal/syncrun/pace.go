package syncrun

import (
	"sync/atomic"
	"time"
)

// syncPage is the users read per diff page, in one query outside any
// step (SQLite: from the read pool, no writer held). A diff costs the
// same at page sizes from 500 to 4000 (docs/PERFORMANCE.md, "Figures behind the code"), so the smaller
// of the two sizes the stores used: a page's read holds a snapshot (on
// SQLite, one a checkpoint cannot pass) half as long.
const syncPage = 1000

// stepTarget is the time a paced step aims at: on SQLite an ingest that
// arrives during a step waits about that long for the writer, plus the
// step's share of the group commit.
const stepTarget = 15 * time.Millisecond

// Sizes says how big each kind of step is: rows per transaction.
type Sizes struct {
	stage, outbox, move, drop bound
}

// bound is where a pacer starts and the range it keeps to; least == most
// makes a fixed size.
type bound struct{ start, least, most int }

// Paced sizes each step to about stepTarget, following the time the
// steps take: for an engine with one writer (SQLite), whose steps make
// every ingest wait.
func Paced() Sizes {
	return Sizes{
		stage:  bound{2000, 100, 10_000}, // list rows staged
		outbox: bound{1000, 50, 5000},    // outbox rows written (or discarded)
		move:   bound{500, 50, 5000},     // outbox rows moved into messages and deliveries
		drop:   bound{2000, 100, 20_000}, // rows of a replaced or abandoned list deleted
	}
}

// Fixed steps, for an engine whose concurrent writers wait only on the
// rows a step locks (PostgreSQL): a step's size bounds how long its
// transaction holds them and how big it grows, not anyone's turn.
func Fixed() Sizes {
	return Sizes{
		stage:  bound{2000, 2000, 2000},
		outbox: bound{1000, 1000, 1000},
		move:   bound{1000, 1000, 1000},
		drop:   bound{5000, 5000, 5000},
	}
}

// Steps makes every step rows rows, for tests: a list of a few hundred
// users then takes several steps of each kind, as a large list does at
// the sizes above.
func Steps(rows int) Sizes {
	b := bound{rows, rows, rows}
	return Sizes{stage: b, outbox: b, move: b, drop: b}
}

// StepRows is a store's test override of its step sizes (SetSyncSteps).
type StepRows struct{ rows atomic.Int64 }

// Set makes every step rows rows; 0 restores the store's own sizes.
func (o *StepRows) Set(rows int) { o.rows.Store(int64(rows)) }

// Or returns the sizes to use: Steps of the override, else own.
func (o *StepRows) Or(own Sizes) Sizes {
	if n := o.rows.Load(); n > 0 {
		return Steps(int(n))
	}
	return own
}

// A pacer sizes the steps of one kind so that each takes about
// stepTarget, however fast the machine is at the moment: it starts at
// start rows and follows the time the steps take, within [least, most].
type pacer struct {
	n, least, most int
}

func newPacer(b bound) *pacer { return &pacer{b.start, b.least, b.most} }

func (p *pacer) size() int { return p.n }

// took adjusts the size after a step of rows rows took d.
func (p *pacer) took(rows int, d time.Duration) {
	if rows < p.n/2 {
		return // a short last step says little
	}
	// Halfway to the size that would have taken stepTarget.
	want := float64(rows) * float64(stepTarget) / float64(max(d, time.Microsecond))
	p.n = min(max(int((float64(p.n)+want)/2), p.least), p.most)
}

// pacers are those of one sync (or recovery), one per kind of step.
type pacers struct {
	stage, outbox, move, drop *pacer
}

func (s Sizes) pacers() pacers {
	return pacers{newPacer(s.stage), newPacer(s.outbox), newPacer(s.move), newPacer(s.drop)}
}
