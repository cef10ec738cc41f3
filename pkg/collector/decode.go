package collector

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// readBody reads the request body within limit bytes of JSON: for gzip,
// at most limit+GzipSlack bytes as sent and limit once inflated (a small
// gzip body may inflate to gigabytes; reading stops one byte past the
// limit). A declared length over the limit is refused before reading
// anything. What it holds is reserved in res (see budget.go). It answers
// 413, 400, or 503 when the budget has no room, itself and reports false
// then.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, limit int64, res *reservation) ([]byte, bool) {
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	wire, what := limit, "body"
	switch enc {
	case "", "identity":
	case "gzip":
		wire, what = limit+GzipSlack, "gzip body"
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unsupported Content-Encoding %q", enc), nil)
		return nil, false
	}
	overWire := func() {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s is over the %d-byte limit", what, wire), nil)
	}
	if r.ContentLength > wire {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s is %d bytes, over the %d-byte limit", what, r.ContentLength, wire), nil)
		return nil, false
	}
	// The most the buffer may need: the declared length and one byte to
	// see the end, else one byte past the limit, to see it passed.
	most := limit + 1
	if enc != "gzip" && r.ContentLength >= 0 {
		most = r.ContentLength + 1
	}
	var in io.Reader = http.MaxBytesReader(w, r.Body, wire)
	if enc == "gzip" {
		if !res.grow(gzipState) {
			h.overBudget(w)
			return nil, false
		}
		zr, err := gzip.NewReader(in)
		if err != nil {
			if tooLarge(err) {
				overWire()
			} else {
				writeError(w, http.StatusBadRequest, "invalid gzip body: "+err.Error(), nil)
			}
			return nil, false
		}
		defer zr.Close()
		in = io.LimitReader(zr, limit+1)
	}
	body, err := readAll(in, most, res)
	switch {
	case err == errOverBudget:
		h.overBudget(w)
		return nil, false
	case tooLarge(err):
		overWire()
		return nil, false
	case int64(len(body)) > limit:
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body is over the %d-byte limit once inflated", limit), nil)
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading body: "+err.Error(), nil)
		return nil, false
	}
	return body, true
}

// errOverBudget is readAll's when the budget has no room for its buffer.
var errOverBudget = errors.New("over the budget of bodies in flight")

// readAll reads r to its end into a buffer of at most most bytes, reserved
// in res as it grows. The buffer starts at bodyStart, or at most when that
// is less (a body that declares its length within bodyStart is read with
// one allocation), and doubles each time it fills: whatever length a
// request declares, what it holds is at most twice what it sent, and
// bodyStart before that. A buffer of most bytes that fills is returned as
// it is: only a body past its limit gets there.
func readAll(r io.Reader, most int64, res *reservation) ([]byte, error) {
	var b []byte
	for {
		if len(b) == cap(b) {
			if int64(cap(b)) >= most {
				return b, nil
			}
			n := min(max(2*int64(cap(b)), bodyStart), most)
			if !res.grow(n - int64(cap(b))) {
				return b, errOverBudget
			}
			b = append(make([]byte, 0, n), b...)
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// validUTF8 returns body with each byte that is not part of valid UTF-8
// replaced by U+FFFD, exactly as encoding/json does when it decodes a
// string (one U+FFFD per byte utf8.DecodeRune refuses). Outside its strings
// JSON is ASCII, so in a valid body only strings change. This is the one
// rule for invalid UTF-8: the stored body, the user_id a deletion request
// (decoded by encoding/json) matches, and the webhook body then all hold
// the same text. A valid body, nearly every one, is returned as it is.
func validUTF8(body []byte) []byte {
	if utf8.Valid(body) {
		return body
	}
	out := make([]byte, 0, len(body)+len(body)/8)
	for len(body) > 0 {
		r, n := utf8.DecodeRune(body)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, body[:n]...)
		}
		body = body[n:]
	}
	return out
}

func tooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// batch is a parsed request: where each message's JSON is, and what the
// batch level adds to each.
type batch struct {
	elems        []element
	context      batchLevel
	integrations batchLevel
	writeKey     string
	sentAt       time.Time  // the batch's, when it has one
	clientAddr   netip.Addr // a web or mobile source's client, for context.ip
}

// element is one message of a request, not parsed yet (but for the body of
// a /v1/{type} request, parsed to find its writeKey).
type element struct {
	data []byte
	size int // its length compacted: the size the limit applies to
	obj  *rawjson.Object
}

// batchLevel is a batch-level context or integrations object: compact,
// and parsed once for every message it is merged into.
type batchLevel struct {
	raw json.RawMessage
	obj *rawjson.Object
}

var errSyntax = errors.New("invalid JSON")

// parseBatch parses a /v1/batch body in one pass: the top-level members are
// validated as they are scanned, and the batch array is split into its
// messages on the way, for messages to parse each one once.
func parseBatch(body []byte) (*batch, error) {
	b := &batch{}
	batchAt, err := b.scan(body)
	if err != nil {
		// The rare path: the toolkit's parser words the error.
		if _, perr := rawjson.ParseObject(body); perr != nil {
			err = perr
		}
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	for _, bl := range [...]struct {
		key string
		dst *batchLevel
	}{{"context", &b.context}, {"integrations", &b.integrations}} {
		if err := bl.dst.check(bl.key); err != nil {
			return nil, err
		}
	}
	switch batchAt {
	case 0, 'n':
		return nil, errors.New("batch is required")
	case '[':
		return b, nil
	}
	return nil, errors.New("batch must be an array")
}

// scan walks the top-level object of body, as rawjson.ParseObject would
// validate it, keeping the last value of each member it reads (a repeated
// key's last value counts, as there). It reports the first byte of the
// last batch member's value, 0 without one.
func (b *batch) scan(body []byte) (batchAt byte, err error) {
	i := rawjson.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return 0, errSyntax
	}
	if i = rawjson.SkipSpace(body, i+1); i < len(body) && body[i] == '}' {
		return 0, trailing(body, i+1)
	}
	for {
		if i >= len(body) || body[i] != '"' {
			return 0, errSyntax
		}
		kend, err := rawjson.ScanString(body, i)
		if err != nil {
			return 0, err
		}
		key := topKey(body[i:kend])
		if i = rawjson.SkipSpace(body, kend); i >= len(body) || body[i] != ':' {
			return 0, errSyntax
		}
		i = rawjson.SkipSpace(body, i+1)
		var vend int
		var spaced bool
		if key == "batch" && i < len(body) && body[i] == '[' {
			vend, err = b.scanElems(body, i)
		} else {
			vend, spaced, err = rawjson.ScanValue(body, i, 1)
		}
		if err != nil {
			return 0, err
		}
		val := body[i:vend]
		switch key {
		case "batch":
			batchAt = val[0]
			if batchAt != '[' {
				b.elems = nil
			}
		case "writeKey":
			b.writeKey, _ = rawjson.StringValue(val, true)
		case "sentAt":
			s, _ := rawjson.StringValue(val, true)
			b.sentAt, _ = message.ParseTime(s)
		case "context":
			b.context.set(val, spaced)
		case "integrations":
			b.integrations.set(val, spaced)
		}
		if i = rawjson.SkipSpace(body, vend); i >= len(body) {
			return 0, errSyntax
		}
		switch body[i] {
		case '}':
			return batchAt, trailing(body, i+1)
		case ',':
			i = rawjson.SkipSpace(body, i+1)
		default:
			return 0, errSyntax
		}
	}
}

// scanElems validates the batch array at body[i] and keeps its elements;
// it returns the index past the array.
func (b *batch) scanElems(body []byte, i int) (int, error) {
	b.elems = b.elems[:0]
	if i = rawjson.SkipSpace(body, i+1); i < len(body) && body[i] == ']' {
		return i + 1, nil
	}
	for {
		// Depth 2, as inside an array that is a member's value.
		end, spaced, err := rawjson.ScanValue(body, i, 2)
		if err != nil {
			return 0, err
		}
		e := element{data: body[i:end], size: end - i}
		if spaced {
			e.size = compactLen(e.data)
		}
		b.elems = append(b.elems, e)
		if i = rawjson.SkipSpace(body, end); i >= len(body) {
			return 0, errSyntax
		}
		switch body[i] {
		case ']':
			return i + 1, nil
		case ',':
			i = rawjson.SkipSpace(body, i+1)
		default:
			return 0, errSyntax
		}
	}
}

// topKey returns the key of a top-level member when it is one the batch
// level reads, else "", without allocating for a plain key.
func topKey(quoted []byte) string {
	k := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(k, '\\') >= 0 {
		s, _ := rawjson.StringValue(quoted, true)
		k = []byte(s)
	}
	switch string(k) {
	case "batch":
		return "batch"
	case "writeKey":
		return "writeKey"
	case "context":
		return "context"
	case "integrations":
		return "integrations"
	case "sentAt":
		return "sentAt"
	}
	return ""
}

func trailing(body []byte, i int) error {
	if rawjson.SkipSpace(body, i) != len(body) {
		return errSyntax
	}
	return nil
}

// compactLen is the length of valid JSON data without its insignificant
// whitespace: what a message measures as a batch compacted would hold it.
func compactLen(data []byte) int {
	n, inString := len(data), false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++ // the escaped byte is never a quote that ends the string
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			n--
		}
	}
	return n
}

func (bl *batchLevel) set(val []byte, spaced bool) {
	if spaced {
		var buf bytes.Buffer
		json.Compact(&buf, val) // val is valid: scanned
		val = buf.Bytes()
	}
	bl.raw = val
}

// check refuses a batch-level value that is not an object (null is none)
// and parses an object, once, for merge.
func (bl *batchLevel) check(key string) error {
	if bl.raw == nil || string(bl.raw) == "null" {
		bl.raw = nil
		return nil
	}
	if bl.raw[0] != '{' {
		return fmt.Errorf("%s must be an object", key)
	}
	obj, err := rawjson.ParseObject(bl.raw)
	if err != nil {
		return fmt.Errorf("%s: %v", key, err)
	}
	bl.obj = obj
	return nil
}

// parseSingle parses a /v1/{type} body: one message, parsed once, for its
// writeKey now and for messages later.
func parseSingle(body []byte) (*batch, error) {
	obj, err := rawjson.ParseObject(body)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	b := &batch{elems: []element{{data: body, size: len(body), obj: obj}}}
	b.writeKey, _ = obj.GetString("writeKey")
	return b, nil
}

// integrationsKey is the key that turns destination on or off in a
// message's integrations (spec 4.3, case sensitive): Segment's name for it,
// "Webhooks" for evfwd's webhooks.
func integrationsKey(destination string) string {
	if destination == store.DestinationWebhooks {
		return "Webhooks"
	}
	return destination
}

// messages checks and completes every message for src and makes what is
// stored of each. pathType, when set, is the type the path fixes. It
// returns the details of every message that is wrong, and whether one was
// too large.
func (b *batch) messages(src *Source, pathType message.Type, now time.Time, newID func() string) (msgs []store.Message, details []Detail, tooLarge bool) {
	msgs = make([]store.Message, 0, len(b.elems))
	clock := func() time.Time { return now }
	var scratch rawjson.Object // each element's members, once queued.New has copied them out
	for i, e := range b.elems {
		if e.size > MaxMessageBytes {
			details = append(details, Detail{Index: i, Reason: (&message.SizeError{Size: e.size, Limit: MaxMessageBytes}).Error()})
			tooLarge = true
			continue
		}
		obj := e.obj
		if obj == nil {
			if err := scratch.Parse(e.data); err != nil {
				details = append(details, Detail{Index: i, Reason: "must be a JSON object"})
				continue
			}
			obj = &scratch
		}
		m, d, ok := b.message(obj, src, pathType, now, newID, clock)
		if !ok {
			d.Index = i
			details = append(details, d)
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs, details, tooLarge
}

// message completes one parsed message and makes its stored form, or says
// what is wrong with it.
func (b *batch) message(obj *rawjson.Object, src *Source, pathType message.Type, now time.Time, newID func() string, clock func() time.Time) (store.Message, Detail, bool) {
	if pathType != "" {
		if !obj.Has("type") {
			obj.SetString("type", string(pathType))
		} else if t, _ := obj.GetString("type"); t != string(pathType) {
			return store.Message{}, Detail{Field: "type", Reason: fmt.Sprintf("must be %q on /v1/%s", pathType, pathType)}, false
		}
	}
	obj.Delete("writeKey")  // a credential, never stored or forwarded
	obj.Delete("_metadata") // Analytics.js's notes to Segment on its bundled destinations
	if err := merge(obj, "context", b.context); err != nil {
		return store.Message{}, Detail{Field: "context", Reason: err.Error()}, false
	}
	if err := merge(obj, "integrations", b.integrations); err != nil {
		return store.Message{}, Detail{Field: "integrations", Reason: err.Error()}, false
	}
	raw, err := message.NewRaw(obj)
	if err != nil {
		var ve *message.ValidationError
		if errors.As(err, &ve) {
			return store.Message{}, Detail{Field: ve.Field, Reason: ve.Reason}, false
		}
		return store.Message{}, Detail{Reason: err.Error()}, false
	}
	if src.Kind.onDevice() {
		if err := fromDevice(obj, b.sentAt, now, b.clientAddr); err != nil {
			return store.Message{}, Detail{Field: "context", Reason: err.Error()}, false
		}
	}
	raw.Fill(newID, clock)
	m, err := queued.New(src.Name, obj, now, destinations(src, obj))
	if err != nil {
		var me *webhook.MessageError
		if errors.As(err, &me) {
			return store.Message{}, Detail{Field: me.Field, Reason: me.Reason}, false
		}
		return store.Message{}, Detail{Reason: err.Error()}, false
	}
	if src.Route != nil && len(m.Destinations) > 0 {
		m.Destinations = src.Route(m.Body)
	}
	return m, Detail{}, true
}

// destinations are those of src that the message's integrations enable.
// All of them, the usual case, share src's list.
func destinations(src *Source, obj *rawjson.Object) []string {
	integrations, _ := obj.Get("integrations")
	for i, d := range src.Destinations {
		if message.Enabled(integrations, integrationsKey(d)) {
			continue
		}
		on := slices.Clone(src.Destinations[:i])
		for _, d := range src.Destinations[i+1:] {
			if message.Enabled(integrations, integrationsKey(d)) {
				on = append(on, d)
			}
		}
		if len(on) == 0 {
			return nil
		}
		return on
	}
	if len(src.Destinations) == 0 {
		return nil
	}
	return slices.Clip(src.Destinations)
}

// merge adds the members of the batch-level object to the message's object
// under key; the message's own members win.
func merge(obj *rawjson.Object, key string, batchLevel batchLevel) error {
	if batchLevel.raw == nil {
		return nil
	}
	own, ok := obj.Get(key)
	if !ok || string(own) == "null" {
		obj.Set(key, batchLevel.raw)
		return nil
	}
	if own[0] != '{' {
		return errors.New("must be an object")
	}
	mine, err := rawjson.ParseObject(own)
	if err != nil {
		return err
	}
	for _, f := range batchLevel.obj.Fields {
		if !mine.Has(f.Key) {
			mine.Set(f.Key, f.Value)
		}
	}
	obj.Set(key, mine.AppendJSON(nil))
	return nil
}

// errorBody is every non-200 answer.
type errorBody struct {
	Error   string   `json:"error"`
	Details []Detail `json:"details,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg string, details []Detail) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(errorBody{Error: msg, Details: details})
	w.Write(append(b, '\n'))
}
