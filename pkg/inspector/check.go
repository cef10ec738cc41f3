package inspector

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/receiver"
	"github.com/evfwd/evfwd/pkg/signature"
)

// Check is a request's signature check, step by step, for people.
type Check struct {
	Verdict receiver.SigVerdict `json:"verdict"`
	Scheme  signature.Scheme    `json:"scheme,omitempty"`
	Reason  signature.Reason    `json:"reason,omitempty"`
	Steps   []Step              `json:"steps"`
}

// Step is one step of a Check. OK is nil when the step did not apply or
// was not reached.
type Step struct {
	Step string `json:"step"`
	OK   *bool  `json:"ok"`
	Text string `json:"text"`
}

// explain redoes rec's signature check with the listen's secrets, at the
// time rec arrived, and says what each step found. It never shows a secret
// or the signature expected.
func (l *Listen) explain(rec *receiver.Record) Check {
	if rec.Refused == receiver.RefusedPath || rec.Refused == receiver.RefusedBody {
		return Check{Verdict: receiver.SigUnchecked, Steps: []Step{
			{Step: "verdict", Text: "not checked: the request was refused first (" + rec.Refused + ")"},
		}}
	}
	if len(l.cfg.Secrets) == 0 {
		return Check{Verdict: receiver.SigUnchecked, Steps: []Step{
			{Step: "verdict", Text: "not checked: listen has no secret (give --secret or --secret-file)"},
		}}
	}
	h := http.Header{}
	for k, v := range rec.Headers {
		h[http.CanonicalHeaderKey(k)] = []string{v}
	}
	body := rec.RawBody()
	res, err := signature.VerifyFields(l.cfg.Scheme, h, body, signature.Options{
		Secrets: l.cfg.Secrets, Tolerance: l.cfg.Tolerance, Now: rec.ReceivedAt,
	})
	if err != nil {
		return Check{Verdict: receiver.SigUnchecked, Steps: []Step{{Step: "verdict", Text: "not checked: " + err.Error()}}}
	}
	c := Check{Verdict: receiver.SigInvalid, Scheme: res.Scheme, Reason: res.Reason}
	if res.Valid {
		c.Verdict = receiver.SigValid
	}
	add := func(step string, ok *bool, format string, args ...any) {
		c.Steps = append(c.Steps, Step{Step: step, OK: ok, Text: fmt.Sprintf(format, args...)})
	}
	yes, no := new(true), new(false)
	// okIf is yes when the check got past reason, no when it stopped there.
	okIf := func(stopped ...signature.Reason) *bool {
		for _, r := range stopped {
			if res.Reason == r {
				return no
			}
		}
		return yes
	}

	// 1. Which scheme, and from what.
	switch {
	case res.Reason == signature.ReasonScheme:
		add("scheme", no, "expected %s (--scheme); the request is signed the %s way", res.Scheme, res.Other)
	case res.Reason == signature.ReasonMissing && res.Scheme == signature.Auto:
		add("scheme", no, "the request carries no signature header of any scheme evfwd knows")
	case res.Reason == signature.ReasonMissing:
		add("scheme", no, "%s: the request carries no %s signature header", res.Scheme, res.Scheme)
	case l.cfg.Scheme == signature.Auto:
		add("scheme", yes, "%s, from the request's headers (listen --scheme auto)", res.Scheme)
	default:
		add("scheme", yes, "%s (listen --scheme)", res.Scheme)
	}
	if c.Steps[0].OK == no {
		add("verdict", no, "%s: %s", res.Reason, res.Message())
		return c
	}

	// 2. The headers read.
	var lines []string
	for _, name := range signedHeaders(res.Scheme, h) {
		lines = append(lines, name+": "+h.Get(name))
	}
	add("header", okIf(signature.ReasonMalformed, signature.ReasonEncoding), "%s", strings.Join(lines, "\n"))

	// 3. What was signed.
	prefix := res.Scheme.SignedPrefix(res.Timestamp, res.ID)
	alg := strings.ToUpper(res.Scheme.Algorithm())
	if prefix == "" {
		add("signed", nil, "%s of the body (%d bytes)", alg, len(body))
	} else {
		add("signed", nil, "%s of %q then the body (%d bytes)", alg, prefix, len(body))
	}

	// 4. The secrets.
	secrets := "1 secret tried"
	if res.Secrets > 1 {
		secrets = fmt.Sprintf("%d secrets tried", res.Secrets)
	}
	switch res.Reason {
	case signature.ReasonMalformed:
		add("secrets", nil, "not reached: the header does not parse")
	case signature.ReasonEncoding:
		add("secrets", no, "%s; the signature is %s-encoded, not as the scheme sends it", secrets, res.Found)
	case signature.ReasonMismatch:
		add("secrets", no, "%s; none gives the signature the request carries", secrets)
	case signature.ReasonTrailingNewline:
		add("secrets", no, "%s; one matches only without the body's final newline", secrets)
	default:
		add("secrets", yes, "%s; secret %d matches", secrets, max(res.Secret, 1))
	}

	// 5. The signed timestamp against the tolerance.
	if res.Scheme.SignsTimestamp() && res.Timestamp != 0 {
		when := "before it arrived"
		skew := res.Skew
		if skew < 0 {
			when, skew = "after it arrived (clocks apart)", -skew
		}
		limit := "no limit"
		if res.Tolerance > 0 {
			limit = "the tolerance is " + res.Tolerance.String()
		}
		add("timestamp", okIf(signature.ReasonExpired, signature.ReasonFuture), "signed %s %s (%s); %s",
			skew.Round(time.Second), when, time.Unix(res.Timestamp, 0).UTC().Format(time.RFC3339), limit)
	}

	// 6. The verdict, in the words listen printed.
	verdict := no
	if res.Valid {
		verdict = yes
	}
	add("verdict", verdict, "%s: %s", res.Reason, res.Message())
	if rec.Signature.Verdict != "" && rec.Signature.Verdict != c.Verdict {
		add("recorded", nil, "when it arrived the verdict was %s (%s): listen ran with other secrets or options then",
			rec.Signature.Verdict, rec.Signature.Reason)
	}
	return c
}

// signedHeaders lists the headers of scheme s that h carries, Svix's
// names for Standard Webhooks included.
func signedHeaders(s signature.Scheme, h http.Header) []string {
	var names []string
	for _, name := range s.Headers() {
		if h.Get(name) != "" {
			names = append(names, name)
		}
	}
	if s == signature.Standard {
		for _, name := range []string{signature.HeaderSvixID, signature.HeaderSvixTime, signature.HeaderSvix} {
			if h.Get(name) != "" {
				names = append(names, name)
			}
		}
	}
	return names
}
