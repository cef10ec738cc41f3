// Package destination is a source's webhook destinations as serve runs
// them: each one's settings (Config, as the YAML file gives them) compiled
// once into a Destination — its endpoints and signing (pkg/webhook), which
// messages it takes (a Segment FQL condition, pkg/fql), their shape (a
// Segment mapping-kit mapping, pkg/mapping), its batches, pace and pause —
// and the Router that decides, for each message a source collects, which of
// its destinations get a delivery.
//
// A source's `webhooks:` block is the destination named "webhooks"
// (store.DestinationWebhooks) without a condition, a mapping, batches or a
// pace: the spec's Webhooks destination, byte for byte.
package destination

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/evfwd/evfwd/pkg/fql"
	"github.com/evfwd/evfwd/pkg/mapping"
	"github.com/evfwd/evfwd/pkg/signature"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// Limits of the settings.
const (
	// MaxPerSource is the most destinations one source may have.
	MaxPerSource = 50
	// MaxBatchSize is the most messages one batch request may carry.
	MaxBatchSize = 1000
	// DefaultBatchBytes caps a batch's body unless max_bytes says
	// otherwise: Segment's own cap on a batch.
	DefaultBatchBytes = 500 << 10
	// MaxBatchBytes is the largest max_bytes allowed.
	MaxBatchBytes = 16 << 20
)

// Config is one destination's settings, as a source's `destinations:`
// list holds them.
type Config struct {
	Name      string             `json:"name" mapstructure:"name"`
	Endpoints []webhook.Endpoint `json:"endpoints" mapstructure:"endpoints"`
	// SharedSecret signs each request (X-Signature unless Scheme says
	// otherwise). SharedSecrets is the same during a rotation: the first
	// signs; with a scheme that carries several signatures (standard,
	// stripe) every one does, so receivers holding the old one still
	// verify until they move to the new.
	SharedSecret  string   `json:"-" mapstructure:"shared_secret"`
	SharedSecrets []string `json:"-" mapstructure:"shared_secrets"`
	// Headers are sent with every request to every endpoint; an
	// endpoint's own headers win.
	Headers map[string]string `json:"headers,omitempty" mapstructure:"headers"`
	// Scheme is how the secret signs: segment (X-Signature, the default)
	// or another vendor's scheme (signature.ParseScheme).
	Scheme string `json:"scheme,omitempty" mapstructure:"scheme"`
	// Subscribe is a Segment FQL condition: the messages that match it
	// go to this destination (default: every message).
	Subscribe string `json:"subscribe,omitempty" mapstructure:"subscribe"`
	// Mapping is a Segment mapping-kit object: the body sent is the
	// message mapped by it (default: the whole message). Its JSON bytes
	// ([]byte or json.RawMessage, as the config loader gives them with
	// the file's key order), or any value encoding/json encodes.
	Mapping any `json:"mapping,omitempty" mapstructure:"mapping"`
	// Method is POST (default), PUT or PATCH.
	Method    string      `json:"method,omitempty" mapstructure:"method"`
	Batch     BatchConfig `json:"batch,omitzero" mapstructure:"batch"`
	RateLimit RateConfig  `json:"rateLimit,omitzero" mapstructure:"rate_limit"`
	// Paused keeps every delivery and sends none until resumed.
	Paused bool `json:"paused,omitempty" mapstructure:"paused"`
}

// BatchConfig asks for batches: up to Size mapped messages in one request,
// a JSON array, under MaxBytes.
type BatchConfig struct {
	Size     int `json:"size,omitempty" mapstructure:"size"`
	MaxBytes int `json:"maxBytes,omitempty" mapstructure:"max_bytes"`
}

// RateConfig paces a destination: at most PerSecond requests a second on
// average, Burst at once (default 1). Events wait; none is dropped.
type RateConfig struct {
	PerSecond float64 `json:"perSecond,omitempty" mapstructure:"per_second"`
	Burst     int     `json:"burst,omitempty" mapstructure:"burst"`
}

// Destination is one destination, compiled.
type Destination struct {
	Source string
	Name   string
	// Webhook is where and how requests go: endpoints (the
	// destination's headers merged into each), secrets, scheme, method.
	Webhook webhook.Destination
	// Subscribe decides which messages it takes; nil takes every one.
	Subscribe *fql.Condition
	// Mapping shapes the body; nil sends the message as it is.
	Mapping *mapping.Mapping
	// Batch.Size > 1 sends batches (see BatchConfig).
	Batch BatchConfig
	Rate  RateConfig
	// Paused, as configured; a running forwarder may pause and resume it.
	Paused bool
	// Config is what it was compiled from (zero for a webhooks block):
	// a reload keeps a destination whose settings did not change.
	Config Config
}

// Same reports whether d and e are the same destination with the same
// settings.
func (d *Destination) Same(e *Destination) bool {
	return d.Source == e.Source && d.Name == e.Name && reflect.DeepEqual(d.Config, e.Config) &&
		reflect.DeepEqual(d.Webhook, e.Webhook)
}

// Batching reports whether d sends batches.
func (d *Destination) Batching() bool { return d.Batch.Size > 1 }

// Body is the body d sends for one message, whose webhook body is wire:
// wire itself, or wire mapped.
func (d *Destination) Body(wire []byte) ([]byte, error) {
	if d.Mapping == nil {
		return wire, nil
	}
	return d.Mapping.Apply(wire)
}

// BatchID is the webhook-id of a batch of these messages: stable for the
// same messages in the same order, so a receiver that dedupes on it drops
// a batch it has already taken.
func BatchID(messageIDs []string) string {
	h := sha256.New()
	for _, id := range messageIDs {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return "batch_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// Webhooks is the spec's destination, a source's `webhooks:` block.
func Webhooks(source string, d webhook.Destination) *Destination {
	return &Destination{Source: source, Name: WebhooksName, Webhook: d}
}

// WebhooksName is the name of a source's `webhooks:` destination.
const WebhooksName = "webhooks"

// Error is one problem with a destination's settings.
type Error struct {
	Name  string // the destination's name ("" when it has none)
	Index int    // its position in the source's list
	Field string // the setting: "subscribe", "batch.size", ...
	Err   error
}

func (e *Error) Error() string {
	where := fmt.Sprintf("destinations[%d]", e.Index)
	if e.Name != "" {
		where = fmt.Sprintf("destination %q", e.Name)
	}
	if e.Field == "" {
		return where + ": " + e.Err.Error()
	}
	return where + ": " + e.Field + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Compile checks c, the index-th destination of source, and compiles it.
// It reports every problem, joined, each an *Error. With allowPrivate
// false, endpoints on link-local and metadata addresses are refused
// (webhook.Destination.CheckAddresses).
func Compile(source string, index int, c Config, allowPrivate bool) (*Destination, error) {
	var errs []error
	bad := func(field string, err error) {
		errs = append(errs, &Error{Name: c.Name, Index: index, Field: field, Err: err})
	}
	d := &Destination{Source: source, Name: c.Name, Batch: c.Batch, Rate: c.RateLimit, Paused: c.Paused, Config: c}
	if err := checkName(c.Name); err != nil {
		bad("name", err)
	}
	wd, err := c.webhook()
	if err != nil {
		bad("", err)
	}
	d.Webhook = wd
	problems := unjoin(d.Webhook.Validate())
	if !allowPrivate {
		problems = append(problems, unjoin(d.Webhook.CheckAddresses())...)
	}
	for _, p := range problems {
		bad("", p)
	}
	if strings.TrimSpace(c.Subscribe) != "" {
		if d.Subscribe, err = fql.Parse(c.Subscribe); err != nil {
			bad("subscribe", conditionError(err))
		}
	}
	if c.Mapping != nil {
		raw, err := mappingJSON(c.Mapping)
		if err == nil {
			d.Mapping, err = mapping.Parse(raw)
		}
		if err != nil {
			bad("mapping", err)
		}
	}
	switch b := &d.Batch; {
	case b.Size < 0 || b.Size > MaxBatchSize:
		bad("batch.size", fmt.Errorf("%d: want 1 to %d messages a request", b.Size, MaxBatchSize))
	case b.MaxBytes < 0 || b.MaxBytes > MaxBatchBytes:
		bad("batch.max_bytes", fmt.Errorf("%d: want up to %d bytes", b.MaxBytes, MaxBatchBytes))
	case b.MaxBytes > 0 && b.Size <= 1:
		bad("batch.max_bytes", errors.New("set without batch.size above 1"))
	case b.Size > 1 && b.MaxBytes == 0:
		b.MaxBytes = DefaultBatchBytes
	}
	switch r := &d.Rate; {
	case r.PerSecond < 0 || math.IsNaN(r.PerSecond) || math.IsInf(r.PerSecond, 0):
		bad("rate_limit.per_second", fmt.Errorf("%v: want a positive number of requests a second", r.PerSecond))
	case r.Burst < 0:
		bad("rate_limit.burst", fmt.Errorf("%d: want 1 or more", r.Burst))
	case r.Burst > 0 && r.PerSecond == 0:
		bad("rate_limit.burst", errors.New("set without rate_limit.per_second"))
	case r.PerSecond > 0 && r.Burst == 0:
		r.Burst = 1
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

// webhook is c's endpoints and signing as pkg/webhook takes them.
func (c *Config) webhook() (webhook.Destination, error) {
	d := webhook.Destination{Method: strings.ToUpper(c.Method), SharedSecret: c.SharedSecret}
	if len(c.SharedSecrets) > 0 {
		if c.SharedSecret != "" {
			return d, errors.New("shared_secret and shared_secrets: give one of them (shared_secrets: [new, old] during a rotation)")
		}
		d.SharedSecret = c.SharedSecrets[0]
		d.ExtraSecrets = c.SharedSecrets[1:]
	}
	if c.Scheme != "" {
		s, err := signature.ParseScheme(c.Scheme, false)
		if err != nil {
			return d, fmt.Errorf("scheme: %w", err)
		}
		d.Scheme = s
	}
	if d.Scheme == "" || d.Scheme == signature.Segment {
		// An X-Signature carries one signature: the new secret signs,
		// and receivers move to it (Segment's own rotation).
		d.ExtraSecrets = nil
	}
	d.Endpoints = make([]webhook.Endpoint, len(c.Endpoints))
	for i, ep := range c.Endpoints {
		if len(c.Headers) > 0 {
			h := make(map[string]string, len(c.Headers)+len(ep.Headers))
			for k, v := range c.Headers {
				h[k] = v
			}
			for k, v := range ep.Headers {
				h[k] = v
			}
			ep.Headers = h
		}
		d.Endpoints[i] = ep
	}
	return d, nil
}

// checkName refuses a name that cannot name a destination in a URL path,
// a metric label and a log line.
func checkName(name string) error {
	if name == "" {
		return errors.New("required")
	}
	if len(name) > 64 {
		return fmt.Errorf("%q: at most 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("%q: use letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// conditionError gives a syntax error its line with a caret under it.
func conditionError(err error) error {
	var se *fql.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w\n%s", err, se.Caret())
	}
	return err
}

// mappingJSON is a mapping's JSON bytes.
func mappingJSON(m any) ([]byte, error) {
	switch v := m.(type) {
	case []byte:
		return v, nil
	case json.RawMessage:
		return v, nil
	case string:
		return []byte(v), nil
	}
	return json.Marshal(m)
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
