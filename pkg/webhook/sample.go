package webhook

import (
	"fmt"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
)

// samples are realistic collected messages of each type, after spec 2.1:
// what a developer would see from a storefront (page, track, identify,
// group), its iOS app (screen), a login (alias) and a deletion request.
// messageId and timestamp are filled in by Sample.
var samples = map[message.Type]string{
	message.TypePage: `{"type":"page","userId":"u_42","anonymousId":"a_9f8e7d","name":"Pricing",` +
		`"properties":{"path":"/pricing","referrer":"https://www.google.com/","title":"Pricing | Acme","url":"https://acme.example/pricing"},` +
		`"context":{"ip":"203.0.113.7","userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 Safari/605.1.15","locale":"en-US"}}`,
	message.TypeScreen: `{"type":"screen","userId":"u_42","name":"Checkout",` +
		`"context":{"device":{"model":"iPhone15,2","type":"ios"},"os":{"name":"iOS","version":"17.4.1"},"app":{"build":"1042","name":"Acme","version":"3.8.0"},"ip":"198.51.100.23"}}`,
	message.TypeIdentify: `{"type":"identify","userId":"u_42",` +
		`"traits":{"email":"ada@acme.example","name":"Ada Lovelace","plan":"enterprise","logins":42,"created_at":"2023-11-02T08:15:00.000Z"},` +
		`"context":{"ip":"203.0.113.7"}}`,
	message.TypeTrack: `{"type":"track","userId":"u_42","event":"Order Completed",` +
		`"properties":{"order_id":"o_1001","revenue":99.90,"currency":"EUR","products":[{"sku":"sku-1","name":"Widget","quantity":2,"price":49.95}]},` +
		`"context":{"ip":"203.0.113.7"}}`,
	message.TypeAlias: `{"type":"alias","previousId":"a_9f8e7d","userId":"u_42","context":{"ip":"203.0.113.7"}}`,
	message.TypeGroup: `{"type":"group","userId":"u_42","groupId":"g_acme",` +
		`"traits":{"name":"Acme Inc.","industry":"Manufacturing","employees":420,"plan":"enterprise"},"context":{"ip":"203.0.113.7"}}`,
	TypeDelete: `{"type":"delete","userId":"u_42"}`,
}

// Sample returns a realistic collected message of type t with the given
// messageId and timestamp, for `evfwd trigger` and demos.
func Sample(t message.Type, at time.Time, messageID string) (*rawjson.Object, error) {
	s, ok := samples[t]
	if !ok {
		return nil, fmt.Errorf("no sample for type %q", t)
	}
	o, err := rawjson.ParseObject([]byte(s))
	if err != nil {
		return nil, err
	}
	if t != TypeDelete {
		o.SetString("messageId", messageID)
	}
	o.Set(keyTimestamp, rawjson.AppendString(nil, message.FormatTime(at)))
	return o, nil
}
