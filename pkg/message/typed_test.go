package message

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/rawjson"
	"github.com/google/go-cmp/cmp"
)

func TestValidateTyped(t *testing.T) {
	long := strings.Repeat("x", 101)
	tests := []struct {
		name string
		msg  Message
		want *ValidationError // nil: valid
	}{
		{"identify ok user", Identify{UserId: "u"}, nil},
		{"identify ok anon", Identify{AnonymousId: "a"}, nil},
		{"identify no ids", Identify{}, &ValidationError{TypeIdentify, "userId or anonymousId", "is required"}},
		{"track ok", Track{UserId: "u", Event: "e"}, nil},
		{"track no event", Track{UserId: "u"}, &ValidationError{TypeTrack, "event", "is required"}},
		{"track no ids", Track{Event: "e"}, &ValidationError{TypeTrack, "userId or anonymousId", "is required"}},
		{"page no name no category", Page{UserId: "u"}, nil},
		{"page name only", Page{UserId: "u", Name: "Home"}, nil},
		{"page category without name", Page{UserId: "u", Category: "Docs"}, &ValidationError{TypePage, "name", "is required when category is set"}},
		{"screen category without name", Screen{AnonymousId: "a", Category: "Docs"}, &ValidationError{TypeScreen, "name", "is required when category is set"}},
		{"group ok", Group{UserId: "u", GroupId: "g"}, nil},
		{"group no group id", Group{UserId: "u"}, &ValidationError{TypeGroup, "groupId", "is required"}},
		{"alias ok", Alias{UserId: "u", PreviousId: "p"}, nil},
		{"alias no user", Alias{PreviousId: "p"}, &ValidationError{TypeAlias, "userId", "is required"}},
		{"alias no previous", Alias{UserId: "u"}, &ValidationError{TypeAlias, "previousId", "is required"}},
		{"message id too long", Track{UserId: "u", Event: "e", MessageId: long}, &ValidationError{TypeTrack, "messageId", "is longer than 100 characters"}},
		{"message id 100 runes", Track{UserId: "u", Event: "e", MessageId: strings.Repeat("é", 100)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.msg.Validate()
			var got *ValidationError
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("error %v is not a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidationErrorText(t *testing.T) {
	tests := []struct {
		msg  Message
		want string
	}{
		{Track{}, "userId or anonymousId is required"},
		{Track{UserId: "u"}, "event is required"},
		{Page{UserId: "u", Category: "c"}, "name is required when category is set"},
		{Group{UserId: "u"}, "groupId is required"},
		{Alias{UserId: "u"}, "previousId is required"},
		{Alias{PreviousId: "p"}, "userId is required"},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.msg.Validate().Error()); diff != "" {
			t.Errorf("%T: mismatch (-want +got):\n%s", tt.msg, diff)
		}
	}
}

var ts = time.Date(2024, 5, 1, 12, 0, 0, 123_456_789, time.FixedZone("CEST", 2*3600))

func TestAppendJSONTyped(t *testing.T) {
	lib := &EncodeOptions{Library: LibraryJSON("evfwd", "1.2.3")}
	tests := []struct {
		name string
		msg  Message
		opts *EncodeOptions
		want string
	}{
		{
			name: "track full",
			msg: Track{UserId: "u1", AnonymousId: "a1", Event: "Order Completed", MessageId: "m1", Timestamp: ts,
				Properties:   map[string]any{"total": 12.5, "items": []any{"a", 2, true, nil}, "coupon": "<&>"},
				Context:      map[string]any{"ip": "1.2.3.4", "library": map[string]any{"name": "theirs"}},
				Integrations: map[string]any{"All": false, "Webhooks": true}},
			opts: lib,
			want: `{"type":"track","messageId":"m1","timestamp":"2024-05-01T10:00:00.123Z","userId":"u1","anonymousId":"a1","event":"Order Completed","properties":{"coupon":"\u003c\u0026\u003e","items":["a",2,true,null],"total":12.5},"context":{"library":{"name":"evfwd","version":"1.2.3"},"ip":"1.2.3.4"},"integrations":{"All":false,"Webhooks":true}}`,
		},
		{
			name: "track without options keeps caller's library",
			msg:  Track{UserId: "u1", Event: "e", Context: map[string]any{"library": "x"}},
			want: `{"type":"track","userId":"u1","event":"e","context":{"library":"x"}}`,
		},
		{
			name: "identify minimal gets context",
			msg:  Identify{AnonymousId: "a"},
			opts: lib,
			want: `{"type":"identify","anonymousId":"a","context":{"library":{"name":"evfwd","version":"1.2.3"}}}`,
		},
		{
			name: "identify traits",
			msg:  Identify{UserId: "u", Traits: map[string]any{"email": "a@b.c", "age": int64(40)}},
			want: `{"type":"identify","userId":"u","traits":{"age":40,"email":"a@b.c"}}`,
		},
		{
			name: "page",
			msg:  Page{UserId: "u", Name: "Pricing", Category: "Docs", Properties: map[string]any{}},
			want: `{"type":"page","userId":"u","name":"Pricing","category":"Docs","properties":{}}`,
		},
		{
			name: "screen",
			msg:  Screen{UserId: "u", Name: "Home"},
			want: `{"type":"screen","userId":"u","name":"Home"}`,
		},
		{
			name: "group",
			msg:  Group{UserId: "u", GroupId: "g1", Traits: map[string]any{"plan": "pro"}},
			want: `{"type":"group","userId":"u","groupId":"g1","traits":{"plan":"pro"}}`,
		},
		{
			name: "alias",
			msg:  Alias{UserId: "new", PreviousId: "old"},
			want: `{"type":"alias","userId":"new","previousId":"old"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.msg.AppendJSON(nil, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON: %s", got)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecimalsAsStrings(t *testing.T) {
	bf, _, err := big.ParseFloat("12345678901234567890.000000001", 10, 200, big.ToNearestEven)
	if err != nil {
		t.Fatal(err)
	}
	bi, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
	props := map[string]any{
		"float":   bf,
		"int":     bi,
		"rat":     big.NewRat(1, 8),
		"third":   big.NewRat(1, 3),
		"whole":   big.NewRat(10, 2),
		"nilint":  (*big.Int)(nil),
		"nested":  map[string]any{"list": []any{big.NewRat(5, 4)}},
		"number":  json.Number("1.50"),
		"raw":     json.RawMessage(`{ "a" : [1, 2] }`),
		"when":    ts,
		"f32":     float32(0.1),
		"tiny":    1e-7,
		"huge":    1e21,
		"strings": []string{"a"},
		"labels":  map[string]string{"k": "v"},
		"struct":  struct{ A int }{1},
	}
	got, err := rawjson.AppendValue(nil, props)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"f32":0.1,"float":"12345678901234567890.000000001","huge":1e+21,"int":"123456789012345678901234567890","labels":{"k":"v"},"nested":{"list":["1.25"]},"nilint":null,"number":1.50,"rat":"0.125","raw":{"a":[1,2]},"strings":["a"],"struct":{"A":1},"third":"1/3","tiny":1e-7,"when":"2024-05-01T10:00:00.123Z","whole":"5"}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestAppendValueErrors(t *testing.T) {
	loop := map[string]any{}
	loop["self"] = loop
	tests := map[string]any{
		"nan":         map[string]any{"x": func() float64 { z := 0.0; return z / z }()},
		"bad number":  json.Number("1.2.3"),
		"bad raw":     json.RawMessage(`{`),
		"cycle":       loop,
		"unsupported": map[string]any{"ch": make(chan int)},
	}
	for name, v := range tests {
		if _, err := rawjson.AppendValue(nil, v); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	if _, err := (Track{UserId: "u", Event: "e", Properties: map[string]any{"c": make(chan int)}}).AppendJSON(nil, nil); err == nil {
		t.Error("track with a channel property: want an error")
	}
}

// The string encoder must agree with encoding/json byte for byte.
func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "\x00\x01\x1f\b\f\n\r\t", "<a href='x'>&</a>", "héllo ✓ 😀", "bad \xff utf8 \xc3", "\u2028\u2029", "\x7f"} {
		checkStringEncoding(t, s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add("héllo <\x00>")
	f.Fuzz(checkStringEncoding)
}

func checkStringEncoding(t *testing.T, s string) {
	want, _ := json.Marshal(s)
	if diff := cmp.Diff(string(want), string(rawjson.AppendString(nil, s))); diff != "" {
		t.Errorf("%q: mismatch (-want +got):\n%s", s, diff)
	}
}

func TestAppendTimeMatchesFormatTime(t *testing.T) {
	got, _ := rawjson.AppendValue(nil, ts)
	if diff := cmp.Diff(`"`+FormatTime(ts)+`"`, string(got)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestCheckSize(t *testing.T) {
	if err := CheckSize(MaxMessageBytes); err != nil {
		t.Errorf("exactly the limit: %v", err)
	}
	err := CheckSize(MaxMessageBytes + 1)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
	if diff := cmp.Diff("message is 32769 bytes, over the 32768-byte limit", err.Error()); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
