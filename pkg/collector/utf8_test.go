package collector

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestValidUTF8AsEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"plain", "héllo ✓ 😀", "bad \xff utf8 \xc3", "\xc3\x28", "\xe2\x82", "\xe2\x82\x28", "\xf0\x9f\x98",
		"\xed\xa0\x80", // a surrogate written as UTF-8
		"\xf4\x90\x80\x80", "\x80\x80\x80", "\xc0\xaf", "end\xf0",
	} {
		quoted := append(append([]byte{'"'}, s...), '"')
		var want string
		if err := json.Unmarshal(quoted, &want); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		got := validUTF8(quoted)
		if !utf8.Valid(got) || string(got) != `"`+want+`"` {
			t.Errorf("validUTF8(%q) = %q, want %q", quoted, got, `"`+want+`"`)
		}
	}
	valid := []byte(`{"userId":"héllo"}`)
	if got := validUTF8(valid); &got[0] != &valid[0] {
		t.Error("a valid body was copied")
	}
}

// FuzzValidUTF8 holds validUTF8 to encoding/json: a valid JSON document
// stays valid and decodes to what the original decodes to, and the result
// is valid UTF-8.
func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{`{"userId":"u\xff"}`, `["\xc3", "\xe2\x82\x28", {"k\x80":1}]`, `"\ud800"`, `not json \xff`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := validUTF8(bytes.Clone(data))
		if !utf8.Valid(got) {
			t.Fatalf("validUTF8(%q) = %q: not valid UTF-8", data, got)
		}
		var want, have any
		if json.Unmarshal(data, &want) != nil {
			return
		}
		if err := json.Unmarshal(got, &have); err != nil {
			t.Fatalf("validUTF8(%q) = %q: %v", data, got, err)
		}
		w, _ := json.Marshal(want)
		h, _ := json.Marshal(have)
		if !bytes.Equal(w, h) {
			t.Fatalf("validUTF8(%q) decodes to %s, the original to %s", data, h, w)
		}
	})
}
