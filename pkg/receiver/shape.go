package receiver

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// ShapeError says how a body differs from a webhook message of spec 2.1.
// Reason is short and lower case, e.g. "missing event", so it fits on a
// listener line after "shape ✗".
type ShapeError struct{ Reason string }

func (e *ShapeError) Error() string { return e.Reason }

func shapeErr(reason string) error { return &ShapeError{Reason: reason} }

// CheckShape reports whether body is one webhook message as the webhook
// destination sends it (spec 2.1, DESIGN §4), returning a *ShapeError
// naming the first problem found, or nil.
func CheckShape(body []byte) error {
	o, err := rawjson.ParseObject(body)
	if err != nil {
		return parseShapeErr(body)
	}
	return checkObject(o)
}

// checkBatch reports how many elements body has when it is a non-empty
// JSON array of objects (a batching destination's body, DESTINATIONS.md),
// 0 otherwise, and the first element whose shape is not a message's.
func checkBatch(body []byte) (int, error) {
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '[' {
		return 0, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(body, &items) != nil || len(items) == 0 {
		return 0, nil
	}
	for i, item := range items {
		o, err := rawjson.ParseObject(item)
		if err != nil {
			return 0, nil // not a batch of messages
		}
		if err := checkObject(o); err != nil {
			return len(items), shapeErr("message " + strconv.Itoa(i+1) + " of the batch: " + err.Error())
		}
	}
	return len(items), nil
}

// parseShapeErr tells "not JSON" from "JSON but not an object"; it runs
// only for bodies that failed, so the second validation costs nothing on
// the common path.
func parseShapeErr(body []byte) error {
	switch {
	case len(bytes.TrimSpace(body)) == 0:
		return shapeErr("empty body")
	case json.Valid(body):
		return shapeErr("not a JSON object")
	}
	return shapeErr("not JSON")
}

// deleteFields are the only keys a delete message carries.
var deleteFields = map[string]bool{"type": true, "userId": true, "timestamp": true}

// pageProperties are the string members spec 2.1 lists for page.
var pageProperties = []string{"path", "referrer", "title", "url"}

func checkObject(o *rawjson.Object) error {
	typ, err := needString(o, "type")
	if err != nil {
		return err
	}
	isDelete := message.Type(typ) == webhook.TypeDelete
	if !webhook.ValidType(message.Type(typ)) {
		return shapeErr("unknown type " + strconv.Quote(typ))
	}
	if err := checkVersion(o, isDelete); err != nil {
		return err
	}
	if err := checkTimestamp(o); err != nil {
		return err
	}
	if isDelete {
		for _, f := range o.Fields {
			if !deleteFields[f.Key] {
				return shapeErr("unexpected " + strconv.Quote(f.Key) + " on delete")
			}
		}
		_, err := needString(o, "userId")
		return err
	}
	if err := checkCommon(o, message.Type(typ)); err != nil {
		return err
	}
	switch message.Type(typ) {
	case message.TypeTrack:
		if _, err := needString(o, "event"); err != nil {
			return err
		}
		return optKind(o, "properties", '{')
	case message.TypeGroup:
		if _, err := needString(o, "groupId"); err != nil {
			return err
		}
		return optKind(o, "traits", '{')
	case message.TypeIdentify:
		return optKind(o, "traits", '{')
	case message.TypeScreen:
		return optKind(o, "name", '"')
	case message.TypePage:
		if err := optKind(o, "name", '"'); err != nil {
			return err
		}
		return checkPageProperties(o)
	}
	return nil
}

// checkCommon checks identity and the optional members every non-delete
// message may carry.
func checkCommon(o *rawjson.Object, t message.Type) error {
	if t == message.TypeAlias {
		// The payload names the identities with spaces (spec 2.1).
		if _, err := needString(o, "Previous ID"); err != nil {
			return err
		}
		if _, err := needString(o, "User ID"); err != nil {
			return err
		}
	} else {
		// A message from an anonymous visitor carries anonymousId alone,
		// or with "userId":null as Analytics.js sends it (DESIGN §2: at
		// least one of the two).
		if err := optKind(o, "userId", '"'); err != nil {
			return err
		}
		if err := optKind(o, "anonymousId", '"'); err != nil {
			return err
		}
		if !present(o, "userId") && !present(o, "anonymousId") {
			return shapeErr("missing userId")
		}
	}
	if id, ok := o.Get("messageId"); ok {
		if id[0] != '"' {
			return shapeErr("messageId not a string")
		}
		if s, _ := o.GetString("messageId"); len(s) > message.MaxMessageIDLength {
			return shapeErr("messageId over " + strconv.Itoa(message.MaxMessageIDLength) + " chars")
		}
	}
	if err := optKind(o, "context", '{'); err != nil {
		return err
	}
	return optKind(o, "integrations", '{')
}

func checkVersion(o *rawjson.Object, isDelete bool) error {
	v, ok := o.Get("version")
	switch {
	case isDelete && ok:
		return shapeErr("version on delete")
	case isDelete:
		return nil
	case !ok:
		return shapeErr("missing version")
	case string(v) != "1":
		return shapeErr("version not 1")
	}
	return nil
}

// wireTimeLen is the length of 2024-05-01T12:00:00.123Z.
const wireTimeLen = len("2006-01-02T15:04:05.000Z")

func checkTimestamp(o *rawjson.Object) error {
	s, err := needString(o, "timestamp")
	if err != nil {
		return err
	}
	if len(s) != wireTimeLen || s[len(s)-1] != 'Z' {
		return shapeErr("timestamp not UTC millis")
	}
	if _, err := time.Parse(message.TimeLayout, s); err != nil {
		return shapeErr("timestamp not UTC millis")
	}
	return nil
}

func checkPageProperties(o *rawjson.Object) error {
	raw, ok := o.Get("properties")
	if !ok || isNull(raw) {
		return nil
	}
	if raw[0] != '{' {
		return shapeErr("properties not an object")
	}
	props, err := rawjson.ParseObject(raw)
	if err != nil {
		return shapeErr("properties not an object")
	}
	for _, k := range pageProperties {
		if err := optKind(props, k, '"'); err != nil {
			return shapeErr("properties." + err.Error())
		}
	}
	return nil
}

// needString returns the string member key or a "missing"/"not a string"
// error.
func needString(o *rawjson.Object, key string) (string, error) {
	raw, ok := o.Get(key)
	if !ok {
		return "", shapeErr("missing " + quoteKey(key))
	}
	s, ok := o.GetString(key)
	if !ok || raw[0] != '"' {
		return "", shapeErr(quoteKey(key) + " not a string")
	}
	return s, nil
}

// optKind checks that key, when present and not null, holds a value
// starting with first ('"' string, '{' object). The Tracking API takes a
// null optional member as an absent one (pkg/message), and so does this.
func optKind(o *rawjson.Object, key string, first byte) error {
	raw, ok := o.Get(key)
	if !ok || raw[0] == first || isNull(raw) {
		return nil
	}
	kind := "a string"
	if first == '{' {
		kind = "an object"
	}
	return shapeErr(quoteKey(key) + " not " + kind)
}

// present reports whether key is there and not null.
func present(o *rawjson.Object, key string) bool {
	raw, ok := o.Get(key)
	return ok && !isNull(raw)
}

func isNull(raw []byte) bool { return string(raw) == "null" }

// quoteKey quotes keys with spaces so a reason stays readable.
func quoteKey(k string) string {
	if bytes.IndexByte([]byte(k), ' ') >= 0 {
		return strconv.Quote(k)
	}
	return k
}
