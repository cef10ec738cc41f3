// Package queued is where the webhook body meets the store: the one
// constructor of the store.Message a collected message, an audience sync's
// identify or a deletion's delete notification becomes, and the bytes the
// forwarder sends for a stored message.
//
// It sits above both pkg/webhook (the body's layout) and pkg/store (what is
// kept), so that neither imports the other.
package queued

import (
	"errors"
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// New is the one constructor of what the store keeps for a message to
// forward: it sets msg's receivedAt (msg is changed), and Body is msg's
// webhook body (webhook.Body), built here once so that the forwarder sends
// it as it is at every attempt. UserID is msg's userId, else its
// anonymousId. It takes msg's members as they are: the caller has checked
// them (the collector by the rules of pkg/message), and an error is a
// message webhook.Body refuses.
func New(source string, msg *rawjson.Object, receivedAt time.Time, destinations []string) (store.Message, error) {
	ts := make([]byte, 0, len(`"2006-01-02T15:04:05.000Z"`)) // msg keeps it
	ts = append(ts, '"')
	ts = rawjson.AppendTime(ts, receivedAt)
	msg.Set("receivedAt", append(ts, '"'))
	body, err := webhook.Body(msg)
	if err != nil {
		return store.Message{}, err
	}
	m := store.Message{
		Source: source, ReceivedAt: receivedAt, Body: body, Form: store.FormWire, Destinations: destinations,
	}
	m.Type, _ = msg.GetString("type")
	m.MessageID, _ = msg.GetString("messageId")
	if m.UserID, _ = msg.GetString("userId"); m.UserID == "" {
		m.UserID, _ = msg.GetString("anonymousId")
	}
	return m, nil
}

// ErrPurged is Body's error for a message whose body a deletion request
// emptied: there is nothing left to send.
var ErrPurged = errors.New("stored message: purged by a deletion request")

// Body returns the bytes to send for a stored message: a wire body as it
// is; a collected one, which a store written before the wire form holds,
// turned into its webhook body now; for an empty (purged) one, ErrPurged.
func Body(body []byte, form store.Form) ([]byte, error) {
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
		return webhook.Body(obj)
	}
	return nil, fmt.Errorf("stored message: unknown form %d", form)
}
