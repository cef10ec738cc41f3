package inspector

import (
	"fmt"
	"net/http"
	"slices"
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
		return unchecked("the request was refused first (" + rec.Refused + ")")
	}
	if len(l.cfg.Secrets) == 0 {
		return unchecked("listen has no secret (give --secret or --secret-file)")
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
		return unchecked(err.Error())
	}
	e := &explanation{Check: Check{Verdict: receiver.SigInvalid, Scheme: res.Scheme, Reason: res.Reason}, res: res}
	if res.Valid {
		e.Verdict = receiver.SigValid
	}
	if !e.scheme(l.cfg.Scheme) {
		e.add("verdict", new(false), "%s: %s", res.Reason, res.Message())
		return e.Check
	}
	e.header(h)
	e.signed(len(body))
	e.secrets()
	e.timestamp()
	e.verdict(rec.Signature)
	return e.Check
}

// unchecked is the Check of a request whose signature was not checked,
// and why.
func unchecked(why string) Check {
	return Check{Verdict: receiver.SigUnchecked, Steps: []Step{{Step: "verdict", Text: "not checked: " + why}}}
}

// explanation is a Check being written, one method per step, from the
// result of checking the signature again.
type explanation struct {
	Check
	res signature.Result
}

func (e *explanation) add(step string, ok *bool, format string, args ...any) {
	e.Steps = append(e.Steps, Step{Step: step, OK: ok, Text: fmt.Sprintf(format, args...)})
}

// okIf is true when the check got past these reasons, false when it
// stopped at one of them.
func (e *explanation) okIf(stopped ...signature.Reason) *bool {
	return new(!slices.Contains(stopped, e.res.Reason))
}

// scheme says which scheme was checked, and from what; false when the
// check stopped there.
func (e *explanation) scheme(listening signature.Scheme) bool {
	res := e.res
	switch {
	case res.Reason == signature.ReasonScheme:
		e.add("scheme", new(false), "expected %s (--scheme); the request is signed the %s way", res.Scheme, res.Other)
	case res.Reason == signature.ReasonMissing && res.Scheme == signature.Auto:
		e.add("scheme", new(false), "the request carries no signature header of any scheme evfwd knows")
	case res.Reason == signature.ReasonMissing:
		e.add("scheme", new(false), "%s: the request carries no %s signature header", res.Scheme, res.Scheme)
	case listening == signature.Auto:
		e.add("scheme", new(true), "%s, from the request's headers (listen --scheme auto)", res.Scheme)
		return true
	default:
		e.add("scheme", new(true), "%s (listen --scheme)", res.Scheme)
		return true
	}
	return false
}

// header shows the signature headers read.
func (e *explanation) header(h http.Header) {
	var lines []string
	for _, name := range signedHeaders(e.res.Scheme, h) {
		lines = append(lines, name+": "+h.Get(name))
	}
	e.add("header", e.okIf(signature.ReasonMalformed, signature.ReasonEncoding), "%s", strings.Join(lines, "\n"))
}

// signed says what was signed: a body of size bytes, after the scheme's
// prefix.
func (e *explanation) signed(size int) {
	prefix := e.res.Scheme.SignedPrefix(e.res.Timestamp, e.res.ID)
	alg := strings.ToUpper(e.res.Scheme.Algorithm())
	if prefix == "" {
		e.add("signed", nil, "%s of the body (%d bytes)", alg, size)
	} else {
		e.add("signed", nil, "%s of %q then the body (%d bytes)", alg, prefix, size)
	}
}

// secrets says how many secrets were tried and which one matched.
func (e *explanation) secrets() {
	res := e.res
	secrets := "1 secret tried"
	if res.Secrets > 1 {
		secrets = fmt.Sprintf("%d secrets tried", res.Secrets)
	}
	switch res.Reason {
	case signature.ReasonMalformed:
		e.add("secrets", nil, "not reached: the header does not parse")
	case signature.ReasonEncoding:
		e.add("secrets", new(false), "%s; the signature is %s-encoded, not as the scheme sends it", secrets, res.Found)
	case signature.ReasonMismatch:
		e.add("secrets", new(false), "%s; none gives the signature the request carries", secrets)
	case signature.ReasonTrailingNewline:
		e.add("secrets", new(false), "%s; one matches only without the body's final newline", secrets)
	default:
		e.add("secrets", new(true), "%s; secret %d matches", secrets, max(res.Secret, 1))
	}
}

// timestamp weighs the signed timestamp against the tolerance, for a
// scheme that signs one.
func (e *explanation) timestamp() {
	res := e.res
	if !res.Scheme.SignsTimestamp() || res.Timestamp == 0 {
		return
	}
	when := "before it arrived"
	skew := res.Skew
	if skew < 0 {
		when, skew = "after it arrived (clocks apart)", -skew
	}
	limit := "no limit"
	if res.Tolerance > 0 {
		limit = "the tolerance is " + res.Tolerance.String()
	}
	e.add("timestamp", e.okIf(signature.ReasonExpired, signature.ReasonFuture), "signed %s %s (%s); %s",
		skew.Round(time.Second), when, time.Unix(res.Timestamp, 0).UTC().Format(time.RFC3339), limit)
}

// verdict gives the verdict in the words listen printed, and says so when
// the one recorded at arrival differs.
func (e *explanation) verdict(recorded receiver.Signature) {
	e.add("verdict", new(e.res.Valid), "%s: %s", e.res.Reason, e.res.Message())
	if recorded.Verdict != "" && recorded.Verdict != e.Verdict {
		e.add("recorded", nil, "when it arrived the verdict was %s (%s): listen ran with other secrets or options then",
			recorded.Verdict, recorded.Reason)
	}
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
