package webhook

import (
	"net/http"
	"time"

	"github.com/evfwd/evfwd/pkg/signature"
)

// perAttempt signs what carries a timestamp, and so differs at each
// attempt: Destination.Scheme when not segment, and the Standard Webhooks
// headers of endpoints with Signing. A destination with neither has none,
// and its attempts pay nothing for it.
type perAttempt struct {
	scheme  signature.Scheme // "" when SharedSecret signs X-Signature
	secrets [][]byte
	id      string // webhook-id
}

// signsPerAttempt reports whether d signs anything per attempt.
func (d *Destination) signsPerAttempt() bool {
	if !d.segment() && d.SharedSecret != "" {
		return true
	}
	for i := range d.Endpoints {
		if d.Endpoints[i].Signing != "" {
			return true
		}
	}
	return false
}

// perAttempt returns what deliveries of the message id sign per attempt,
// or nil when nothing is.
func (d *Destination) perAttempt(id string) *perAttempt {
	if !d.signsPerAttempt() {
		return nil
	}
	ps := &perAttempt{id: signature.MessageID(id)}
	if !d.segment() && d.SharedSecret != "" {
		ps.scheme, ps.secrets = d.Scheme, d.secrets()
	}
	return ps
}

// sign adds the signature headers of one attempt to ep, started at.
func (ps *perAttempt) sign(h http.Header, ep *Endpoint, body []byte, at time.Time) error {
	p := signature.Params{Timestamp: at, ID: ps.id}
	if ps.scheme != "" {
		fs, err := signature.SignFields(ps.scheme, ps.secrets, body, p)
		if err != nil {
			return err
		}
		setFields(h, fs)
	}
	if ep.Signing == SigningStandard {
		fs, err := signature.SignFields(signature.Standard, [][]byte{[]byte(ep.SigningSecret)}, body, p)
		if err != nil {
			return err
		}
		setFields(h, fs)
	}
	return nil
}

// SignedFields are the headers SharedSecret signs body with for an attempt
// started at, as the sender sends them (X-Signature, or Scheme's lines
// with the webhook-id of the message id); none without a secret. For a
// caller to show what an attempt carries.
func (d *Destination) SignedFields(body []byte, id string, at time.Time) []signature.Field {
	switch {
	case d.SharedSecret == "":
		return nil
	case d.segment():
		return []signature.Field{{Name: signature.Header, Value: signature.Sign([]byte(d.SharedSecret), body)}}
	}
	fs, _ := signature.SignFields(d.Scheme, d.secrets(), body, signature.Params{Timestamp: at, ID: signature.MessageID(id)})
	return fs
}

// setFields sets the header lines, in one backing array.
func setFields(h http.Header, fs []signature.Field) {
	vals := make([]string, len(fs))
	for i, f := range fs {
		vals[i] = f.Value
		h[f.Name] = vals[i : i+1 : i+1]
	}
}
