package inspector

import "testing"

// A wildcard listen address is no address to dial: DialAddr gives loopback.
func TestDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:8787":   "127.0.0.1:8787",
		"[::]:18797":     "127.0.0.1:18797",
		":8787":          "127.0.0.1:8787",
		"127.0.0.1:8787": "127.0.0.1:8787",
		"[::1]:8787":     "[::1]:8787",
		"10.0.0.5:8787":  "10.0.0.5:8787",
	} {
		if got := DialAddr(in); got != want {
			t.Errorf("DialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
