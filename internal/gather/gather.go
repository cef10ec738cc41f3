// Package gather is group commit's gathering, written once for every loop
// that applies many callers' requests as one (SQLite's writer, PostgreSQL's
// ingesters and completer, the forwarder's completer): take one request,
// then whatever else is queued, up to a bound, and, where asked, wait a
// moment for more; hand the group on. Answering each request is the
// caller's, since what an answer is differs (one error for all, one per
// request, none).
package gather

import "time"

// Gatherer gathers the requests queued on In into groups.
type Gatherer[T any] struct {
	In <-chan T
	// Stop ends Run once the groups of what In holds then are applied, so
	// that every request queued before it closed is answered (the caller
	// sees to it that none is queued after). Nil: Run ends when In is
	// closed.
	Stop <-chan struct{}
	// Max bounds a group's weight; its first request is taken whatever it
	// weighs.
	Max int
	// Weight is a request's part of Max; nil: 1 each.
	Weight func(T) int
	// Ends says that a request closes its group: none is taken after it.
	// Nil: none does.
	Ends func(T) bool
	// Linger, above 0, lets a group smaller than the last one wait for
	// more, up to half the last one's apply and at most Linger: callers a
	// group answers come back over the moments after it, and the first of
	// them would otherwise pay for a group of its own (a commit, an fsync)
	// while the others queue for the next.
	Linger time.Duration
	// Hurry says that a request may not wait: a group that holds one (or
	// one that Ends it) does not linger. Nil: none hurries.
	Hurry func(T) bool
}

// Run hands each group to apply, in order, until Stop or In closes. apply
// must not keep the group: its slice is reused.
func (g *Gatherer[T]) Run(apply func(group []T)) {
	var (
		group []T
		last  struct {
			weight int // of the requests that may wait
			took   time.Duration
		}
		timer *time.Timer
	)
	for {
		first, ok := g.next()
		if !ok {
			return
		}
		group = g.More(append(group[:0], first))
		if g.Linger > 0 {
			if timer == nil {
				timer = time.NewTimer(time.Hour)
				timer.Stop()
			}
			group = g.linger(group, last.weight, min(last.took/2, g.Linger), timer)
		}
		start := time.Now()
		apply(group)
		last.took = time.Since(start)
		last.weight = 0
		for _, x := range group {
			if !g.hurries(x) {
				last.weight += g.weight(x)
			}
		}
	}
}

// next waits for a request; once Stop is closed, it takes only one already
// queued. It reports false when there is none to take.
func (g *Gatherer[T]) next() (T, bool) {
	select {
	case x, ok := <-g.In:
		return x, ok
	case <-g.Stop:
		select {
		case x, ok := <-g.In:
			return x, ok
		default:
			var zero T
			return zero, false
		}
	}
}

// More appends to group, which holds at least one request, what In holds
// now, without waiting, until the group weighs Max or a request Ends it.
func (g *Gatherer[T]) More(group []T) []T {
	w, _ := g.state(group)
	for w < g.Max && !g.ends(group[len(group)-1]) {
		select {
		case x, ok := <-g.In:
			if !ok {
				return group
			}
			group = append(group, x)
			w += g.weight(x)
		default:
			return group
		}
	}
	return group
}

// linger waits up to d (on timer) for more while group weighs less than
// want, unless a request in it hurries, or until Stop closes.
func (g *Gatherer[T]) linger(group []T, want int, d time.Duration, timer *time.Timer) []T {
	want = min(want, g.Max)
	if w, hurry := g.state(group); w >= want || hurry || d <= 0 {
		return group
	}
	timer.Reset(d)
	defer timer.Stop() // no stale tick is left in timer.C (Go 1.23 timers)
	for {
		select {
		case x, ok := <-g.In:
			if !ok {
				return group
			}
			group = g.More(append(group, x))
			if w, hurry := g.state(group); w >= want || hurry {
				return group
			}
		case <-timer.C:
			return group
		case <-g.Stop:
			return group
		}
	}
}

// state reports group's weight and whether a request in it hurries.
func (g *Gatherer[T]) state(group []T) (w int, hurry bool) {
	for _, x := range group {
		w += g.weight(x)
		hurry = hurry || g.hurries(x)
	}
	return w, hurry
}

func (g *Gatherer[T]) weight(x T) int {
	if g.Weight == nil {
		return 1
	}
	return g.Weight(x)
}

func (g *Gatherer[T]) ends(x T) bool { return g.Ends != nil && g.Ends(x) }

// hurries reports whether x may not wait: it hurries, or ends its group.
func (g *Gatherer[T]) hurries(x T) bool { return g.Hurry != nil && g.Hurry(x) || g.ends(x) }
