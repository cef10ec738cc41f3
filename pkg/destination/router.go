package destination

import (
	"slices"

	"github.com/evfwd/evfwd/pkg/fql"
)

// Router decides which of one source's destinations take a message. It is
// safe for concurrent use.
type Router struct {
	names []string
	// set decides every condition in one pass over the message; nil when
	// no destination has one (each takes every message).
	set *fql.Set
}

// NewRouter is the router of one source's destinations, in their order.
func NewRouter(ds []*Destination) *Router {
	r := &Router{names: make([]string, len(ds))}
	conds := make([]*fql.Condition, len(ds))
	any := false
	for i, d := range ds {
		r.names[i] = d.Name
		conds[i] = d.Subscribe
		any = any || d.Subscribe != nil
	}
	if any {
		r.set = fql.NewSet(conds)
	}
	return r
}

// Names are the destinations' names, in order.
func (r *Router) Names() []string { return r.names }

// Route returns the names of the destinations whose condition body (a
// message's webhook body) matches. When every destination takes it, the
// result is Names itself: callers must not change it.
func (r *Router) Route(body []byte) []string {
	if r.set == nil || len(r.names) == 0 {
		return r.names
	}
	var buf [16]bool
	out := buf[:0]
	if len(r.names) > len(buf) {
		out = make([]bool, 0, len(r.names))
	}
	out = out[:len(r.names)]
	r.set.Decide(body, out)
	if !slices.Contains(out, false) {
		return r.names
	}
	var on []string
	for i, ok := range out {
		if ok {
			on = append(on, r.names[i])
		}
	}
	return on
}
