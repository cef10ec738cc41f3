package audience

import (
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
)

// Computation classes, as context.personas.computation_class says them.
const (
	ClassAudience = "audience"
	ClassTrait    = "computed_trait"
)

// Identify is the identify message that tells a destination a user's
// trait key now has value (JSON):
//
//	{"type":"identify","userId":"u_1","traits":{"high_value_users":true},
//	 "context":{"personas":{"computation_class":"audience","computation_key":"high_value_users"}},
//	 "messageId":"…","timestamp":"…"}
//
// context.personas lets a receiver tell a sync from a collected identify,
// as Segment's own audience messages do.
func Identify(userID, key string, value []byte, class, messageID string, now time.Time) *rawjson.Object {
	// One buffer holds every value; each member is a slice of it (a slice
	// keeps its bytes when a later append moves the buffer).
	b := make([]byte, 0, 160+len(userID)+2*len(key)+len(value)+len(messageID))
	o := &rawjson.Object{}
	add := func(k string, appendValue func([]byte) []byte) {
		at := len(b)
		b = appendValue(b)
		o.Set(k, b[at:len(b):len(b)])
	}
	add("type", func(b []byte) []byte { return rawjson.AppendString(b, string(message.TypeIdentify)) })
	add("userId", func(b []byte) []byte { return rawjson.AppendString(b, userID) })
	add("traits", func(b []byte) []byte {
		b = rawjson.AppendString(append(b, '{'), key)
		return append(append(append(b, ':'), value...), '}')
	})
	add("context", func(b []byte) []byte {
		b = rawjson.AppendString(append(b, `{"personas":{"computation_class":`...), class)
		b = rawjson.AppendString(append(b, `,"computation_key":`...), key)
		return append(b, `}}`...)
	})
	add("messageId", func(b []byte) []byte { return rawjson.AppendString(b, messageID) })
	add("timestamp", func(b []byte) []byte { return append(rawjson.AppendTime(append(b, '"'), now), '"') })
	return o
}

// Messages returns the store.Sync.Messages function of a sync: one
// identify per source, each with its own messageId, for the destinations
// route names (nil: the source's webhooks destination).
func Messages(key, class string, sources []string, now time.Time, newID func() string, route func(source string, body []byte) []string) func(string, []byte) []store.Message {
	return func(userID string, value []byte) []store.Message {
		out := make([]store.Message, 0, len(sources))
		for _, src := range sources {
			m, err := queued.New(src, Identify(userID, key, value, class, newID(), now), now,
				[]string{store.DestinationWebhooks})
			if err != nil {
				// An identify with a timestamp always has a webhook body.
				panic("audience: " + err.Error())
			}
			if route != nil {
				m.Destinations = route(src, m.Body)
			}
			out = append(out, m)
		}
		return out
	}
}
