package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// Field is one top-level member of an Object; Value holds its exact JSON
// bytes.
type Field struct {
	Key   string
	Value json.RawMessage
}

// Object is a JSON object kept as its ordered top-level members with their
// values undecoded, so numbers keep their digits and unknown fields survive
// a round trip. Only the keys evfwd reads or writes are ever decoded.
type Object struct {
	Fields []Field
	index  map[string]int // built lazily once an object grows past a few keys
	// inline backs Fields for typical messages, so that parsing one costs
	// one allocation instead of two.
	inline [12]Field
}

// indexAt is the size above which lookups use a map instead of a scan.
const indexAt = 16

var errNotObject = errors.New("not a JSON object")

// ParseObject splits data, which must be one valid JSON object, into its
// top-level members, validating it on the way. Values alias data, so data
// must not change afterwards. A repeated key keeps its first position and
// its last value, as encoding/json does.
func ParseObject(data []byte) (*Object, error) {
	o := &Object{}
	if err := o.Parse(data); err != nil {
		return nil, err
	}
	return o, nil
}

// Parse makes o the object in data, as ParseObject does, reusing o's memory.
func (o *Object) Parse(data []byte) error {
	o.Fields, o.index = o.inline[:0], nil
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		if i < len(data) && scanAll(data, i) == nil {
			return errNotObject
		}
		return syntaxError(data)
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		if SkipSpace(data, i+1) != len(data) {
			return syntaxError(data)
		}
		return nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return syntaxError(data)
		}
		end, err := ScanString(data, i)
		if err != nil {
			return syntaxError(data)
		}
		key, err := unquote(data[i:end])
		if err != nil {
			return err
		}
		i = SkipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return syntaxError(data)
		}
		i = SkipSpace(data, i+1)
		vend, spaced, err := ScanValue(data, i, 1)
		if err != nil {
			return syntaxError(data)
		}
		val := json.RawMessage(data[i:vend])
		if spaced {
			val = appendCompact(nil, val)
		}
		o.Set(key, val)
		i = SkipSpace(data, vend)
		if i >= len(data) {
			return syntaxError(data)
		}
		if data[i] == '}' {
			if SkipSpace(data, i+1) != len(data) {
				return syntaxError(data)
			}
			return nil
		}
		if data[i] != ',' {
			return syntaxError(data)
		}
		i = SkipSpace(data, i+1)
	}
}

// AppendWithMember appends the JSON object obj with key's value set to val:
// in place when obj has key, else as its last member. It walks obj's
// members without building an Object, so the common edit of a message
// (context.library) allocates nothing.
func AppendWithMember(dst, obj []byte, key string, val json.RawMessage) ([]byte, error) {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return dst, errNotObject
	}
	dst = append(dst, '{')
	first, found := true, false
	member := func(k, v []byte, spaced bool) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(append(dst, k...), ':')
		if spaced {
			dst = appendCompact(dst, v)
		} else {
			dst = append(dst, v...)
		}
	}
	for i = SkipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; {
		kend, err := ScanString(obj, i)
		if err != nil {
			return dst, err
		}
		k := obj[i:kend]
		j := SkipSpace(obj, SkipSpace(obj, kend)+1) // past ':'
		vend, spaced, err := ScanValue(obj, j, 1)
		if err != nil {
			return dst, err
		}
		switch name, _ := unquote(k); {
		case name != key:
			member(k, obj[j:vend], spaced)
		case !found: // a repeated key stays one member, as in an Object
			member(k, val, false)
			found = true
		}
		if i = SkipSpace(obj, vend); i < len(obj) && obj[i] == ',' {
			i = SkipSpace(obj, i+1)
		}
	}
	if !found {
		member(AppendString(nil, key), val, false)
	}
	return append(dst, '}'), nil
}

// scanAll validates that data[i:] is one JSON value and nothing more.
func scanAll(data []byte, i int) error {
	end, _, err := ScanValue(data, i, 0)
	if err == nil && SkipSpace(data, end) != len(data) {
		err = errSyntax
	}
	return err
}

func syntaxError(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	return errors.New("invalid JSON")
}

func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func unquote(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return internKey(q[1 : len(q)-1]), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

// internKey returns the message keys (and type names) evfwd meets on every
// line without allocating; other strings are copied.
func internKey(b []byte) string {
	switch string(b) { // no allocation: the compiler compares in place
	case "track":
		return "track"
	case "identify":
		return "identify"
	case "page":
		return "page"
	case "screen":
		return "screen"
	case "group":
		return "group"
	case "alias":
		return "alias"
	case "delete":
		return "delete"
	case "type":
		return "type"
	case "userId":
		return "userId"
	case "anonymousId":
		return "anonymousId"
	case "messageId":
		return "messageId"
	case "timestamp":
		return "timestamp"
	case "event":
		return "event"
	case "name":
		return "name"
	case "properties":
		return "properties"
	case "traits":
		return "traits"
	case "context":
		return "context"
	case "integrations":
		return "integrations"
	case "groupId":
		return "groupId"
	case "previousId":
		return "previousId"
	case "category":
		return "category"
	case "sentAt":
		return "sentAt"
	case "receivedAt":
		return "receivedAt"
	case "version":
		return "version"
	case "library":
		return "library"
	}
	return string(b)
}

func (o *Object) find(key string) int {
	if o.index != nil {
		if i, ok := o.index[key]; ok {
			return i
		}
		return -1
	}
	for i := range o.Fields {
		if o.Fields[i].Key == key {
			return i
		}
	}
	return -1
}

// Get returns the raw value of key.
func (o *Object) Get(key string) (json.RawMessage, bool) {
	if i := o.find(key); i >= 0 {
		return o.Fields[i].Value, true
	}
	return nil, false
}

// Has reports whether key is present.
func (o *Object) Has(key string) bool { return o.find(key) >= 0 }

// GetString returns the value of key when it is a JSON string.
func (o *Object) GetString(key string) (string, bool) { return StringValue(o.Get(key)) }

// StringValue decodes a value found (ok) when it is a JSON string.
func StringValue(v json.RawMessage, ok bool) (string, bool) {
	if !ok || len(v) < 2 || v[0] != '"' {
		return "", false
	}
	s, err := unquote(v)
	return s, err == nil
}

// Set stores raw, which must be valid compact JSON, under key: in place
// when key exists, else at the end.
func (o *Object) Set(key string, raw json.RawMessage) {
	if i := o.find(key); i >= 0 {
		o.Fields[i].Value = raw
		return
	}
	o.Fields = append(o.Fields, Field{Key: key, Value: raw})
	if o.index != nil {
		o.index[key] = len(o.Fields) - 1
	} else if len(o.Fields) > indexAt {
		o.reindex()
	}
}

// SetString stores s as a JSON string under key.
func (o *Object) SetString(key, s string) {
	o.Set(key, AppendString(nil, s))
}

// Delete removes key, keeping the order of the rest.
func (o *Object) Delete(key string) {
	i := o.find(key)
	if i < 0 {
		return
	}
	o.Fields = append(o.Fields[:i], o.Fields[i+1:]...)
	if o.index != nil {
		o.reindex()
	}
}

func (o *Object) reindex() {
	o.index = make(map[string]int, len(o.Fields))
	for i, f := range o.Fields {
		o.index[f.Key] = i
	}
}

// Len is the number of members.
func (o *Object) Len() int { return len(o.Fields) }

// AppendJSON appends the object as compact JSON, members in order.
func (o *Object) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	for i, f := range o.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, f.Key)
		dst = append(dst, ':')
		dst = append(dst, f.Value...)
	}
	return append(dst, '}')
}

// MarshalJSON implements json.Marshaler.
func (o *Object) MarshalJSON() ([]byte, error) { return o.AppendJSON(nil), nil }

// UnmarshalJSON implements json.Unmarshaler; the object copies data.
func (o *Object) UnmarshalJSON(data []byte) error {
	p, err := ParseObject(bytes.Clone(data))
	if err != nil {
		return err
	}
	*o = *p
	return nil
}

// AppendInt appends n as a JSON number.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
