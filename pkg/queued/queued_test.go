package queued_test

import (
	"errors"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/queued"
	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/evfwd/evfwd/pkg/store"
	"github.com/evfwd/evfwd/pkg/store/storetest"
	"github.com/evfwd/evfwd/pkg/webhook"
)

// A body an older evfwd stored in the collected form is sent as the
// webhook body it was sent as then.
func TestBodyOfCollectedForm(t *testing.T) {
	const sentBefore = `{"type":"alias","version":1,"User ID":"u_2","Previous ID":"a_1",` +
		`"timestamp":"2024-05-01T12:00:00.000Z","context":{"ip":"203.0.113.7"},"receivedAt":"2024-05-01T12:00:02.000Z"}`
	body, err := queued.Body([]byte(storetest.CollectedBody), store.FormCollected)
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != sentBefore {
		t.Errorf("sent\n got %s\nwant %s", body, sentBefore)
	}
}

func TestBody(t *testing.T) {
	wire := []byte(`{"type":"track","version":1}`)
	if b, err := queued.Body(wire, store.FormWire); err != nil || string(b) != string(wire) {
		t.Errorf("wire: %s, %v", b, err)
	}
	if _, err := queued.Body(nil, store.FormWire); !errors.Is(err, queued.ErrPurged) {
		t.Errorf("purged: %v, want ErrPurged", err)
	}
	if _, err := queued.Body(wire, store.Form(99)); err == nil {
		t.Error("unknown form: no error")
	}
	if _, err := queued.Body([]byte(`{"type":`), store.FormCollected); err == nil {
		t.Error("broken collected body: no error")
	}
}

func TestNew(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 2, 0, time.UTC)
	for _, tc := range []struct{ in, user string }{
		{`{"type":"track","event":"E","userId":"u1","anonymousId":"a1","messageId":"m1","timestamp":"2024-05-01T12:00:00Z"}`, "u1"},
		{`{"type":"track","event":"E","anonymousId":"a1","messageId":"m1","timestamp":"2024-05-01T12:00:00Z"}`, "a1"},
	} {
		obj, err := rawjson.ParseObject([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		m, err := queued.New("web", obj, at, []string{store.DestinationWebhooks})
		if err != nil {
			t.Fatal(err)
		}
		want, err := webhook.Body(obj)
		if err != nil {
			t.Fatal(err)
		}
		if m.Source != "web" || m.Type != "track" || m.MessageID != "m1" || m.UserID != tc.user ||
			!m.ReceivedAt.Equal(at) || m.Form != store.FormWire || string(m.Body) != string(want) {
			t.Errorf("%s: got %+v", tc.in, m)
		}
		if got, _ := obj.GetString("receivedAt"); got != "2024-05-01T12:00:02.000Z" {
			t.Errorf("receivedAt %q", got)
		}
	}
}
