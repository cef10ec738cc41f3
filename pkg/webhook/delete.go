package webhook

import (
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
)

// DeleteMessage is the delete notification of deletion request messageID
// for userID (spec 6), to store with queued.New.
func DeleteMessage(userID, messageID string, at time.Time) *rawjson.Object {
	o := &rawjson.Object{}
	o.SetString(keyType, string(TypeDelete))
	o.SetString(keyUserID, userID)
	o.SetString("messageId", messageID)
	o.SetString(keyTimestamp, message.FormatTime(at))
	return o
}
