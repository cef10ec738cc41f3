package webhook

import (
	"errors"
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
)

// StoredMessage is the one constructor of what the store keeps for a
// message to forward (collected, an audience sync's identify, a deletion's
// delete): it sets msg's receivedAt (msg is changed), and Body is msg's
// webhook body (AppendBody), built here once so that the forwarder sends it
// as it is at every attempt.
// UserID is msg's userId, else its anonymousId. It takes msg's members as
// they are: the caller has checked them (the collector by the rules of
// pkg/message), and an error is a message AppendBody refuses.
func StoredMessage(source string, msg *rawjson.Object, receivedAt time.Time, destinations []string) (store.Message, error) {
	ts := make([]byte, 0, len(`"2006-01-02T15:04:05.000Z"`)) // msg keeps it
	ts = append(ts, '"')
	ts = rawjson.AppendTime(ts, receivedAt)
	msg.Set(keyReceivedAt, append(ts, '"'))
	body, err := Body(msg)
	if err != nil {
		return store.Message{}, err
	}
	m := store.Message{
		Source: source, ReceivedAt: receivedAt, Body: body, Form: store.FormWire, Destinations: destinations,
	}
	m.Type, _ = msg.GetString(keyType)
	m.MessageID, _ = msg.GetString("messageId")
	if m.UserID, _ = msg.GetString(keyUserID); m.UserID == "" {
		m.UserID, _ = msg.GetString("anonymousId")
	}
	return m, nil
}

// ErrPurged is StoredBody's error for a message whose body a deletion
// request emptied: there is nothing left to send.
var ErrPurged = errors.New("stored message: purged by a deletion request")

// StoredBody returns the bytes to send for a stored message: a wire body
// as it is; a collected one, which a store written before the wire form
// holds, turned into its webhook body now; for an empty (purged) one,
// ErrPurged.
func StoredBody(body []byte, form store.Form) ([]byte, error) {
	if len(body) == 0 {
		return nil, ErrPurged
	}
	switch form {
	case store.FormWire:
		return body, nil
	case store.FormCollected:
		obj, err := rawjson.ParseObject(body)
		if err != nil {
			return nil, fmt.Errorf("stored message: %w", err)
		}
		return Body(obj)
	}
	return nil, fmt.Errorf("stored message: unknown form %d", form)
}

// DeleteMessage is the delete notification of deletion request messageID
// for userID (spec 6), to store with StoredMessage.
func DeleteMessage(userID, messageID string, at time.Time) *rawjson.Object {
	o := &rawjson.Object{}
	o.SetString(keyType, string(TypeDelete))
	o.SetString(keyUserID, userID)
	o.SetString("messageId", messageID)
	o.SetString(keyTimestamp, message.FormatTime(at))
	return o
}
