package signature

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// Params are what a scheme signs besides the body.
type Params struct {
	// Timestamp is signed by Stripe, Slack and Standard Webhooks, in whole
	// seconds; the zero time means now.
	Timestamp time.Time
	// ID is Standard Webhooks' webhook-id; empty means a fresh msg_ id.
	ID string
}

// Field is one header line.
type Field struct{ Name, Value string }

// ErrNoSecret is returned when signing or verifying without a secret.
var ErrNoSecret = errors.New("no secret given")

// Signer streams a body through the MACs of a scheme, one per secret, and
// then gives the header lines to send. Write never fails.
type Signer struct {
	sp     *spec
	macs   []hash.Hash
	legacy hash.Hash // GitHub's SHA-1 header, signed with the first secret
	ts     int64
	id     string
	n      int64
}

// NewSigner returns a Signer for scheme s. Schemes that carry several
// signatures (Stripe, Standard Webhooks) sign with every secret, as a
// sender rotating its secret does; the others take exactly one.
func NewSigner(s Scheme, secrets [][]byte, p Params) (*Signer, error) {
	sp := specs[s]
	switch {
	case sp == nil:
		return nil, fmt.Errorf("cannot sign with scheme %q", s)
	case len(secrets) == 0:
		return nil, ErrNoSecret
	case len(secrets) > 1 && !sp.multi:
		return nil, fmt.Errorf("a %s signature carries one MAC: give one secret, not %d", s, len(secrets))
	}
	g := &Signer{sp: sp, id: p.ID}
	if sp.stamped {
		ts := p.Timestamp
		if ts.IsZero() {
			ts = time.Now()
		}
		if g.ts = ts.Unix(); g.ts < 0 || g.ts > MaxTimestamp {
			return nil, fmt.Errorf("timestamp %d is not Unix seconds from 0 to %d", g.ts, int64(MaxTimestamp))
		}
	}
	switch {
	case sp.idHeader != "" && g.id == "":
		g.id = NewMessageID()
	case sp.idHeader != "" && !validID(g.id):
		return nil, fmt.Errorf("message id %q: a header value of printable ASCII without spaces is needed (MessageID makes one of any id)", clip(g.id))
	}
	prefix := sp.signedPrefix(g.ts, g.id)
	for _, secret := range secrets {
		key, err := Key(s, secret)
		if err != nil {
			return nil, err
		}
		m := hmac.New(sp.hash, key)
		m.Write(prefix)
		g.macs = append(g.macs, m)
	}
	if s == GitHub {
		g.legacy = hmac.New(githubSHA1.hash, secrets[0])
	}
	return g, nil
}

// Write feeds body bytes.
func (g *Signer) Write(p []byte) (int, error) {
	for _, m := range g.macs {
		m.Write(p)
	}
	if g.legacy != nil {
		g.legacy.Write(p)
	}
	g.n += int64(len(p))
	return len(p), nil
}

// Len is the number of body bytes written.
func (g *Signer) Len() int64 { return g.n }

// Timestamp is the signed timestamp in Unix seconds (0 when the scheme
// signs none); ID the signed message id ("" when none).
func (g *Signer) Timestamp() int64 { return g.ts }
func (g *Signer) ID() string       { return g.id }

// Value is the signature header's value: for Stripe the whole
// "t=…,v1=…", for Standard Webhooks every "v1,…" separated by spaces.
func (g *Signer) Value() string {
	sp := g.sp
	var b strings.Builder
	if sp.scheme == Stripe {
		b.WriteString("t=" + strconv.FormatInt(g.ts, 10))
	}
	for i, m := range g.macs {
		switch {
		case sp.scheme == Stripe:
			b.WriteByte(',')
		case i > 0:
			b.WriteByte(' ')
		}
		b.WriteString(sp.prefix)
		b.WriteString(sp.enc.encode(m.Sum(nil)))
	}
	return b.String()
}

// Fields are the header lines to send, in the order of Scheme.Headers.
func (g *Signer) Fields() []Field {
	sp := g.sp
	var fs []Field
	if sp.idHeader != "" {
		fs = append(fs, Field{sp.idHeader, g.id})
	}
	if sp.timeHeader != "" {
		fs = append(fs, Field{sp.timeHeader, strconv.FormatInt(g.ts, 10)})
	}
	fs = append(fs, Field{sp.header, g.Value()})
	if g.legacy != nil {
		fs = append(fs, Field{githubSHA1.header, githubSHA1.prefix + githubSHA1.enc.encode(g.legacy.Sum(nil))})
	}
	return fs
}

// SignFields signs body with scheme s and returns the header lines.
func SignFields(s Scheme, secrets [][]byte, body []byte, p Params) ([]Field, error) {
	g, err := NewSigner(s, secrets, p)
	if err != nil {
		return nil, err
	}
	g.Write(body)
	return g.Fields(), nil
}

// NewMessageID returns a fresh Standard Webhooks message id: "msg_" and
// 26 random base32 characters.
func NewMessageID() string {
	var b [16]byte
	rand.Read(b[:])
	return "msg_" + strings.ToLower(msgIDEncoding.EncodeToString(b[:]))
}

var msgIDEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)
