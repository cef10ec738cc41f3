package webhook

import "testing"

// TestMissingScheme: the edges the flag tests (internal/cli) do not walk:
// a scheme-relative URL gets its scheme, a bare path is left to the
// caller's "must be absolute".
func TestMissingScheme(t *testing.T) {
	for _, tt := range []struct {
		in, shown, fix string
		ok             bool
	}{
		{"//hooks.example/in", "//hooks.example/in", "no scheme; did you mean https://hooks.example/in?", true},
		{"//127.0.0.1:9100/x?k=v", "//127.0.0.1:9100/x?k=****", "no scheme; did you mean http://127.0.0.1:9100/x?k=****?", true},
		{"/hooks", "", "", false},
		{"https://hooks.example/in", "", "", false},
	} {
		shown, fix, ok := MissingScheme(tt.in)
		if shown != tt.shown || fix != tt.fix || ok != tt.ok {
			t.Errorf("MissingScheme(%q) = %q, %q, %v; want %q, %q, %v", tt.in, shown, fix, ok, tt.shown, tt.fix, tt.ok)
		}
	}
}
