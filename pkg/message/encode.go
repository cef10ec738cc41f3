package message

import (
	"encoding/json"
	"time"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// EncodeOptions says what a sender adds while encoding a message.
type EncodeOptions struct {
	// Library, when set, is written as context.library, replacing any
	// library the caller put there: it names the library that sends.
	Library json.RawMessage
}

// LibraryJSON returns the context.library value {"name":...,"version":...}.
func LibraryJSON(name, version string) json.RawMessage {
	b := []byte(`{"name":`)
	b = rawjson.AppendString(b, name)
	b = append(b, `,"version":`...)
	b = rawjson.AppendString(b, version)
	return append(b, '}')
}

// The typed messages are written in one fixed key order: type, messageId,
// timestamp, the ids, the per-type fields, context, integrations. Empty
// strings, zero times and nil maps are left out.

// AppendJSON appends the wire form of m.
func (m Identify) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	dst = appendHead(dst, TypeIdentify, m.MessageId, m.Timestamp, m.UserId, m.AnonymousId)
	return appendTail(dst, "traits", m.Traits, m.Context, m.Integrations, opts)
}

// AppendJSON appends the wire form of m.
func (m Track) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	dst = appendHead(dst, TypeTrack, m.MessageId, m.Timestamp, m.UserId, m.AnonymousId)
	dst = appendStringField(dst, "event", m.Event)
	return appendTail(dst, "properties", m.Properties, m.Context, m.Integrations, opts)
}

// AppendJSON appends the wire form of m.
func (m Page) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	dst = appendHead(dst, TypePage, m.MessageId, m.Timestamp, m.UserId, m.AnonymousId)
	dst = appendStringField(dst, "name", m.Name)
	dst = appendStringField(dst, "category", m.Category)
	return appendTail(dst, "properties", m.Properties, m.Context, m.Integrations, opts)
}

// AppendJSON appends the wire form of m.
func (m Screen) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	dst = appendHead(dst, TypeScreen, m.MessageId, m.Timestamp, m.UserId, m.AnonymousId)
	dst = appendStringField(dst, "name", m.Name)
	dst = appendStringField(dst, "category", m.Category)
	return appendTail(dst, "properties", m.Properties, m.Context, m.Integrations, opts)
}

// AppendJSON appends the wire form of m.
func (m Group) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	dst = appendHead(dst, TypeGroup, m.MessageId, m.Timestamp, m.UserId, m.AnonymousId)
	dst = appendStringField(dst, "groupId", m.GroupId)
	return appendTail(dst, "traits", m.Traits, m.Context, m.Integrations, opts)
}

// AppendJSON appends the wire form of m.
func (m Alias) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	dst = appendHead(dst, TypeAlias, m.MessageId, m.Timestamp, m.UserId, "")
	dst = appendStringField(dst, "previousId", m.PreviousId)
	return appendTail(dst, "", nil, m.Context, m.Integrations, opts)
}

func appendHead(dst []byte, t Type, id string, ts time.Time, userID, anonID string) []byte {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, t...)
	dst = append(dst, '"')
	dst = appendStringField(dst, "messageId", id)
	if !ts.IsZero() {
		dst = append(dst, `,"timestamp":"`...)
		dst = AppendTime(dst, ts)
		dst = append(dst, '"')
	}
	dst = appendStringField(dst, "userId", userID)
	return appendStringField(dst, "anonymousId", anonID)
}

// appendStringField appends ,"key":"value" unless value is empty; key must
// need no escaping.
func appendStringField(dst []byte, key, value string) []byte {
	if value == "" {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	return rawjson.AppendString(dst, value)
}

func appendTail(dst []byte, dataKey string, data, context, integrations map[string]any, opts *EncodeOptions) ([]byte, error) {
	var err error
	if data != nil {
		dst = append(dst, ',', '"')
		dst = append(dst, dataKey...)
		dst = append(dst, '"', ':')
		if dst, err = rawjson.AppendValue(dst, data); err != nil {
			return dst, &ValidationError{Field: dataKey, Reason: "cannot be encoded: " + err.Error()}
		}
	}
	if dst, err = appendContext(dst, context, opts); err != nil {
		return dst, &ValidationError{Field: "context", Reason: "cannot be encoded: " + err.Error()}
	}
	if integrations != nil {
		dst = append(dst, `,"integrations":`...)
		if dst, err = rawjson.AppendValue(dst, integrations); err != nil {
			return dst, &ValidationError{Field: "integrations", Reason: "cannot be encoded: " + err.Error()}
		}
	}
	return append(dst, '}'), nil
}

// appendContext writes the caller's context with library first when the
// options carry one (the caller's own "library" key is then dropped).
func appendContext(dst []byte, context map[string]any, opts *EncodeOptions) ([]byte, error) {
	var lib json.RawMessage
	if opts != nil {
		lib = opts.Library
	}
	if context == nil && lib == nil {
		return dst, nil
	}
	dst = append(dst, `,"context":{`...)
	n := 0
	if lib != nil {
		dst = append(dst, `"library":`...)
		dst = append(dst, lib...)
		n++
	}
	var buf [16]string
	for _, k := range rawjson.AppendSortedKeys(buf[:0], context) {
		if lib != nil && k == "library" {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = rawjson.AppendString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = rawjson.AppendValue(dst, context[k]); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}
