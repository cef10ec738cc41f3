package cli

import "testing"

func TestSuggestFlag(t *testing.T) {
	names := []string{"user-id", "anonymous-id", "event", "property", "write-key", "endpoint", "output", "config", "secret", "secret-file"}
	for _, tt := range []struct{ typed, want string }{
		{"user", "user-id"},           // the start of one flag
		{"USER", "user-id"},           // case
		{"usr-id", "user-id"},         // one letter out
		{"evnet", "event"},            // a swap
		{"sercet", "secret"},          // a swap, though secret-file begins alike
		{"secret-fil", "secret-file"}, // the start of one flag
		{"user-ids", "user-id"},       // one too many: edit distance
		{"propertys", "property"},
		{"endpoints-all", "endpoint"}, // a flag, then more
		{"e", ""},                     // the start of several
		{"zzz", ""},                   // nothing near
		{"", ""},
	} {
		if got := SuggestFlag(tt.typed, names); got != tt.want {
			t.Errorf("SuggestFlag(%q) = %q, want %q", tt.typed, got, tt.want)
		}
	}
}
