package collector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

// referenceBatch is how a batch body was parsed before parseBatch scanned
// it in one pass: the whole body with rawjson.ParseObject, the batch array
// with encoding/json (its elements compacted, as ParseObject compacts a
// value holding whitespace), and the batch level from the parsed object.
func referenceBatch(body []byte) (elems []json.RawMessage, context, integrations []byte, writeKey string, err error) {
	top, err := rawjson.ParseObject(body)
	if err != nil {
		return nil, nil, nil, "", fmt.Errorf("invalid JSON: %v", err)
	}
	writeKey, _ = top.GetString("writeKey")
	for _, k := range [...]string{"context", "integrations"} {
		v, ok := top.Get(k)
		if !ok || string(v) == "null" {
			continue
		}
		if v[0] != '{' {
			return nil, nil, nil, "", fmt.Errorf("%s must be an object", k)
		}
		var buf bytes.Buffer
		json.Compact(&buf, v)
		if k == "context" {
			context = buf.Bytes()
		} else {
			integrations = buf.Bytes()
		}
	}
	raw, ok := top.Get("batch")
	if !ok || string(raw) == "null" {
		return nil, nil, nil, "", errors.New("batch is required")
	}
	if raw[0] != '[' {
		return nil, nil, nil, "", errors.New("batch must be an array")
	}
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, nil, nil, "", err
	}
	return elems, context, integrations, writeKey, nil
}

// FuzzParseBatch holds the one-pass parseBatch to the parse it replaced:
// the same error, batch level and messages, each measured the same.
func FuzzParseBatch(f *testing.F) {
	f.Add([]byte(`{"batch":[{"type":"track","userId":"u","event":"E"}],"context":{"a":1},"integrations":{"All":false},"writeKey":"k"}`))
	f.Add([]byte(` { "batch" : [ { "type" : "track" , "p" : [1, 2] } , 3 ,"s"] , "context" : { "x" : " y " } } `))
	f.Add([]byte(`{"batch":[1],"batch":null}`))
	f.Add([]byte(`{"batch":{},"b\u0061tch":[{}],"writeKey":"a","writeKey":1}`))
	f.Add([]byte(`{"batch":[{"a":"\"]"}, {"b":"\\"}]}`))
	f.Add([]byte(`{"batch":[],"context":"s"}`))
	f.Add([]byte(`{"batch":[{}],}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		body = validUTF8(body)
		elems, context, integrations, writeKey, refErr := referenceBatch(body)
		b, err := parseBatch(body)
		if (err != nil) != (refErr != nil) {
			t.Fatalf("%q: error %v, reference %v", body, err, refErr)
		}
		if err != nil {
			if err.Error() != refErr.Error() {
				t.Fatalf("%q: error %q, reference %q", body, err, refErr)
			}
			return
		}
		if b.writeKey != writeKey || string(b.context.raw) != string(context) || string(b.integrations.raw) != string(integrations) {
			t.Fatalf("%q: batch level %q %s %s, reference %q %s %s", body, b.writeKey, b.context.raw, b.integrations.raw, writeKey, context, integrations)
		}
		if len(b.elems) != len(elems) {
			t.Fatalf("%q: %d messages, reference %d", body, len(b.elems), len(elems))
		}
		for i, e := range b.elems {
			var compact bytes.Buffer
			json.Compact(&compact, elems[i])
			if e.size != compact.Len() {
				t.Fatalf("%q: message %d measures %d, reference %d", body, i, e.size, compact.Len())
			}
			got, gerr := rawjson.ParseObject(e.data)
			want, werr := rawjson.ParseObject(elems[i])
			if (gerr != nil) != (werr != nil) || gerr == nil && string(got.AppendJSON(nil)) != string(want.AppendJSON(nil)) {
				t.Fatalf("%q: message %d is %s, reference %s", body, i, e.data, elems[i])
			}
		}
	})
}
