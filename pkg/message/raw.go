package message

import (
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// Raw is a message decoded from JSON (an NDJSON line, one element of a
// batch) kept as its top-level members with their bytes untouched: numbers
// keep their exact digits and unknown fields survive. Only the keys the
// rules need are read, and only messageId, timestamp and context.library
// are ever written.
//
// A Raw has two forms. A compact line with plain keys, as senders write
// them, is kept spliced: the input bytes plus where the members the rules
// read sit in them, and encoding copies the input around the few edits.
// Anything else (insignificant whitespace, escaped or repeated keys, an
// Object handed to NewRaw, a caller asking for Object) is kept as an
// Object. Both encode to the same bytes.
type Raw struct {
	typ Type
	// checked: the members passed check and nobody has had a chance to
	// change them since (Object hands them out), so Validate has nothing
	// to redo.
	checked bool

	// The Object form; nil while spliced.
	obj *rawjson.Object
	// own backs obj for a parsed Raw: no second allocation.
	own rawjson.Object

	// The spliced form.
	sp spliced

	// scratch holds the JSON of a filled-in timestamp ([:32]) and messageId
	// ([32:]), so that filling them allocates nothing.
	scratch [32 + 64]byte
}

var errEmptyRaw = errors.New("message: Raw holds no message (Parse it first)")

// key is one of the top-level members the rules read or write.
type key uint8

const (
	kType key = iota
	kUserID
	kAnonymousID
	kPreviousID
	kEvent
	kName
	kCategory
	kGroupID
	kMessageID
	kTimestamp
	kContext
	kProperties
	kTraits
	kIntegrations
	numKeys
)

var keyNames = [numKeys]string{"type", "userId", "anonymousId", "previousId", "event", "name", "category", "groupId", "messageId", "timestamp", "context", "properties", "traits", "integrations"}

func lookupKey(b []byte) (key, bool) {
	switch string(b) { // compared in place, no allocation
	case "type":
		return kType, true
	case "userId":
		return kUserID, true
	case "anonymousId":
		return kAnonymousID, true
	case "previousId":
		return kPreviousID, true
	case "event":
		return kEvent, true
	case "name":
		return kName, true
	case "category":
		return kCategory, true
	case "groupId":
		return kGroupID, true
	case "messageId":
		return kMessageID, true
	case "timestamp":
		return kTimestamp, true
	case "context":
		return kContext, true
	case "properties":
		return kProperties, true
	case "traits":
		return kTraits, true
	case "integrations":
		return kIntegrations, true
	}
	return 0, false
}

// ParseRaw parses data, which must be one JSON object, and checks it by the
// same rules as the typed messages (validation errors are
// *ValidationError). A timestamp in any accepted input form (ParseTime) is
// rewritten in the wire form. The Raw reads data for as long as it is used:
// keep data unchanged until the Raw is dropped or parsed again (what the
// client enqueues is a copy).
func ParseRaw(data []byte) (*Raw, error) {
	r := &Raw{}
	if err := r.Parse(data); err != nil {
		return nil, err
	}
	return r, nil
}

// Parse makes r the message in data, as ParseRaw does, reusing r's memory:
// a bulk reader can parse every line into the same few Raws. What r handed
// out before (its Object) is no longer valid afterwards.
func (r *Raw) Parse(data []byte) error {
	r.reset()
	if !r.splice(data) {
		r.reset()
		r.obj = &r.own
		if err := r.own.Parse(data); err != nil {
			return err
		}
	}
	return r.init()
}

// reset empties r but for scratch, and for own unless the last message
// used it: most lines touch neither, and clearing them would cost as much
// as parsing a short line.
func (r *Raw) reset() {
	r.typ, r.checked, r.obj, r.sp = "", false, nil, spliced{}
	if r.own.Fields != nil {
		r.own = rawjson.Object{} // let the previous input go
	}
}

// NewRaw checks obj as ParseRaw does and wraps it; the Raw owns obj from
// then on.
func NewRaw(obj *rawjson.Object) (*Raw, error) {
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
	if v, _ := r.get(kTimestamp); !ts.IsZero() && !(len(v) == wireTimeLen+2 && IsWireTime(string(v[1:len(v)-1]))) {
		r.setTimestamp(ts) // normalize any other accepted form
	}
	r.checked = true
	return nil
}

// get returns the raw value of a known member.
func (r *Raw) get(k key) (json.RawMessage, bool) {
	if r.obj != nil {
		return r.obj.Get(keyNames[k])
	}
	return r.sp.get(k)
}

// getString returns the value of a known member when it is a JSON string.
func (r *Raw) getString(k key) (string, bool) { return rawjson.StringValue(r.get(k)) }

func (r *Raw) absent(k key) bool {
	v, ok := r.get(k)
	return !ok || isNull(v)
}

// set replaces messageId or timestamp with v (compact JSON).
func (r *Raw) set(k key, v []byte) {
	if r.obj != nil {
		r.obj.Set(keyNames[k], v)
		return
	}
	r.sp.set(k, v)
}

// Type is the message's type.
func (r *Raw) Type() Type { return r.typ }

// MessageId is the messageId, or "" before Fill when the input had none.
func (r *Raw) MessageId() string {
	s, _ := r.getString(kMessageID)
	return s
}

// Timestamp is the message's timestamp, zero when it has none.
func (r *Raw) Timestamp() time.Time {
	s, ok := r.getString(kTimestamp)
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
	if v, _ := r.get(kMessageID); r.absent(kMessageID) || string(v) == `""` {
		r.set(kMessageID, rawjson.AppendString(r.scratch[32:32], newID()))
	}
	if r.absent(kTimestamp) {
		r.setTimestamp(now())
	}
}

func (r *Raw) setTimestamp(t time.Time) {
	b := append(r.scratch[:0:32], '"') // room for "2006-01-02T15:04:05.000Z"
	b = AppendTime(b, t)
	r.set(kTimestamp, append(b, '"'))
}

// AppendJSON appends the message as compact JSON, members in their input
// order. With opts.Library set, context.library is replaced (or added, and
// context too when missing); every other byte is the input's.
func (r *Raw) AppendJSON(dst []byte, opts *EncodeOptions) ([]byte, error) {
	var lib json.RawMessage
	if opts != nil {
		lib = opts.Library
	}
	switch {
	case r.obj != nil:
		return r.appendObject(dst, lib)
	case r.sp.data == nil:
		return dst, errEmptyRaw
	}
	return r.appendSpliced(dst, lib), nil
}

// MarshalJSON implements json.Marshaler: the message as it stands.
func (r *Raw) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil, nil) }

// check applies the rules of spec 2.4 to the members and returns the type
// and the parsed timestamp (zero when absent). It reads the raw bytes and
// decodes no string it does not have to, so it does not allocate.
func (r *Raw) check() (Type, time.Time, error) {
	t, err := r.typeMember()
	if err != nil {
		return "", time.Time{}, err
	}
	// has reports whether k holds a non-empty string; a non-string (other
	// than null) is an error naming field.
	has := func(k key, field string) (bool, error) {
		v, ok := r.get(k)
		if !ok || isNull(v) {
			return false, nil
		}
		if v[0] != '"' {
			return false, invalid(t, field, "must be a string")
		}
		return len(v) > 2, nil
	}
	require := func(k key, field, reason string) error {
		ok, err := has(k, field)
		if err == nil && !ok {
			err = invalid(t, field, reason)
		}
		return err
	}

	if t == TypeAlias {
		if err := require(kUserID, fieldUserID, reasonRequired); err != nil {
			return "", time.Time{}, err
		}
		if err := require(kPreviousID, fieldPreviousID, reasonRequired); err != nil {
			return "", time.Time{}, err
		}
	} else {
		user, err := has(kUserID, fieldUserID)
		if err != nil {
			return "", time.Time{}, err
		}
		anon, err := has(kAnonymousID, fieldAnonID)
		if err != nil {
			return "", time.Time{}, err
		}
		if !user && !anon {
			return "", time.Time{}, invalid(t, fieldIdentity, reasonRequired)
		}
	}

	switch t {
	case TypeTrack:
		if err := require(kEvent, fieldEvent, reasonRequired); err != nil {
			return "", time.Time{}, err
		}
	case TypePage, TypeScreen:
		name, err := has(kName, fieldName)
		if err != nil {
			return "", time.Time{}, err
		}
		category, err := has(kCategory, fieldCategory)
		if err != nil {
			return "", time.Time{}, err
		}
		if category && !name {
			return "", time.Time{}, invalid(t, fieldName, reasonRequiredCategory)
		}
	case TypeGroup:
		if err := require(kGroupID, fieldGroupID, reasonRequired); err != nil {
			return "", time.Time{}, err
		}
	}

	if _, err := has(kMessageID, fieldMessageID); err != nil {
		return "", time.Time{}, err
	}
	// A JSON string never has fewer bytes than characters, so only a long
	// one needs decoding to be measured.
	if v, _ := r.get(kMessageID); len(v) > MaxMessageIDLength+2 {
		id, _ := r.getString(kMessageID)
		if err := checkMessageID(t, id); err != nil {
			return "", time.Time{}, err
		}
	}

	for _, k := range [...]key{kProperties, kTraits, kContext, kIntegrations} {
		if v, ok := r.get(k); ok && !isNull(v) && v[0] != '{' {
			return "", time.Time{}, invalid(t, keyNames[k], "must be an object")
		}
	}

	ts, err := r.timestampMember(t)
	if err != nil {
		return "", time.Time{}, err
	}
	return t, ts, nil
}

// typeMember reads and checks "type" without decoding the common case.
func (r *Raw) typeMember() (Type, error) {
	v, ok := r.get(kType)
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
	s, _ := r.getString(kType)
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
func (r *Raw) timestampMember(t Type) (time.Time, error) {
	v, ok := r.get(kTimestamp)
	if !ok || isNull(v) {
		return time.Time{}, nil
	}
	var s string
	if v[0] == '"' {
		s, _ = r.getString(kTimestamp)
	} else if ts, ok := parseUnix(string(v)); ok {
		return ts, nil
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

// quoteShort quotes s for an error message, cut to a readable length.
func quoteShort(s string) string {
	const limit = 40
	if utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit]) + "…"
	}
	return string(rawjson.AppendString(nil, s))
}
