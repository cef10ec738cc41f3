package inspector

import (
	"strings"
	"testing"
)

func TestHostCheck(t *testing.T) {
	for _, tc := range []struct {
		addr, host string
		want       bool
	}{
		{"127.0.0.1:8789", "127.0.0.1:8789", true},
		{"127.0.0.1:8789", "localhost:8789", true},
		{"127.0.0.1:8789", "LOCALHOST:8789", true},
		{"127.0.0.1:8789", "[::1]:8789", true},
		{"127.0.0.1:8789", "10.0.0.5:8789", true}, // an IP is no rebinding
		{"127.0.0.1:8789", "evil.example:8789", false},
		{"127.0.0.1:8789", "localhost.:8789", false},
		{"127.0.0.1:8789", "127.0.0.1:8790", false},
		{"127.0.0.1:8789", "127.0.0.1", false},
		{"127.0.0.1:80", "127.0.0.1", true}, // browsers leave out :80
		{"127.0.0.1:80", "localhost", true},
		{"127.0.0.1:80", "evil.example", false},
		{"[::1]:80", "[::1]", true},
		{"myhost:8789", "myhost:8789", true},
		{"myhost:8789", "", false},
	} {
		if got := newHostCheck(tc.addr).allows(tc.host); got != tc.want {
			t.Errorf("listening on %s, Host %q: allowed %v, want %v", tc.addr, tc.host, got, tc.want)
		}
	}
}

func TestEachLineSkipsLongLines(t *testing.T) {
	in := "a\n" + strings.Repeat("x", 100) + "\nbb\n" + strings.Repeat("y", 10) + "\ncc"
	var got []string
	if err := eachLine(strings.NewReader(in), 10, func(b []byte) { got = append(got, string(b)) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "bb", strings.Repeat("y", 10), "cc"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// Lines longer than the reader's buffer come in pieces.
func TestEachLineAcrossTheBuffer(t *testing.T) {
	long, kept := strings.Repeat("x", 300_000), strings.Repeat("y", 150_000)
	in := long + "\n" + kept + "\n" + long
	var got []int
	if err := eachLine(strings.NewReader(in), 200_000, func(b []byte) { got = append(got, len(b)) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != len(kept) {
		t.Errorf("lines of %v bytes, want one of %d", got, len(kept))
	}
}
