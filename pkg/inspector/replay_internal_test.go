package inspector

import (
	"context"
	"errors"
	"testing"
)

// TestRefuseLoopbackDial: a replay marked so is refused a connection to a
// loopback or unspecified address, which a name (not caught by the URL's
// check) may resolve to; an unmarked one is not.
func TestRefuseLoopbackDial(t *testing.T) {
	marked := context.WithValue(context.Background(), refuseLoopbackKey{}, true)
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:80", true}, {"127.9.9.9:80", true}, {"[::1]:80", true}, {"[::ffff:127.0.0.1]:80", true},
		{"0.0.0.0:80", true}, {"[::]:80", true}, {"192.0.2.1:80", false}, {"[2001:db8::1]:443", false},
	} {
		err := refuseLoopback(marked, "tcp", tc.addr, nil)
		if got := errors.Is(err, errLoopbackReplay); got != tc.want {
			t.Errorf("dial %s: %v, want refused %v", tc.addr, err, tc.want)
		}
		if err := refuseLoopback(context.Background(), "tcp", tc.addr, nil); err != nil {
			t.Errorf("unmarked dial %s: %v", tc.addr, err)
		}
	}
}
