package receiver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/webhook"
)

func TestCheckShape(t *testing.T) {
	const ts = `"timestamp":"2024-05-01T12:00:00.123Z"`
	tests := []struct {
		name string
		body string
		want string // "" for a valid message
	}{
		{"track", `{"type":"track","version":1,"userId":"u_42","event":"Order Completed","properties":{"total":12.5},` + ts + `}`, ""},
		{"track anonymous", `{"type":"track","version":1,"anonymousId":"a1","event":"E",` + ts + `}`, ""},
		{"track userId null", `{"type":"track","version":1,"userId":null,"anonymousId":"a1","event":"E",` + ts + `}`, ""},
		{"both null", `{"type":"track","version":1,"userId":null,"anonymousId":null,"event":"E",` + ts + `}`, "missing userId"},
		{"null members", `{"type":"page","version":1,"userId":"u","name":null,"properties":null,"context":null,"integrations":null,` + ts + `}`, ""},
		{"null page url", `{"type":"page","version":1,"userId":"u","properties":{"url":null},` + ts + `}`, ""},
		{"track without event", `{"type":"track","version":1,"userId":"u",` + ts + `}`, "missing event"},
		{"track event number", `{"type":"track","version":1,"userId":"u","event":3,` + ts + `}`, "event not a string"},
		{"track properties array", `{"type":"track","version":1,"userId":"u","event":"E","properties":[],` + ts + `}`, "properties not an object"},
		{"missing version", `{"type":"track","userId":"u","event":"E",` + ts + `}`, "missing version"},
		{"version 2", `{"type":"identify","version":2,"userId":"u",` + ts + `}`, "version not 1"},
		{"version string", `{"type":"identify","version":"1","userId":"u",` + ts + `}`, "version not 1"},
		{"identify", `{"type":"identify","version":1,"userId":"u","traits":{"plan":"pro"},` + ts + `}`, ""},
		{"identify traits string", `{"type":"identify","version":1,"userId":"u","traits":"x",` + ts + `}`, "traits not an object"},
		{"no user", `{"type":"identify","version":1,` + ts + `}`, "missing userId"},
		{"userId number", `{"type":"identify","version":1,"userId":42,` + ts + `}`, "userId not a string"},
		{"page", `{"type":"page","version":1,"userId":"u","properties":{"path":"/","url":"https://x"},` + ts + `}`, ""},
		{"page bad url", `{"type":"page","version":1,"userId":"u","properties":{"url":1},` + ts + `}`, "properties.url not a string"},
		{"screen", `{"type":"screen","version":1,"userId":"u","name":"Home",` + ts + `}`, ""},
		{"group", `{"type":"group","version":1,"userId":"u","groupId":"g","traits":{},` + ts + `}`, ""},
		{"group without groupId", `{"type":"group","version":1,"userId":"u",` + ts + `}`, "missing groupId"},
		{"alias", `{"type":"alias","version":1,"Previous ID":"old","User ID":"new",` + ts + `}`, ""},
		{"alias with userId only", `{"type":"alias","version":1,"previousId":"old","userId":"new",` + ts + `}`, `missing "Previous ID"`},
		{"delete", `{"type":"delete","userId":"u",` + ts + `}`, ""},
		{"delete with version", `{"type":"delete","version":1,"userId":"u",` + ts + `}`, "version on delete"},
		{"delete with extra", `{"type":"delete","userId":"u","messageId":"m",` + ts + `}`, `unexpected "messageId" on delete`},
		{"delete without user", `{"type":"delete",` + ts + `}`, "missing userId"},
		{"unknown type", `{"type":"purchase","version":1,"userId":"u",` + ts + `}`, `unknown type "purchase"`},
		{"missing type", `{"version":1,"userId":"u",` + ts + `}`, "missing type"},
		{"missing timestamp", `{"type":"identify","version":1,"userId":"u"}`, "missing timestamp"},
		{"timestamp offset", `{"type":"identify","version":1,"userId":"u","timestamp":"2024-05-01T14:00:00.123+02:00"}`, "timestamp not UTC millis"},
		{"timestamp seconds", `{"type":"identify","version":1,"userId":"u","timestamp":"2024-05-01T12:00:00Z"}`, "timestamp not UTC millis"},
		{"timestamp nonsense", `{"type":"identify","version":1,"userId":"u","timestamp":"2024-13-01T12:00:00.123Z"}`, "timestamp not UTC millis"},
		{"messageId number", `{"type":"identify","version":1,"userId":"u","messageId":1,` + ts + `}`, "messageId not a string"},
		{"context string", `{"type":"identify","version":1,"userId":"u","context":"x",` + ts + `}`, "context not an object"},
		{"array", `[1,2]`, "not a JSON object"},
		{"garbage", `{"type":`, "not JSON"},
		{"empty", ``, "empty body"},
		{"pretty", "{\n  \"type\": \"delete\",\n  \"userId\": \"u\",\n  " + ts + "\n}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := CheckShape([]byte(tt.body)); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckShapeClients: every message Segment's libraries send, as the
// webhook serve makes of it, passes: Analytics.js's (an anonymous visitor's
// page and track, "userId":null, captured from the library in Chromium by
// cmd's TestBrowserAnalyticsJSScriptTag -update), analytics-kotlin's and
// analytics-swift's (pkg/serve's fixtures).
func TestCheckShapeClients(t *testing.T) {
	for _, file := range []string{
		filepath.Join("testdata", "analyticsjs-anonymous.json"),
		filepath.Join("..", "serve", "testdata", "mobile", "kotlin-batch.json"),
		filepath.Join("..", "serve", "testdata", "mobile", "swift-batch.json"),
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var batch struct{ Batch []json.RawMessage }
		if err := json.Unmarshal(b, &batch); err != nil || len(batch.Batch) == 0 {
			t.Fatalf("%s: %v, %d messages", file, err, len(batch.Batch))
		}
		for i, raw := range batch.Batch {
			msg, err := rawjson.ParseObject(raw)
			if err != nil {
				t.Fatalf("%s: message %d: %v", file, i, err)
			}
			m, err := queued.New("app", msg, time.Now(), nil)
			if err != nil {
				t.Fatalf("%s: message %d: %v", file, i, err)
			}
			if err := CheckShape(m.Body); err != nil {
				t.Errorf("%s: message %d: shape ✗ %v: %s", filepath.Base(file), i, err, m.Body)
			}
		}
	}
}

func FuzzCheckShape(f *testing.F) {
	f.Add([]byte(`{"type":"track","version":1,"userId":"u","event":"E","timestamp":"2024-05-01T12:00:00.123Z"}`))
	f.Add([]byte(`{"type":"alias","version":1,"Previous ID":"a","User ID":"b","timestamp":"2024-05-01T12:00:00.123Z"}`))
	f.Add([]byte(`{"type":"delete","userId":"u","timestamp":"2024-05-01T12:00:00.123Z"}`))
	f.Add([]byte(`{"type":"page","version":1,"userId":"u","properties":{"url":"x"},"timestamp":"2024-05-01T12:00:00.123Z"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := CheckShape(body)
		if err == nil {
			// A body that passes is an object with a known type.
			o, perr := rawjson.ParseObject(body)
			if perr != nil {
				t.Fatalf("accepted a body ParseObject rejects: %v", perr)
			}
			typ, _ := o.GetString("type")
			if !webhook.ValidType(message.Type(typ)) {
				t.Fatalf("accepted type %q", typ)
			}
			return
		}
		if _, ok := err.(*ShapeError); !ok || err.Error() == "" {
			t.Fatalf("error %T %q, want a *ShapeError with a reason", err, err)
		}
	})
}
