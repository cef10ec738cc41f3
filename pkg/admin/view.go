package admin

import (
	"encoding/json"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// DeliveryView is a delivery as `evfwd deliveries list -o json` prints it
// and the inspector of `evfwd serve --ui` answers it; with its message and
// attempt records (ViewDetail) it is what `evfwd deliveries show -o json`
// prints.
type DeliveryView struct {
	ID           int64           `json:"id"`
	Source       string          `json:"source"`
	Destination  string          `json:"destination"`
	MessageID    string          `json:"messageId"`
	Type         string          `json:"type"`
	UserID       string          `json:"userId,omitempty"`
	Status       store.Status    `json:"status"`
	Attempts     int             `json:"attempts"`
	FirstAttempt string          `json:"firstAttempt,omitempty"`
	NextAttempt  string          `json:"nextAttempt,omitempty"`
	LastError    string          `json:"lastError,omitempty"`
	CreatedAt    string          `json:"createdAt"`
	UpdatedAt    string          `json:"updatedAt"`
	Message      json.RawMessage `json:"message,omitempty"`
	Records      []AttemptView   `json:"attemptRecords,omitempty"`
}

// AttemptView is one recorded attempt of a DeliveryView.
type AttemptView struct {
	Delivery  int    `json:"delivery"`
	Endpoint  int    `json:"endpoint"`
	URL       string `json:"url"`
	Start     string `json:"start"`
	LatencyMs int64  `json:"latencyMs"`
	Status    int    `json:"status,omitempty"`
	Class     string `json:"class"`
	Error     string `json:"error,omitempty"`
	Outcome   string `json:"outcome"`
	Excerpt   string `json:"bodyExcerpt,omitempty"`
}

// EndpointView is an endpoint's health as `evfwd deliveries endpoints -o
// json` prints it.
type EndpointView struct {
	Source    string       `json:"source"`
	URL       string       `json:"url"`
	State     store.Health `json:"state"`
	Failures  int          `json:"failures"`
	Since     string       `json:"since,omitempty"`
	NextProbe string       `json:"nextProbe,omitempty"`
	LastError string       `json:"lastError,omitempty"`
	Node      string       `json:"node"`
	UpdatedAt string       `json:"updatedAt"`
}

// WireTime is t in the wire form (RFC 3339, milliseconds, UTC); "" for
// the zero time.
func WireTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return message.FormatTime(t)
}

// ViewDelivery is d without its attempt records; its message is in it
// when d has a body (Get) that is JSON.
func ViewDelivery(d store.Delivery) DeliveryView {
	j := DeliveryView{ID: d.ID, Source: d.Source, Destination: d.Destination, MessageID: d.MessageID, Type: d.Type,
		UserID: d.UserID, Status: d.Status, Attempts: d.Attempts, FirstAttempt: WireTime(d.FirstAttempt),
		LastError: d.LastError, CreatedAt: WireTime(d.CreatedAt), UpdatedAt: WireTime(d.UpdatedAt)}
	if d.Status == store.Pending {
		j.NextAttempt = WireTime(d.NextAttempt)
	}
	if b := SentBody(d); json.Valid(b) {
		j.Message = b
	}
	return j
}

// ViewDetail is d with its message and every attempt, oldest first.
func ViewDetail(d *store.Detail) DeliveryView {
	j := ViewDelivery(d.Delivery)
	for _, a := range d.Records {
		// A store written before endpoints were recorded by their display
		// may hold a URL's credentials: they are never shown.
		j.Records = append(j.Records, AttemptView{Delivery: a.Delivery, Endpoint: a.Endpoint, URL: webhook.RedactURL(a.URL),
			Start: WireTime(a.Start), LatencyMs: a.Latency.Milliseconds(), Status: a.Status, Class: a.Class,
			Error: a.Error, Outcome: a.Outcome, Excerpt: string(a.Excerpt)})
	}
	return j
}

// ViewEndpoint is e as EndpointView.
func ViewEndpoint(e store.EndpointState) EndpointView {
	return EndpointView{Source: e.Source, URL: webhook.RedactURL(e.URL), State: e.State, Failures: e.Failures,
		Since: WireTime(e.Since), NextProbe: WireTime(e.NextProbe), LastError: e.LastError, Node: e.Node,
		UpdatedAt: WireTime(e.UpdatedAt)}
}

// SentBody is the body d's attempts post, whichever form the store keeps
// it in (a store from an older evfwd keeps the collected message); a
// purged or unusable body is given as stored.
func SentBody(d store.Delivery) []byte {
	if b, err := queued.Body(d.Body, d.Form); err == nil {
		return b
	}
	return d.Body
}
