package store

import "time"

// DefaultRetention is how long finished messages are kept unless the
// operator says otherwise: a week, time enough to look into what failed.
const DefaultRetention = 7 * 24 * time.Hour

// PruneStep is the number of messages one prune step examines: a step is
// one short write transaction, so ingest and forwarding wait at most one
// step for the writer.
const PruneStep = 500

// Pruned is what a prune removed.
type Pruned struct {
	Messages   int64 `json:"messages"`
	Deliveries int64 `json:"deliveries"`
	Attempts   int64 `json:"attempts"`
}

// Add adds o to p.
func (p *Pruned) Add(o Pruned) {
	p.Messages += o.Messages
	p.Deliveries += o.Deliveries
	p.Attempts += o.Attempts
}
