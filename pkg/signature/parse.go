package signature

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// parse reads a scheme's headers into a candidate: the signatures, the
// signed timestamp and id, or an early verdict when they are missing or
// do not parse. Headers are untrusted input (FuzzParse).
func parse(sp *spec, h http.Header) *candidate {
	cand := &candidate{sp: sp, found: sp.enc}
	fail := func(reason Reason, detail string, args ...any) *candidate {
		cand.early = &Result{Scheme: sp.scheme, Reason: reason, Detail: fmt.Sprintf(detail, args...)}
		return cand
	}
	// A scheme's second set of header names, when only those came.
	if alt := alternate[sp.scheme]; alt != nil && !present(h, sp.header) && present(h, alt.header) {
		sp = alt
		cand.sp = sp
	}
	header := sp.header
	if !present(h, header) {
		if others := Detect(h); len(others) > 0 {
			cand.early = &Result{Scheme: sp.scheme, Reason: ReasonScheme, Other: others[0]}
			return cand
		}
		return fail(ReasonMissing, "the request has no %s header", header)
	}
	value := strings.TrimSpace(h.Get(header))
	if value == "" {
		return fail(ReasonMissing, "the %s header is empty", header)
	}
	var raw []string // encoded signatures
	switch sp.scheme {
	case Stripe:
		ts, sigs, err := parseStripe(value)
		if err != nil {
			return fail(ReasonMalformed, "%s: %v", header, err)
		}
		cand.ts, raw = ts, sigs
	case Standard:
		for f := range strings.FieldsSeq(value) {
			if v, ok := strings.CutPrefix(f, sp.prefix); ok {
				raw = append(raw, v)
			}
		}
		if len(raw) == 0 {
			return fail(ReasonMalformed, "%s: no %q signature in %q", header, sp.prefix, clip(value))
		}
	default:
		v, ok := strings.CutPrefix(value, sp.prefix)
		if !ok {
			return fail(ReasonMalformed, "%s: %q does not start with %q", header, clip(value), sp.prefix)
		}
		raw = []string{v}
	}
	if sp.timeHeader != "" {
		v := strings.TrimSpace(h.Get(sp.timeHeader))
		ts, err := parseTimestamp(v)
		if err != nil {
			return fail(ReasonMalformed, "%s: %v", sp.timeHeader, err)
		}
		cand.ts = ts
	}
	if sp.idHeader != "" {
		cand.id = strings.TrimSpace(h.Get(sp.idHeader))
		if cand.id == "" {
			return fail(ReasonMalformed, "no %s header: the scheme signs the message id", sp.idHeader)
		}
	}
	// Entries that do not decode are skipped, as the owners' libraries
	// do; the header fails only when none reads the scheme's way.
	var other [][]byte
	for _, v := range raw {
		if sig, ok := sp.decodeOwn(v); ok {
			cand.sigs = append(cand.sigs, sig)
		} else if sig, e, ok := sp.decodeOther(v); ok {
			other, cand.found = append(other, sig), e
		}
	}
	switch {
	case len(cand.sigs) > 0:
		cand.found = sp.enc
	case len(other) > 0:
		cand.sigs = other
	case sp.enc == hexEnc:
		return fail(ReasonMalformed, "%s: the signature is not %d hex digits (got %d characters)", header, 2*sp.size, len(raw[0]))
	default:
		return fail(ReasonMalformed, "%s: the signature is not %d characters of base64 (got %d)", header, sp.enc.encodedLen(sp.size), len(raw[0]))
	}
	return cand
}

// parseStripe reads "t=1492774577,v1=hex,v1=hex,v0=hex": the timestamp and
// every v1 signature; other keys are ignored, as Stripe's libraries do.
func parseStripe(v string) (ts int64, sigs []string, err error) {
	seenT := false
	for item := range strings.SplitSeq(v, ",") {
		// Items are not trimmed: Stripe's libraries read " v1" as another key.
		k, val, ok := strings.Cut(item, "=")
		if !ok {
			return 0, nil, fmt.Errorf("%q is not key=value", clip(item))
		}
		switch k {
		case "t":
			if ts, err = parseTimestamp(val); err != nil {
				return 0, nil, err
			}
			seenT = true
		case "v1":
			sigs = append(sigs, val)
		}
	}
	switch {
	case !seenT:
		return 0, nil, fmt.Errorf("no t= timestamp")
	case len(sigs) == 0:
		return 0, nil, fmt.Errorf("no v1= signature")
	}
	return ts, sigs, nil
}

// parseTimestamp reads whole Unix seconds.
func parseTimestamp(v string) (int64, error) {
	if v == "" {
		return 0, fmt.Errorf("no timestamp: the scheme signs one")
	}
	ts, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ts < 0 || ts > MaxTimestamp {
		return 0, fmt.Errorf("timestamp %q is not Unix seconds", clip(v))
	}
	return ts, nil
}

// clip shortens untrusted text for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
