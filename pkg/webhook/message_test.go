package webhook

import (
	"errors"
	"testing"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/google/go-cmp/cmp"
)

func TestNewMessageErrors(t *testing.T) {
	_, err := NewMessage(message.TypeTrack, []byte(`{"type":"page"}`), t0, "m1")
	var te *TypeError
	if !errors.As(err, &te) || *te != (TypeError{Got: "page", Want: "track"}) {
		t.Errorf("other type: %v, want a *TypeError", err)
	}
	for _, data := range []string{`{"type":`, `[1]`, ``} {
		if _, err := NewMessage(message.TypeTrack, []byte(data), t0, "m1"); err == nil {
			t.Errorf("data %q: no error", data)
		}
	}
	if _, err := NewMessage("merge", nil, t0, "m1"); err == nil {
		t.Error("type merge: no error")
	}
}

func TestNewMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		typ  message.Type
		data string // "" for none
		want string
	}{
		{"given, filled in", message.TypeTrack, `{"event":"E","n":1.50}`,
			`{"event":"E","n":1.50,"type":"track","messageId":"m1","timestamp":"2024-05-01T12:00:00.000Z"}`},
		{"given, kept", message.TypeTrack, `{"type":"track","messageId":"own","timestamp":"2024-01-01T00:00:00Z","event":"E"}`,
			`{"type":"track","messageId":"own","timestamp":"2024-01-01T00:00:00Z","event":"E"}`},
		{"delete has no messageId", TypeDelete, `{"userId":"u"}`,
			`{"userId":"u","type":"delete","timestamp":"2024-05-01T12:00:00.000Z"}`},
		{"sample", TypeDelete, "", `{"type":"delete","userId":"u_42","timestamp":"2024-05-01T12:00:00.000Z"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var data []byte
			if tt.data != "" {
				data = []byte(tt.data)
			}
			msg, err := NewMessage(tt.typ, data, t0, "m1")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(msg.AppendJSON(nil))); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	sample, err := NewMessage(message.TypePage, nil, t0, "m1")
	if id, _ := sample.GetString("messageId"); err != nil || id != "m1" {
		t.Errorf("page sample: messageId %q, %v; want m1", id, err)
	}
}
