// Package webhook is the webhook destination's sender: it turns one
// collected message into the body of spec 2.1 (AppendBody; pkg/queued
// does it once, on ingest, for what the store keeps), delivers it to a
// destination's endpoints (at most five, tried in order, the first 2xx
// ends delivery), classifies every attempt, and decides when a failed
// delivery is tried again (Policy).
//
// It is usable without the CLI: `evfwd trigger` drives it once from the
// shell and the forwarder of `evfwd serve` drives it from the store.
package webhook
