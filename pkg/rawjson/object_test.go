package rawjson

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseObjectKeepsBytes(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"exact digits", `{"n":12345678901234567890.000000001,"x":1e400}`, `{"n":12345678901234567890.000000001,"x":1e400}`},
		{"spaces compacted", "{ \"a\" : [ 1 , { \"b\" : \"c d\" } ] ,\n\"e\":true }", `{"a":[1,{"b":"c d"}],"e":true}`},
		{"escaped key", `{"a\"b":1,"\u00e9":null}`, `{"a\"b":1,"é":null}`},
		{"duplicate keeps first place last value", `{"a":1,"b":2,"a":3}`, `{"a":3,"b":2}`},
		{"empty", ` {} `, `{}`},
		{"nested strings with braces", `{"s":"}]{[,","o":{"k":"]"}}`, `{"s":"}]{[,","o":{"k":"]"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseObject([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(o.AppendJSON(nil))); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseObjectErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `"s"`, `{"a":}`, `{"a":1`, `{} {}`} {
		if _, err := ParseObject([]byte(in)); err == nil {
			t.Errorf("ParseObject(%q) = nil error", in)
		}
	}
}

func TestObjectEdits(t *testing.T) {
	o, _ := ParseObject([]byte(`{"type":"track","userId":"u1"}`))
	o.SetString("event", `Order "Completed" <b>`)
	o.Set("type", json.RawMessage(`"page"`))
	o.Delete("userId")
	if s, ok := o.GetString("event"); !ok || s != `Order "Completed" <b>` {
		t.Errorf("GetString = %q, %v", s, ok)
	}
	want := `{"type":"page","event":"Order \"Completed\" \u003cb\u003e"}`
	if diff := cmp.Diff(want, string(o.AppendJSON(nil))); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestObjectIndexedManyKeys(t *testing.T) {
	o := &Object{}
	for i := range 100 {
		o.Set(string(rune('A'+i%26))+string(rune('a'+i/26)), AppendInt(nil, int64(i)))
	}
	o.Delete("Aa")
	if o.Has("Aa") || o.Len() != 99 {
		t.Fatalf("delete with index: has=%v len=%d", o.Has("Aa"), o.Len())
	}
	if v, ok := o.Get("Zc"); !ok || string(v) != "77" {
		t.Errorf("Get(Zc) = %s, %v", v, ok)
	}
}

func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,{"b":"}"}],"c":"\""}`, `{ "x" : -1.5e3 , "y":null}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := ParseObject(data)
		if err != nil {
			return
		}
		out := o.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("output not valid JSON: %s", out)
		}
		var want, got map[string]any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("input accepted but encoding/json rejects it: %v", err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round trip changed meaning (-want +got):\n%s", diff)
		}
	})
}

func BenchmarkParseObject(b *testing.B) {
	line := []byte(`{"type":"track","userId":"user_8f14e45f","event":"Order Completed","properties":{"order_id":"ord_0042","total":129.95,"currency":"EUR","products":[{"sku":"SKU-1","price":129.95,"quantity":1}]},"context":{"ip":"203.0.113.7","locale":"en-US"},"timestamp":"2024-05-01T12:00:00.000Z","messageId":"0b1c4b2e-7d1f-4f67-a3c4-5d2b8e0f9a11"}`)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseObject(line); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseObjectAgreesWithEncodingJSON: ParseObject accepts exactly the
// JSON objects encoding/json accepts.
func FuzzParseObjectAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":-0.5e+3,"b":[true,false,null],"c":{"d":"\u00e9\n"}}`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, `{"a":tru}`, "{\"a\":\"\x01\"}", `{"a":1,}`, `{} x`, `[1]`, `{"a" 1}`, `{"a":[1,]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		valid := json.Unmarshal(data, &v) == nil
		_, isObject := v.(map[string]any)
		_, err := ParseObject(data)
		if (err == nil) != (valid && isObject) {
			t.Fatalf("ParseObject(%q) err = %v; encoding/json valid=%v object=%v", data, err, valid, isObject)
		}
	})
}

func TestAppendWithMember(t *testing.T) {
	lib := json.RawMessage(`{"name":"evfwd"}`)
	tests := []struct{ in, want string }{
		{`{}`, `{"library":{"name":"evfwd"}}`},
		{`{"ip":"1.2.3.4"}`, `{"ip":"1.2.3.4","library":{"name":"evfwd"}}`},
		{`{"library":{"name":"old"},"ip":"x"}`, `{"library":{"name":"evfwd"},"ip":"x"}`},
		{`{"a":1,"library":2,"b":[1, 2],"library":3}`, `{"a":1,"library":{"name":"evfwd"},"b":[1,2]}`},
		{`{"libr\u0061ry":1}`, `{"libr\u0061ry":{"name":"evfwd"}}`},
		{`{"n":12345678901234567890.000000001}`, `{"n":12345678901234567890.000000001,"library":{"name":"evfwd"}}`},
	}
	for _, tt := range tests {
		got, err := AppendWithMember([]byte("x"), []byte(tt.in), "library", lib)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if diff := cmp.Diff("x"+tt.want, string(got)); diff != "" {
			t.Errorf("%s: mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
	if _, err := AppendWithMember(nil, []byte(`[1]`), "library", lib); err == nil {
		t.Error("an array was accepted as an object")
	}
}
