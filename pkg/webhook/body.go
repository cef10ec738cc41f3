package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
)

// TypeDelete is the type of a deletion notification (spec 6). It is not
// one of the client's call types, so pkg/message does not define it.
const TypeDelete message.Type = "delete"

// Types lists the seven types the destination forwards, in spec order.
var Types = []message.Type{
	message.TypePage, message.TypeScreen, message.TypeIdentify, message.TypeTrack,
	message.TypeAlias, message.TypeGroup, TypeDelete,
}

// ValidType reports whether t is one of the seven forwarded types.
func ValidType(t message.Type) bool { return t == TypeDelete || t.Valid() }

// Keys the body builder renames, drops or rewrites.
const (
	keyType       = "type"
	keyVersion    = "version"
	keyTimestamp  = "timestamp"
	keyUserID     = "userId"
	keyPreviousID = "previousId"
	keyReceivedAt = "receivedAt"
	// Alias names on the webhook wire (spec 2.1: keys with spaces).
	keyAliasUserID     = "User ID"
	keyAliasPreviousID = "Previous ID"
)

// dropped are collected fields that never reach a customer's endpoint:
// writeKey is a credential of the source, sentAt is the client's transport
// clock (only meaningful for the collector's skew correction).
var dropped = map[string]bool{"writeKey": true, "sentAt": true}

// ErrInvalidMessage is matched by every *MessageError (errors.Is).
var ErrInvalidMessage = errors.New("invalid message")

// MessageError reports a collected message that cannot become a webhook
// body; Field is the offending key.
type MessageError struct {
	Field  string
	Reason string
}

func (e *MessageError) Error() string { return e.Field + " " + e.Reason }

// Is makes errors.Is(err, ErrInvalidMessage) true.
func (e *MessageError) Is(target error) bool { return target == ErrInvalidMessage }

// Body returns the webhook body for a collected message; see AppendBody.
func Body(msg *rawjson.Object) ([]byte, error) {
	return AppendBody(make([]byte, 0, 64+bodySize(msg)), msg)
}

// AppendBody appends the compact JSON webhook body of msg (spec 2.1,
// DESIGN §4) to dst. The layout is fixed so that bodies are reproducible:
//
//   - "type" first, then "version":1 (every type but delete), then the
//     collected members in their collected order with their bytes
//     untouched, except:
//   - "timestamp" is rewritten in place to RFC 3339 UTC milliseconds; a
//     message without one uses its "receivedAt" (the collector's clock,
//     spec 2.4: "when omitted, the server's time is used"), written right
//     after version; with neither, or an unparsable one, it is an error;
//   - alias: "userId" and "previousId" become "User ID" and "Previous ID"
//     in their places; both are required;
//   - delete: only type, userId (required), timestamp, in that order;
//   - "writeKey" and "sentAt" are dropped; "receivedAt", "integrations"
//     and everything else ride along.
func AppendBody(dst []byte, msg *rawjson.Object) ([]byte, error) {
	typ, ok := msg.GetString(keyType)
	if !ok {
		return dst, &MessageError{Field: keyType, Reason: "is required (a string)"}
	}
	t := message.Type(typ)
	if !ValidType(t) {
		return dst, &MessageError{Field: keyType, Reason: fmt.Sprintf("%q is not one of page, screen, identify, track, alias, group, delete", typ)}
	}
	ts, fromReceived, err := timestampOf(msg)
	if err != nil {
		return dst, err
	}

	dst = append(dst, `{"type":`...)
	dst = rawjson.AppendString(dst, typ)

	if t == TypeDelete {
		uid, ok := msg.Get(keyUserID)
		if !ok || !isString(uid) {
			return dst, &MessageError{Field: keyUserID, Reason: "is required for delete"}
		}
		dst = append(dst, `,"userId":`...)
		dst = append(dst, uid...)
		dst = append(dst, `,"timestamp":"`...)
		dst = message.AppendTime(dst, ts)
		return append(dst, `"}`...), nil
	}

	alias := t == message.TypeAlias
	if alias {
		for _, k := range [...]string{keyUserID, keyPreviousID} {
			if v, ok := msg.Get(k); !ok || !isString(v) {
				return dst, &MessageError{Field: k, Reason: "is required for alias"}
			}
		}
	}

	dst = append(dst, `,"version":1`...)
	if fromReceived {
		dst = appendTimestamp(dst, ts)
	}
	for _, f := range msg.Fields {
		switch k := f.Key; {
		case k == keyType || k == keyVersion || dropped[k]:
			continue
		case k == keyTimestamp:
			dst = appendTimestamp(dst, ts)
			continue
		case alias && k == keyUserID:
			dst = appendMember(dst, keyAliasUserID, f.Value)
		case alias && k == keyPreviousID:
			dst = appendMember(dst, keyAliasPreviousID, f.Value)
		case alias && (k == keyAliasUserID || k == keyAliasPreviousID):
			continue // the renamed fields above win over look-alikes
		default:
			dst = appendMember(dst, k, f.Value)
		}
	}
	return append(dst, '}'), nil
}

func appendMember(dst []byte, key string, raw json.RawMessage) []byte {
	dst = append(dst, ',')
	dst = rawjson.AppendString(dst, key)
	dst = append(dst, ':')
	return append(dst, raw...)
}

func appendTimestamp(dst []byte, ts time.Time) []byte {
	dst = append(dst, `,"timestamp":"`...)
	dst = message.AppendTime(dst, ts)
	return append(dst, '"')
}

// timestampOf reads the message's timestamp (a string in any form
// message.ParseTime accepts, or a bare Unix number), falling back to
// receivedAt when timestamp is absent.
func timestampOf(msg *rawjson.Object) (ts time.Time, fromReceived bool, err error) {
	key := keyTimestamp
	raw, ok := msg.Get(key)
	if !ok {
		key, fromReceived = keyReceivedAt, true
		if raw, ok = msg.Get(key); !ok {
			return time.Time{}, false, &MessageError{Field: keyTimestamp, Reason: "is required"}
		}
	}
	var s string
	if isString(raw) {
		s, _ = msg.GetString(key)
	} else {
		s = string(raw)
	}
	ts, perr := message.ParseTime(s)
	if perr != nil {
		return time.Time{}, false, &MessageError{Field: key, Reason: fmt.Sprintf("%q is not a timestamp (want RFC 3339, a date, or Unix seconds/milliseconds)", s)}
	}
	return ts, fromReceived, nil
}

func isString(raw json.RawMessage) bool { return len(raw) >= 2 && raw[0] == '"' }

// bodySize estimates the body length to size the buffer once.
func bodySize(msg *rawjson.Object) int {
	n := 2
	for _, f := range msg.Fields {
		n += len(f.Key) + len(f.Value) + 4
	}
	return n
}
