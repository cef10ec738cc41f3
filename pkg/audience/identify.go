package audience

import (
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
)

// Computation classes, as context.personas.computation_class says them.
const (
	ClassAudience = "audience"
	ClassTrait    = "computed_trait"
)

// Identify is the collected form of the identify message that tells a
// destination a user's trait key now has value (JSON):
//
//	{"type":"identify","userId":"u_1","traits":{"high_value_users":true},
//	 "context":{"personas":{"computation_class":"audience","computation_key":"high_value_users"}},
//	 "messageId":"…","timestamp":"…","receivedAt":"…"}
//
// context.personas lets a receiver tell a sync from a collected identify,
// as Segment's own audience messages do.
func Identify(userID, key string, value []byte, class, messageID string, now time.Time) []byte {
	b := make([]byte, 0, 192+len(userID)+2*len(key)+len(value))
	b = append(b, `{"type":"identify","userId":`...)
	b = rawjson.AppendString(b, userID)
	b = append(b, `,"traits":{`...)
	b = rawjson.AppendString(b, key)
	b = append(b, ':')
	b = append(b, value...)
	b = append(b, `},"context":{"personas":{"computation_class":`...)
	b = rawjson.AppendString(b, class)
	b = append(b, `,"computation_key":`...)
	b = rawjson.AppendString(b, key)
	b = append(b, `}},"messageId":`...)
	b = rawjson.AppendString(b, messageID)
	b = append(b, `,"timestamp":"`...)
	b = message.AppendTime(b, now)
	b = append(b, `","receivedAt":"`...)
	b = message.AppendTime(b, now)
	return append(b, `"}`...)
}

// Messages returns the store.Sync.Messages function of a sync: one
// identify per source, each with its own messageId.
func Messages(key, class string, sources []string, now time.Time, newID func() string) func(string, []byte) []store.Message {
	return func(userID string, value []byte) []store.Message {
		out := make([]store.Message, 0, len(sources))
		for _, src := range sources {
			id := newID()
			out = append(out, store.Message{
				Source: src, MessageID: id, Type: string(message.TypeIdentify), UserID: userID, ReceivedAt: now,
				Body:         Identify(userID, key, value, class, id, now),
				Destinations: []string{store.DestinationWebhooks},
			})
		}
		return out
	}
}
