package message

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Raw is a message decoded from JSON (an NDJSON line, one element of a
// batch) kept as its top-level members with their bytes untouched: numbers
// keep their exact digits and unknown fields survive. Only the keys the
// rules need are read, and only messageId, timestamp and context.library
// are ever written.
type Raw struct {
	obj *Object
	// own backs obj for a Raw made by ParseRaw: one allocation for both.
	own Object
	typ Type
	// scratch holds the JSON of a filled-in timestamp and messageId, so
	// that filling them allocates nothing.
	scratch [64]byte
	// checked: obj passed check and nobody has had a chance to change it
	// since (Object hands it out), so Validate has nothing to redo.
	checked bool
}

// ParseRaw parses data, which must be one JSON object, and checks it by the
// same rules as the typed messages (validation errors are
// *ValidationError). A timestamp in any accepted input form (ParseTime) is
// rewritten in the wire form. The Raw aliases data: keep data unchanged
// until the Raw has been encoded or enqueued.
func ParseRaw(data []byte) (*Raw, error) {
	r := &Raw{}
	r.obj = &r.own
	if err := r.own.parse(data); err != nil {
		return nil, err
	}
	if err := r.init(); err != nil {
		return nil, err
	}
	return r, nil
}

// NewRaw checks obj as ParseRaw does and wraps it; the Raw owns obj from
// then on.
func NewRaw(obj *Object) (*Raw, error) {
	r := &Raw{obj: obj}
	if err := r.init(); err != nil {
		return nil, err
	}
	return r, nil
}

// init checks the members and normalizes the timestamp.
func (r *Raw) init() error {
	t, ts, err := r.check()
	if err != nil {
		return err
	}
	r.typ = t
	if v, _ := r.obj.Get("timestamp"); !ts.IsZero() && !(len(v) == wireTimeLen+2 && IsWireTime(string(v[1:len(v)-1]))) {
		r.setTimestamp(ts) // normalize any other accepted form
	}
	r.checked = true
	return nil
}

// Type is the message's type.
func (r *Raw) Type() Type { return r.typ }

// Object is the message's members; changes to it are not re-validated
// until Validate is called.
func (r *Raw) Object() *Object {
	r.checked = false
	return r.obj
}

// MessageId is the messageId, or "" before Fill when the input had none.
func (r *Raw) MessageId() string {
	s, _ := r.obj.GetString("messageId")
	return s
}

// Timestamp is the message's timestamp, zero when it has none.
func (r *Raw) Timestamp() time.Time {
	s, ok := r.obj.GetString("timestamp")
	if !ok {
		return time.Time{}
	}
	t, _ := ParseTime(s)
	return t
}

// Validate checks the message again (after changes through Object).
func (r *Raw) Validate() error {
	if r.checked {
		return nil
	}
	_, _, err := r.check()
	r.checked = err == nil
	return err
}

// Fill adds what a sender must add when the input left it out: a messageId
// from newID and a timestamp from now. Present values are kept.
func (r *Raw) Fill(newID func() string, now func() time.Time) {
	if isAbsent(r.obj, "messageId") || string(mustGet(r.obj, "messageId")) == `""` {
		r.obj.Set("messageId", AppendString(r.scratch[32:32], newID()))
	}
	if isAbsent(r.obj, "timestamp") {
		r.setTimestamp(now())
	}
}

func (r *Raw) setTimestamp(t time.Time) {
	b := append(r.scratch[:0:32], '"') // room for "2006-01-02T15:04:05.000Z"
	b = AppendTime(b, t)
	r.obj.Set("timestamp", append(b, '"'))
}

// AppendJSON appends the message as compact JSON, members in their input
// order. With opts.Library set, context.library is replaced (or added, and
// context too when missing); every other byte is the input's.
func (r *Raw) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	if opts == nil || opts.Library == nil {
		return r.obj.AppendJSON(dst), nil
	}
	dst = append(dst, '{')
	wroteContext := false
	for i, f := range r.obj.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, f.Key)
		dst = append(dst, ':')
		if f.Key != "context" {
			dst = append(dst, f.Value...)
			continue
		}
		wroteContext = true
		if isNull(f.Value) {
			dst = appendLibraryOnly(dst, opts.Library)
			continue
		}
		var err error
		if dst, err = appendWithMember(dst, f.Value, "library", opts.Library); err != nil {
			return dst, &ValidationError{Type: r.typ, Field: "context", Reason: "must be an object"}
		}
	}
	if !wroteContext {
		if len(r.obj.Fields) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"context":`...)
		dst = appendLibraryOnly(dst, opts.Library)
	}
	return append(dst, '}'), nil
}

func appendLibraryOnly(dst []byte, lib json.RawMessage) []byte {
	dst = append(dst, `{"library":`...)
	dst = append(dst, lib...)
	return append(dst, '}')
}

// MarshalJSON implements json.Marshaler: the message as it stands.
func (r *Raw) MarshalJSON() ([]byte, error) { return r.obj.AppendJSON(nil), nil }

// check applies the rules of spec 2.4 to the members and returns the type
// and the parsed timestamp (zero when absent). It reads the raw bytes and
// decodes no string it does not have to, so it does not allocate.
func (r *Raw) check() (Type, time.Time, error) {
	o := r.obj
	t, err := typeMember(o)
	if err != nil {
		return "", time.Time{}, err
	}
	// has reports whether key holds a non-empty string; a non-string
	// (other than null) is an error naming field.
	has := func(key, field string) (bool, error) {
		v, ok := o.Get(key)
		if !ok || isNull(v) {
			return false, nil
		}
		if v[0] != '"' {
			return false, invalid(t, field, "must be a string")
		}
		return len(v) > 2, nil
	}
	require := func(key, field, reason string) error {
		ok, err := has(key, field)
		if err == nil && !ok {
			err = invalid(t, field, reason)
		}
		return err
	}

	if t == TypeAlias {
		if err := require("userId", fieldUserID, reasonRequired); err != nil {
			return "", time.Time{}, err
		}
		if err := require("previousId", fieldPreviousID, reasonRequired); err != nil {
			return "", time.Time{}, err
		}
	} else {
		user, err := has("userId", fieldUserID)
		if err != nil {
			return "", time.Time{}, err
		}
		anon, err := has("anonymousId", fieldAnonID)
		if err != nil {
			return "", time.Time{}, err
		}
		if !user && !anon {
			return "", time.Time{}, invalid(t, fieldIdentity, reasonRequired)
		}
	}

	switch t {
	case TypeTrack:
		if err := require("event", fieldEvent, reasonRequired); err != nil {
			return "", time.Time{}, err
		}
	case TypePage, TypeScreen:
		name, err := has("name", fieldName)
		if err != nil {
			return "", time.Time{}, err
		}
		category, err := has("category", fieldCategory)
		if err != nil {
			return "", time.Time{}, err
		}
		if category && !name {
			return "", time.Time{}, invalid(t, fieldName, reasonRequiredCategory)
		}
	case TypeGroup:
		if err := require("groupId", fieldGroupID, reasonRequired); err != nil {
			return "", time.Time{}, err
		}
	}

	if _, err := has("messageId", fieldMessageID); err != nil {
		return "", time.Time{}, err
	}
	// A JSON string never has fewer bytes than characters, so only a long
	// one needs decoding to be measured.
	if v, _ := o.Get("messageId"); len(v) > MaxMessageIDLength+2 {
		id, _ := o.GetString("messageId")
		if err := checkMessageID(t, id); err != nil {
			return "", time.Time{}, err
		}
	}

	for _, k := range [...]string{"properties", "traits", "context", "integrations"} {
		if v, ok := o.Get(k); ok && !isNull(v) && v[0] != '{' {
			return "", time.Time{}, invalid(t, k, "must be an object")
		}
	}

	ts, err := timestampMember(o, t)
	if err != nil {
		return "", time.Time{}, err
	}
	return t, ts, nil
}

// typeMember reads and checks "type" without decoding the common case.
func typeMember(o *Object) (Type, error) {
	v, ok := o.Get("type")
	if !ok || isNull(v) {
		return "", invalid("", fieldType, reasonRequired)
	}
	if v[0] != '"' {
		return "", invalid("", fieldType, "must be a string")
	}
	switch string(v) { // the common, unescaped spellings, without allocating
	case `"identify"`:
		return TypeIdentify, nil
	case `"track"`:
		return TypeTrack, nil
	case `"page"`:
		return TypePage, nil
	case `"screen"`:
		return TypeScreen, nil
	case `"group"`:
		return TypeGroup, nil
	case `"alias"`:
		return TypeAlias, nil
	}
	s, _ := o.GetString("type")
	switch t := Type(s); {
	case s == "":
		return "", invalid("", fieldType, reasonRequired)
	case !t.Valid():
		return "", invalid("", fieldType, "must be one of identify, track, page, screen, group, alias (got "+quoteShort(s)+")")
	default:
		return t, nil
	}
}

// timestampMember reads timestamp in any form ParseTime accepts, as a
// string or a bare integer (Unix seconds or milliseconds).
func timestampMember(o *Object, t Type) (time.Time, error) {
	v, ok := o.Get("timestamp")
	if !ok || isNull(v) {
		return time.Time{}, nil
	}
	var s string
	if v[0] == '"' {
		s, _ = o.GetString("timestamp")
	} else {
		s = string(v)
	}
	ts, err := ParseTime(s)
	if err != nil {
		return time.Time{}, invalid(t, fieldTimestamp, "is not a time: "+err.Error())
	}
	return ts, nil
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

func isAbsent(o *Object, key string) bool {
	v, ok := o.Get(key)
	return !ok || isNull(v)
}

func mustGet(o *Object, key string) json.RawMessage {
	v, _ := o.Get(key)
	return v
}

// quoteShort quotes s for an error message, cut to a readable length.
func quoteShort(s string) string {
	const limit = 40
	if utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit]) + "…"
	}
	return string(AppendString(nil, s))
}
