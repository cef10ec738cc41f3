package hostcheck

import "testing"

func TestAllows(t *testing.T) {
	for _, tc := range []struct {
		addr, def string
		names     []string
		host      string
		want      bool
	}{
		{"127.0.0.1:8787", "80", nil, "127.0.0.1:8787", true},
		{"127.0.0.1:8787", "80", nil, "localhost:8787", true},
		{"127.0.0.1:8787", "80", nil, "LOCALHOST:8787", true},
		{"127.0.0.1:8787", "80", nil, "[::1]:8787", true},
		{"127.0.0.1:8787", "80", nil, "10.0.0.7:8787", true},
		{"127.0.0.1:8787", "80", nil, "evil.test:8787", false},
		{"127.0.0.1:8787", "80", nil, "localhost:9999", false},
		{"127.0.0.1:8787", "80", nil, "localhost", false},
		{"127.0.0.1:80", "80", nil, "localhost", true},
		{"127.0.0.1:443", "443", nil, "127.0.0.1", true},
		{"127.0.0.1:8787", "80", nil, "", false},
		{"myhost:8787", "80", nil, "MyHost:8787", true},
		{"0.0.0.0:8787", "80", []string{"evfwd.internal"}, "evfwd.internal", true},
		{"0.0.0.0:8787", "80", []string{"evfwd.internal"}, "EVFWD.internal:443", true},
		{"0.0.0.0:8787", "80", []string{"evfwd.internal"}, "other.internal:8787", false},
		{"0.0.0.0:8787", "80", []string{"evfwd.internal"}, "evfwd.internal.evil.test:8787", false},
	} {
		if got := New(tc.addr, tc.def, tc.names...).Allows(tc.host); got != tc.want {
			t.Errorf("New(%q, %q, %q).Allows(%q) = %v, want %v", tc.addr, tc.def, tc.names, tc.host, got, tc.want)
		}
	}
}
