package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/evfwd/evfwd/pkg/signature"
)

// setSecrets checks the scheme and the secrets it is to use.
func (h *Handler) setSecrets() error {
	h.secrets = slices.Clip(h.opts.Secrets)
	for i, s := range h.secrets {
		if len(s) == 0 {
			return &configError{"Secrets", "secret " + strconv.Itoa(i+1) + " is empty"}
		}
	}
	h.scheme = h.opts.Scheme
	if h.scheme == "" {
		h.scheme = signature.Auto
	}
	if _, err := signature.ParseScheme(string(h.scheme), true); err != nil {
		return &configError{"Scheme", err.Error()}
	}
	if h.scheme != signature.Auto {
		if err := signature.CheckSecrets(h.scheme, h.secrets); err != nil {
			return &configError{"Secrets", err.Error()}
		}
	}
	if h.scheme == signature.Segment || h.scheme == signature.Auto {
		h.macs = make([]*signature.Keyed, len(h.secrets))
		for i, s := range h.secrets {
			h.macs[i] = signature.NewKeyed(s)
		}
	}
	return nil
}

// verify judges a request's signature at its arrival time and, when its
// MAC matched, whether the same signed message came before (replay).
func (h *Handler) verify(hdr http.Header, body []byte, at time.Time) (Signature, bool) {
	if len(h.secrets) == 0 {
		return Signature{Verdict: SigUnchecked}, false
	}
	opts := signature.Options{Secrets: h.secrets, Tolerance: h.opts.Tolerance, Now: at}
	res := h.checkSignature(hdr, body, opts)
	sig := Signature{Verdict: SigInvalid, Scheme: res.Scheme, Reason: res.Reason}
	if res.Valid {
		sig.Verdict = SigValid
	}
	if len(h.secrets) > 1 {
		sig.Secret = res.Secret
	}
	if !res.Valid {
		// A valid verdict's sentence adds nothing to its reason and
		// secret; left out, it costs neither the request nor its record.
		sig.Message = res.Message()
	}
	// Only an authentic request (its MAC matched, in or out of the
	// tolerance) says what was signed; anyone can repeat a forged header.
	replay := res.Secret > 0 && h.replays.check(replayKeyOf(&res))
	return sig, replay
}

// checkSignature is signature.VerifyFields, which judges every request
// but the commonest one: a valid segment signature, the only signature
// header, which a pooled keyed MAC per secret confirms without building a
// Check (NewCheck keys a fresh HMAC per secret and request). Anything the
// fast path does not confirm, failures included, goes to VerifyFields:
// the verdict on it, and every reason, is pkg/signature's.
func (h *Handler) checkSignature(hdr http.Header, body []byte, opts signature.Options) signature.Result {
	if r, ok := h.fastSegment(hdr, body, opts.Tolerance); ok {
		return r
	}
	res, err := signature.VerifyFields(h.scheme, hdr, body, opts)
	if err != nil {
		// New checked the secrets against a fixed scheme; under Auto,
		// pkg/signature skips those a request's scheme cannot use.
		return signature.Result{Scheme: h.scheme, Reason: signature.ReasonMismatch, Secrets: len(h.secrets), Bytes: int64(len(body)), Detail: err.Error()}
	}
	return res
}

// fastSegment confirms a valid segment signature, as VerifyFields would
// (TestFastSegmentAgrees): segment signs no timestamp, so a MAC equal to
// the header's value under a secret is the whole verdict.
func (h *Handler) fastSegment(hdr http.Header, body []byte, tolerance time.Duration) (signature.Result, bool) {
	if h.scheme != signature.Segment && h.scheme != signature.Auto {
		return signature.Result{}, false
	}
	v := hdr[signature.Header]
	if len(v) != 1 {
		return signature.Result{}, false
	}
	if h.scheme == signature.Auto && !signature.Only(hdr, signature.Segment) {
		return signature.Result{}, false
	}
	want, err := signature.Decode(v[0])
	if err != nil {
		return signature.Result{}, false
	}
	if tolerance == 0 {
		tolerance = signature.DefaultTolerance
	}
	var sum [signature.Size]byte
	for i, k := range h.macs {
		if hmac.Equal(k.Sum(sum[:0], body), want) {
			return signature.Result{Scheme: signature.Segment, Valid: true, Reason: signature.ReasonOK,
				Secret: i + 1, Secrets: len(h.secrets), Bytes: int64(len(body)), Tolerance: tolerance, MAC: want}, true
		}
	}
	return signature.Result{}, false
}

// replayKey is what makes a signed message the same one again, in fixed
// size whatever the headers held: for Standard Webhooks, a digest of its
// message id (a retry keeps the id and signs a new timestamp); for every
// other scheme the MAC that matched, which covers the body and any signed
// timestamp. It is the MAC as computed, not the header's text, so neither
// hex in capitals nor extra items in a header make an old message new.
type replayKey struct {
	scheme signature.Scheme
	digest [sha256.Size]byte
}

func replayKeyOf(r *signature.Result) replayKey {
	k := replayKey{scheme: r.Scheme}
	if r.Scheme == signature.Standard {
		k.digest = sha256.Sum256([]byte(r.ID))
	} else {
		copy(k.digest[:], r.MAC)
	}
	return k
}
