// Package loadgen load-tests a webhook endpoint the way the webhook
// destination calls it: one message, sent Count times by Concurrency
// workers through a webhook.Sender, each copy with a fresh messageId and a
// single delivery (no retries). Run reports what came back: deliveries and
// failures, attempts by HTTP status or transport error class, throughput,
// and every latency in a Histogram that gives exact percentiles and
// bucket counts.
//
// `evfwd trigger --count N` is this package behind flags; the package
// leaves printing to its caller.
package loadgen
