package inspector

import (
	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/store"
)

// The lists the page would otherwise spell itself come from the Go values
// that define them, in GET /api/session's "meta" (docs/INSPECTOR.md), so
// that the page cannot drift from the server: a status added to
// store.Statuses shows in serve's filter with no change to ui/.

// The events of GET /api/events.
const (
	eventRequest  = "request"  // listen: a request arrived
	eventAttempt  = "attempt"  // serve: an attempt finished
	eventDelivery = "delivery" // serve: a delivery's new status is on record
	eventEndpoint = "endpoint" // serve: an endpoint's breaker changed state
	eventStored   = "stored"   // serve: messages were stored
	// serve: a destination was paused or resumed from the inspector
	eventDestination = "destination"
)

// noType is what GET /api/requests?type= and the page's type filter call
// a request without a message type.
const noType = "none"

// listenMeta is the "meta" of listen's GET /api/session.
type listenMeta struct {
	// Verdicts are a request's signature verdicts, the values of
	// GET /api/requests?verdict=.
	Verdicts []receiver.SigVerdict `json:"verdicts"`
	// Types are the message types, in the order the page lists them.
	Types  []message.Type `json:"types"`
	NoType string         `json:"noType"`
	// Events are the events of GET /api/events.
	Events []string `json:"events"`
}

func newListenMeta() listenMeta {
	return listenMeta{
		Verdicts: []receiver.SigVerdict{receiver.SigValid, receiver.SigInvalid, receiver.SigUnchecked},
		Types:    message.Types, NoType: noType, Events: []string{eventRequest},
	}
}

// serveMeta is the "meta" of serve's GET /api/session.
type serveMeta struct {
	// Statuses are the delivery statuses in lifecycle order
	// (store.Statuses), the values of GET /api/deliveries?status=.
	Statuses []store.Status `json:"statuses"`
	// Retryable are the statuses POST /api/retry takes.
	Retryable []store.Status `json:"retryable"`
	// Resendable are the statuses POST /api/resend sends again
	// (admin.Resendable).
	Resendable []store.Status `json:"resendable"`
	// Series are the counts of a minute of GET /api/stats, an
	// endpoint's and a destination's alike, stacked from the bottom.
	Series []string `json:"series"`
	Events []string `json:"events"`
}

func newServeMeta() serveMeta {
	return serveMeta{
		Statuses: store.Statuses, Retryable: retryable(), Resendable: admin.Resendable(), Series: minuteSeries(),
		Events: []string{eventAttempt, eventDelivery, eventEndpoint, eventStored, eventDestination},
	}
}

// retryable are the statuses a retry makes pending again: the final
// failures, not a cancelled deletion.
func retryable() []store.Status { return []store.Status{store.Failed, store.Dead} }
