package signature

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scheme names a way of signing webhooks, each exactly as its owner
// documents it. Segment, the webhook destination's own, is the default.
type Scheme string

const (
	Segment  Scheme = "segment"  // X-Signature: hex HMAC-SHA1 of the body
	GitHub   Scheme = "github"   // X-Hub-Signature-256: sha256=hex of the body
	Stripe   Scheme = "stripe"   // Stripe-Signature: t=ts,v1=hex of "ts.body"
	Standard Scheme = "standard" // Standard Webhooks (Svix): base64 of "id.ts.body"
	Slack    Scheme = "slack"    // X-Slack-Signature: v0=hex of "v0:ts:body"
	Shopify  Scheme = "shopify"  // X-Shopify-Hmac-Sha256: base64 of the body
	// Auto verifies whichever scheme a request's headers carry.
	Auto Scheme = "auto"
)

// Schemes lists every scheme, in the order Auto prefers them when a
// request carries several: those that sign a timestamp first.
var Schemes = []Scheme{Standard, Stripe, Slack, GitHub, Shopify, Segment}

// DefaultTolerance is how old a signed timestamp may be (for Standard
// Webhooks, also how far ahead), as Stripe, Slack and Standard Webhooks
// default to.
const DefaultTolerance = 5 * time.Minute

// Header names, canonical.
const (
	HeaderGitHub       = "X-Hub-Signature-256"
	HeaderGitHubSHA1   = "X-Hub-Signature" // legacy, beside the SHA-256 one
	HeaderStripe       = "Stripe-Signature"
	HeaderStandardID   = "Webhook-Id"
	HeaderStandardTime = "Webhook-Timestamp"
	HeaderStandard     = "Webhook-Signature"
	HeaderSlack        = "X-Slack-Signature"
	HeaderSlackTime    = "X-Slack-Request-Timestamp"
	HeaderShopify      = "X-Shopify-Hmac-Sha256"
	// Svix sends Standard Webhooks under its own names unless an account
	// has the unbranded ones; they are read as Standard's.
	HeaderSvix     = "Svix-Signature"
	HeaderSvixID   = "Svix-Id"
	HeaderSvixTime = "Svix-Timestamp"
)

// keyForm says what a Standard Webhooks secret looks like.
const keyForm = "a standard webhooks secret is " + standardSecretPrefix + " followed by base64 (as Svix shows it)"

// standardSecretPrefix starts a Standard Webhooks secret; base64 follows.
const standardSecretPrefix = "whsec_"

// encoding is how a scheme writes a MAC.
type encoding int

const (
	hexEnc   encoding = iota // lowercase hex, as the owners' verifiers compare it
	b64Enc                   // standard base64, padded
	upperHex                 // hex with capitals: only segment takes it as hex
)

func (e encoding) String() string {
	switch e {
	case b64Enc:
		return "base64"
	case upperHex:
		return "upper-case hex"
	}
	return "hex"
}

func (e encoding) encode(mac []byte) string {
	if e == b64Enc {
		return base64.StdEncoding.EncodeToString(mac)
	}
	return hex.EncodeToString(mac)
}

// decode parses s as e, wanting a MAC of size bytes. hexEnc is lowercase
// only; upperHex any hex with a capital in it.
func (e encoding) decode(s string, size int) ([]byte, bool) {
	if e == b64Enc {
		if e.encodedLen(size) != len(s) {
			return nil, false
		}
		b, err := base64.StdEncoding.DecodeString(s)
		return b, err == nil && len(b) == size
	}
	if len(s) != 2*size || (e == hexEnc) == (strings.ToLower(s) != s) {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

func (e encoding) encodedLen(size int) int {
	if e == b64Enc {
		return base64.StdEncoding.EncodedLen(size)
	}
	return 2 * size
}

// decodeOwn reads a signature as the scheme writes it (segment's hex in
// either case, as the spec's receivers compare it).
func (sp *spec) decodeOwn(v string) ([]byte, bool) {
	if b, ok := sp.enc.decode(v, sp.size); ok {
		return b, true
	}
	if sp.anyCase {
		return upperHex.decode(v, sp.size)
	}
	return nil, false
}

// decodeOther reads a signature written another way than the scheme's:
// a sender that encodes its MAC wrong.
func (sp *spec) decodeOther(v string) ([]byte, encoding, bool) {
	others := []encoding{b64Enc}
	switch {
	case sp.enc == b64Enc:
		others = []encoding{hexEnc, upperHex}
	case !sp.anyCase:
		others = []encoding{upperHex, b64Enc}
	}
	for _, e := range others {
		if b, ok := e.decode(v, sp.size); ok {
			return b, e, true
		}
	}
	return nil, 0, false
}

// spec is what one scheme signs and how it writes the result.
type spec struct {
	scheme Scheme
	alg    string
	hash   func() hash.Hash
	size   int
	enc    encoding
	// header carries the signature; timeHeader and idHeader, when set,
	// the signed timestamp and message id (Stripe's timestamp rides in
	// its signature header).
	header, timeHeader, idHeader string
	// prefix is what the value puts before the encoded MAC; multi, that a
	// value may carry several signatures (key rotation).
	prefix string
	multi  bool
	// anyCase is that upper-case hex is the scheme's too (segment: the
	// spec's receivers decode it); the others' verifiers compare strings.
	anyCase bool
	// stamped is that the scheme signs a timestamp; future, that its
	// owner also refuses one too far ahead (Standard Webhooks does;
	// Stripe's and Slack's libraries only refuse old ones).
	stamped, future bool
}

var specs = map[Scheme]*spec{
	Segment:  {scheme: Segment, alg: "hmac-sha1", hash: sha1.New, size: sha1.Size, enc: hexEnc, header: Header, anyCase: true},
	GitHub:   {scheme: GitHub, alg: "hmac-sha256", hash: sha256.New, size: sha256.Size, enc: hexEnc, header: HeaderGitHub, prefix: "sha256="},
	Stripe:   {scheme: Stripe, alg: "hmac-sha256", hash: sha256.New, size: sha256.Size, enc: hexEnc, header: HeaderStripe, prefix: "v1=", multi: true, stamped: true},
	Standard: {scheme: Standard, alg: "hmac-sha256", hash: sha256.New, size: sha256.Size, enc: b64Enc, header: HeaderStandard, timeHeader: HeaderStandardTime, idHeader: HeaderStandardID, prefix: "v1,", multi: true, stamped: true, future: true},
	Slack:    {scheme: Slack, alg: "hmac-sha256", hash: sha256.New, size: sha256.Size, enc: hexEnc, header: HeaderSlack, timeHeader: HeaderSlackTime, prefix: "v0=", stamped: true},
	Shopify:  {scheme: Shopify, alg: "hmac-sha256", hash: sha256.New, size: sha256.Size, enc: b64Enc, header: HeaderShopify},
}

// svix is Standard Webhooks under the header names Svix sends unless an
// account has the unbranded ones; its libraries read either.
var svix = func() *spec {
	sp := *specs[Standard]
	sp.header, sp.timeHeader, sp.idHeader = HeaderSvix, HeaderSvixTime, HeaderSvixID
	return &sp
}()

// githubSHA1 is GitHub's legacy header, checked when a request carries
// only that one.
var githubSHA1 = &spec{scheme: GitHub, alg: "hmac-sha1", hash: sha1.New, size: sha1.Size, enc: hexEnc, header: HeaderGitHubSHA1, prefix: "sha1="}

// alternate names other headers a scheme's signature may come in:
// GitHub's legacy SHA-1 one, Svix's names for Standard Webhooks.
var alternate = map[Scheme]*spec{GitHub: githubSHA1, Standard: svix}

// ParseScheme reads a scheme name, any case; auto only when allowAuto.
func ParseScheme(name string, allowAuto bool) (Scheme, error) {
	s := Scheme(strings.ToLower(strings.TrimSpace(name)))
	if _, ok := specs[s]; ok || (allowAuto && s == Auto) {
		return s, nil
	}
	return "", fmt.Errorf("unknown signature scheme %q (one of %s)", name, strings.Join(Names(allowAuto), ", "))
}

// Names lists the schemes' names in the order of Schemes, and auto last
// when withAuto.
func Names(withAuto bool) []string {
	names := make([]string, 0, len(Schemes)+1)
	for _, s := range Schemes {
		names = append(names, string(s))
	}
	if withAuto {
		names = append(names, string(Auto))
	}
	return names
}

// Algorithm names the scheme's MAC, e.g. hmac-sha256.
func (s Scheme) Algorithm() string {
	if sp := specs[s]; sp != nil {
		return sp.alg
	}
	return ""
}

// SignedPrefix is what scheme s signs before the body, given the request's
// timestamp (Unix seconds) and message id where s signs them: "" for
// schemes that sign the body alone. The inspector shows it.
func (s Scheme) SignedPrefix(ts int64, id string) string {
	if sp := specs[s]; sp != nil {
		return string(sp.signedPrefix(ts, id))
	}
	return ""
}

// SignsTimestamp reports whether the scheme signs a timestamp (and so
// has a tolerance); SignsID, whether it signs a message id.
func (s Scheme) SignsTimestamp() bool { return specs[s] != nil && specs[s].stamped }
func (s Scheme) SignsID() bool        { return specs[s] != nil && specs[s].idHeader != "" }

// CarriesSeveral reports whether a value carries several signatures (one
// per secret while a sender rotates): Stripe's and Standard Webhooks'.
func (s Scheme) CarriesSeveral() bool { return specs[s] != nil && specs[s].multi }

// Headers lists the headers the scheme sends, in the order Sign returns them.
func (s Scheme) Headers() []string {
	sp := specs[s]
	if sp == nil {
		return nil
	}
	var hs []string
	for _, h := range []string{sp.idHeader, sp.timeHeader, sp.header} {
		if h != "" {
			hs = append(hs, h)
		}
	}
	if s == GitHub {
		hs = append(hs, HeaderGitHubSHA1)
	}
	return hs
}

// Detect lists the schemes whose signature header h carries, in the
// order of Schemes.
func Detect(h http.Header) []Scheme {
	var found []Scheme
	for _, s := range Schemes {
		if carries(h, s) {
			found = append(found, s)
		}
	}
	return found
}

// Only reports whether h carries scheme s's signature header and no other
// scheme's: Detect(h) is just s, without a slice to build.
func Only(h http.Header, s Scheme) bool {
	for _, o := range Schemes {
		if carries(h, o) != (o == s) {
			return false
		}
	}
	return true
}

// carries reports whether h has a signature header of scheme s.
func carries(h http.Header, s Scheme) bool {
	alt := alternate[s]
	return present(h, specs[s].header) || (alt != nil && present(h, alt.header))
}

func present(h http.Header, name string) bool {
	_, ok := h[name]
	return ok
}

// Key turns a secret as the user holds it into the scheme's HMAC key: the
// bytes themselves, except for Standard Webhooks, whose secret is
// "whsec_" (optional) and base64.
func Key(s Scheme, secret []byte) ([]byte, error) {
	if s != Standard {
		return secret, nil
	}
	b64 := strings.TrimPrefix(string(secret), standardSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("%s: got %s", keyForm, redact(string(secret)))
	}
	return key, nil
}

// redact says what a secret looks like without any of its characters.
func redact(s string) string {
	form := "no " + standardSecretPrefix + " prefix"
	if strings.HasPrefix(s, standardSecretPrefix) {
		form = standardSecretPrefix + " and what follows is not base64"
	}
	return fmt.Sprintf("a secret of %s (%s)", plural(int64(len(s)), "character"), form)
}

// signedPrefix is what the scheme signs before the body.
func (sp *spec) signedPrefix(ts int64, id string) []byte {
	switch sp.scheme {
	case Stripe:
		return []byte(strconv.FormatInt(ts, 10) + ".")
	case Standard:
		return []byte(id + "." + strconv.FormatInt(ts, 10) + ".")
	case Slack:
		return []byte("v0:" + strconv.FormatInt(ts, 10) + ":")
	}
	return nil
}

// CheckSecrets reports the first secret scheme s cannot use, by position.
func CheckSecrets(s Scheme, secrets [][]byte) error {
	for i, secret := range secrets {
		if _, err := Key(s, secret); err != nil {
			if len(secrets) > 1 {
				return fmt.Errorf("secret %d: %w", i+1, err)
			}
			return err
		}
	}
	return nil
}

// MaxTimestamp bounds a signed timestamp, in Unix seconds (about the year
// 36812): far past any real one, and small enough for a skew in seconds
// never to overflow.
const MaxTimestamp = 1 << 40

// MessageID returns id as Standard Webhooks' webhook-id: id itself when it
// is a header token (printable ASCII, no spaces), else a stable "msg_"
// digest of it; a fresh one when id is empty.
func MessageID(id string) string {
	if id == "" {
		return NewMessageID()
	}
	if validID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "msg_" + strings.ToLower(msgIDEncoding.EncodeToString(sum[:16]))
}

func validID(id string) bool {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return id != ""
}

// HeaderOf builds the headers scheme s is verified from, out of a bare
// signature value and, where the scheme sends them apart, the signed
// timestamp and id: what a user copies from a log. The value may come
// with or without its prefix ("sha256=", "v0=", "v1,", Stripe's "t=…,").
func HeaderOf(s Scheme, value, timestamp, id string) http.Header {
	sp := specs[s]
	h := http.Header{}
	if sp == nil {
		return h
	}
	value = strings.TrimSpace(value)
	header := sp.header
	switch {
	case s == Stripe:
		if !strings.Contains(value, "=") {
			value = sp.prefix + value
		}
		if !strings.Contains(value, "t=") && timestamp != "" {
			value = "t=" + timestamp + "," + value
		}
	case s == GitHub && (strings.HasPrefix(value, githubSHA1.prefix) || len(value) == 2*githubSHA1.size):
		header = githubSHA1.header
		if !strings.HasPrefix(value, githubSHA1.prefix) {
			value = githubSHA1.prefix + value
		}
	case sp.prefix != "" && !strings.HasPrefix(value, sp.prefix) && value != "":
		value = sp.prefix + value
	}
	h.Set(header, value)
	if sp.timeHeader != "" && timestamp != "" {
		h.Set(sp.timeHeader, timestamp)
	}
	if sp.idHeader != "" && id != "" {
		h.Set(sp.idHeader, id)
	}
	return h
}

// SchemeOfValue tells the scheme from a signature value's form alone, for
// a value copied without its header name. Bare hex of SHA-256's length
// could be GitHub's, Stripe's or Slack's, so it is not told.
func SchemeOfValue(v string) (Scheme, bool) {
	v = strings.TrimSpace(v)
	switch {
	case strings.HasPrefix(v, "t=") && strings.Contains(v, "v1="):
		return Stripe, true
	case strings.HasPrefix(v, "sha256=") || strings.HasPrefix(v, "sha1="):
		return GitHub, true
	case strings.HasPrefix(v, "v0="):
		return Slack, true
	case strings.HasPrefix(v, "v1,"):
		return Standard, true
	}
	if _, ok := specs[Segment].decodeOwn(v); ok {
		return Segment, true
	}
	if _, ok := b64Enc.decode(v, sha256.Size); ok {
		return Shopify, true
	}
	return "", false
}
