package webhook

import (
	"net/http"
	"time"
)

// Request is what one attempt to an endpoint would send, body aside.
type Request struct {
	Method string
	// Endpoint is the endpoint's position in the destination; URL is its
	// URL as configured (it may carry a credential: show Display).
	Endpoint int
	URL      string
	Display  string
	Header   http.Header
}

// Preview returns, one per endpoint in order, the requests a delivery of
// body with this id (as DeliverMessage takes it) would make if each
// attempt started at: the header set the Sender builds for the attempt
// (static headers, User-Agent, Content-Type, X-Signature or the scheme's
// signed headers), computed the same way, with nothing sent. An error is
// a secret that cannot sign, as the attempt would fail.
func (s *Sender) Preview(dest *Destination, body []byte, id string, at time.Time) ([]Request, error) {
	sig := s.xSignature(dest, body)
	ps := dest.perAttempt(id)
	out := make([]Request, len(dest.Endpoints))
	for i := range dest.Endpoints {
		ep := &dest.Endpoints[i]
		h, err := s.header(ep, body, sig, ps, at)
		if err != nil {
			return nil, err
		}
		// A copy: the sender shares some values between its requests.
		out[i] = Request{Method: dest.method(), Endpoint: i, URL: ep.URL, Display: ep.Display(), Header: h.Clone()}
	}
	return out, nil
}
