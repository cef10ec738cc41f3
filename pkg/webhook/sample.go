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

// SampleSources are the kinds of source SampleFrom knows, after the
// collector's: what a server library, Analytics.js in a browser and an app
// library (analytics-kotlin) send, as serve forwards it.
var SampleSources = []string{"server", "web", "mobile"}

// deviceContexts are the context of a message from a web page and from an
// Android app as those libraries build it, with the context.ip serve adds.
var deviceContexts = map[string]string{
	"web": `{"library":{"name":"analytics.js","version":"npm:next-1.84.3"},"locale":"en-US",` +
		`"page":{"path":"/pricing","referrer":"https://www.google.com/","search":"","title":"Pricing | Acme","url":"https://acme.example/pricing"},` +
		`"userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36",` +
		`"userAgentData":{"brands":[{"brand":"Chromium","version":"156"},{"brand":"Google Chrome","version":"156"}],"mobile":false,"platform":"macOS"},` +
		`"timezone":"America/New_York","ip":"203.0.113.7"}`,
	"mobile": `{"library":{"name":"analytics-kotlin","version":"1.25.0"},"instanceId":"0b6e4d3c-1a2b-4c5d-8e9f-0a1b2c3d4e5f",` +
		`"app":{"name":"Acme","version":"3.8.0","namespace":"com.acme.app","build":"1042"},` +
		`"device":{"id":"5c3b0f2d9a1e4b7c","manufacturer":"Google","model":"Pixel 8","name":"shiba","type":"android"},` +
		`"os":{"name":"Android","version":"15"},"screen":{"density":2.625,"height":2400,"width":1080},` +
		`"network":{"wifi":true,"carrier":"T-Mobile","cellular":false,"bluetooth":false},"locale":"en-US",` +
		`"userAgent":"Dalvik/2.1.0 (Linux; U; Android 15; Pixel 8 Build/AP4A.250105.002)","timezone":"America/New_York","ip":"198.51.100.23"}`,
}

// deviceSkew is how far the sample device's clock runs ahead: serve keeps
// that time as originalTimestamp and corrects timestamp.
const deviceSkew = 2417 * time.Millisecond

// SampleFrom is Sample as a source of the given kind (SampleSources)
// sends it and serve forwards it: for web and mobile, the context those
// libraries build, an anonymousId, and the device's own clock kept as
// originalTimestamp beside the corrected timestamp. A delete has no
// source: it is the same from every kind.
func SampleFrom(source string, t message.Type, at time.Time, messageID string) (*rawjson.Object, error) {
	o, err := Sample(t, at, messageID)
	if err != nil || source == "server" || t == TypeDelete {
		return o, err
	}
	ctx, ok := deviceContexts[source]
	if !ok {
		return nil, fmt.Errorf("no sample from %q: want server, web or mobile", source)
	}
	o.Set("context", []byte(ctx))
	if !o.Has("anonymousId") {
		o.SetString("anonymousId", "4c7c4e1e-2b7e-4b8e-9d3f-5a6b7c8d9e0f")
	}
	o.SetString("originalTimestamp", message.FormatTime(at.Add(deviceSkew)))
	return o, nil
}
