package webhook

import (
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
)

// TypeError is NewMessage's error for a message whose "type" is not the
// type asked for.
type TypeError struct {
	Got, Want message.Type
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("message has type %q, not %q", e.Got, e.Want)
}

// NewMessage returns a collected message of type t to send as a webhook,
// as `evfwd trigger` does: data, a JSON object, when not nil, else t's
// Sample. Its "type" is t (data with another is a *TypeError), and a
// missing messageId (but for delete, which has none) and timestamp are
// filled in with messageID and now, as the collector would. Other members
// are taken as they are; Body says whether they make a webhook body.
func NewMessage(t message.Type, data []byte, now time.Time, messageID string) (*rawjson.Object, error) {
	if !ValidType(t) {
		return nil, fmt.Errorf("unknown message type %q", t)
	}
	if data == nil {
		return Sample(t, now, messageID)
	}
	msg, err := rawjson.ParseObject(data)
	if err != nil {
		return nil, err
	}
	if got, ok := msg.GetString(keyType); ok && got != string(t) {
		return nil, &TypeError{Got: message.Type(got), Want: t}
	}
	msg.SetString(keyType, string(t))
	if !msg.Has("messageId") && t != TypeDelete {
		msg.SetString("messageId", messageID)
	}
	if !msg.Has(keyTimestamp) {
		msg.SetString(keyTimestamp, message.FormatTime(now))
	}
	return msg, nil
}
