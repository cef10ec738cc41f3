package collector

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
)

// readBody reads the request body within limit bytes of JSON: for gzip,
// at most limit+GzipSlack bytes as sent and limit once inflated (a small
// gzip body may inflate to gigabytes; reading stops one byte past the
// limit). A declared length over the limit is refused before reading
// anything. It answers 413 or 400 itself and reports false then.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
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
	var in io.Reader = http.MaxBytesReader(w, r.Body, wire)
	if enc == "gzip" {
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
	body, err := io.ReadAll(in)
	switch {
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

// batch is a decoded request: its messages undecoded, and what the batch
// level adds to each.
type batch struct {
	elems        []json.RawMessage
	context      json.RawMessage
	integrations json.RawMessage
	writeKey     string
}

// parseBatch decodes a /v1/batch body.
func parseBatch(body []byte) (*batch, error) {
	top, err := rawjson.ParseObject(body)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	b := &batch{}
	if err := b.batchLevel(top); err != nil {
		return nil, err
	}
	raw, ok := top.Get("batch")
	if !ok || string(raw) == "null" {
		return nil, errors.New("batch is required")
	}
	if raw[0] != '[' {
		return nil, errors.New("batch must be an array")
	}
	if err := json.Unmarshal(raw, &b.elems); err != nil {
		return nil, fmt.Errorf("invalid JSON in batch: %v", err)
	}
	return b, nil
}

func (b *batch) batchLevel(top *rawjson.Object) error {
	b.writeKey, _ = top.GetString("writeKey")
	for _, k := range [...]string{"context", "integrations"} {
		v, ok := top.Get(k)
		if !ok || string(v) == "null" {
			continue
		}
		if v[0] != '{' {
			return fmt.Errorf("%s must be an object", k)
		}
		// Compacted once here, as it is copied into every message.
		var buf bytes.Buffer
		if err := json.Compact(&buf, v); err != nil {
			return fmt.Errorf("%s: %v", k, err)
		}
		if k == "context" {
			b.context = buf.Bytes()
		} else {
			b.integrations = buf.Bytes()
		}
	}
	return nil
}

// parseSingle decodes a /v1/{type} body: one message.
func parseSingle(body []byte) (*batch, error) {
	obj, err := rawjson.ParseObject(body)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	b := &batch{elems: []json.RawMessage{body}}
	b.writeKey, _ = obj.GetString("writeKey")
	return b, nil
}

// messages checks and completes every message for src. pathType, when set,
// is the type the path fixes. It returns the details of every message that
// is wrong, and whether one was too large.
func (b *batch) messages(src *Source, pathType message.Type, now time.Time, newID func() string) (msgs []store.Message, details []Detail, tooLarge bool) {
	msgs = make([]store.Message, 0, len(b.elems))
	received := message.FormatTime(now)
	clock := func() time.Time { return now }
	for i, elem := range b.elems {
		if n := len(elem); n > MaxMessageBytes {
			details = append(details, Detail{Index: i, Reason: (&message.SizeError{Size: n, Limit: MaxMessageBytes}).Error()})
			tooLarge = true
			continue
		}
		obj, err := rawjson.ParseObject(elem)
		if err != nil {
			details = append(details, Detail{Index: i, Reason: "must be a JSON object"})
			continue
		}
		if pathType != "" {
			if !obj.Has("type") {
				obj.SetString("type", string(pathType))
			} else if t, _ := obj.GetString("type"); t != string(pathType) {
				details = append(details, Detail{Index: i, Field: "type", Reason: fmt.Sprintf("must be %q on /v1/%s", pathType, pathType)})
				continue
			}
		}
		obj.Delete("writeKey") // a credential, never stored or forwarded
		if err := merge(obj, "context", b.context); err != nil {
			details = append(details, Detail{Index: i, Field: "context", Reason: err.Error()})
			continue
		}
		if err := merge(obj, "integrations", b.integrations); err != nil {
			details = append(details, Detail{Index: i, Field: "integrations", Reason: err.Error()})
			continue
		}
		raw, err := message.NewRaw(obj)
		if err != nil {
			var ve *message.ValidationError
			if errors.As(err, &ve) {
				details = append(details, Detail{Index: i, Field: ve.Field, Reason: ve.Reason})
			} else {
				details = append(details, Detail{Index: i, Reason: err.Error()})
			}
			continue
		}
		raw.Fill(newID, clock)
		obj.SetString("receivedAt", received)
		m := store.Message{
			Source:     src.Name,
			MessageID:  raw.MessageId(),
			Type:       string(raw.Type()),
			ReceivedAt: now,
			Body:       obj.AppendJSON(nil),
		}
		if m.UserID, _ = obj.GetString("userId"); m.UserID == "" {
			m.UserID, _ = obj.GetString("anonymousId")
		}
		integrations, _ := obj.Get("integrations")
		for _, d := range src.Destinations {
			if message.Enabled(integrations, d) {
				m.Destinations = append(m.Destinations, store.DestinationWebhooks)
			}
		}
		msgs = append(msgs, m)
	}
	return msgs, details, tooLarge
}

// merge adds the batch-level object's members to the message's object
// under key; the message's own members win.
func merge(obj *rawjson.Object, key string, batchLevel json.RawMessage) error {
	if batchLevel == nil {
		return nil
	}
	own, ok := obj.Get(key)
	if !ok || string(own) == "null" {
		obj.Set(key, batchLevel)
		return nil
	}
	if own[0] != '{' {
		return errors.New("must be an object")
	}
	mine, err := rawjson.ParseObject(own)
	if err != nil {
		return err
	}
	theirs, err := rawjson.ParseObject(batchLevel)
	if err != nil {
		return err
	}
	for _, f := range theirs.Fields {
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
