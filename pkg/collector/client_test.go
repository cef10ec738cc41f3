package collector

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/evfwd/evfwd/pkg/rawjson"
)

func TestClientAddr(t *testing.T) {
	trusted, err := ParseTrustedProxies([]string{"10.0.0.0/8", "192.168.1.7", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		peer    string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"peer without proxies", "203.0.113.9:5555", nil, trusted, "203.0.113.9"},
		{"header ignored when nothing is trusted", "10.0.0.1:5555", []string{"198.51.100.1"}, nil, "10.0.0.1"},
		{"header ignored from an untrusted peer", "203.0.113.9:5555", []string{"198.51.100.1"}, trusted, "203.0.113.9"},
		{"one trusted proxy", "10.0.0.1:5555", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"a forged hop left of the client is never reached", "10.0.0.1:5555", []string{"1.1.1.1, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"two trusted proxies", "10.0.0.1:5555", []string{"198.51.100.1, 192.168.1.7"}, trusted, "198.51.100.1"},
		{"several headers read as one list", "10.0.0.1:5555", []string{"1.1.1.1, 198.51.100.1", "10.2.3.4"}, trusted, "198.51.100.1"},
		{"all trusted: the leftmost", "10.0.0.1:5555", []string{"10.9.9.9,10.8.8.8"}, trusted, "10.9.9.9"},
		{"ports and brackets", "[2001:db8::1]:443", []string{"[2001:db9::5]:1234"}, trusted, "2001:db9::5"},
		{"IPv4 in IPv6 is IPv4", "[::ffff:10.0.0.1]:80", []string{"::ffff:198.51.100.1"}, trusted, "198.51.100.1"},
		{"a hop that is not an address stops at the last good one", "10.0.0.1:5555", []string{"198.51.100.1, unknown"}, trusted, "10.0.0.1"},
		{"empty hops skipped", "10.0.0.1:5555", []string{" , 198.51.100.1 ,, "}, trusted, "198.51.100.1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/t", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := ClientAddr(r, tt.trusted); got.String() != tt.want {
				t.Errorf("ClientAddr = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies([]string{"10.1.2.3/8", " 127.0.0.1 ", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(got), "[10.0.0.0/8 127.0.0.1/32 ::1/128]"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := ParseTrustedProxies([]string{"10.0.0.0/33"}); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
		t.Errorf("bad CIDR: %v", err)
	}
}

// forwardedForReference is the walk written the plain way: every hop
// split out first, then read from the right.
func forwardedForReference(peer netip.Addr, values []string, trusted []netip.Prefix) netip.Addr {
	var hops []string
	for _, v := range values {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	addr := peer
	for i := len(hops) - 1; i >= 0 && isTrusted(addr, trusted); i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break
		}
		addr = a
	}
	return addr
}

// FuzzForwardedFor holds the header's parser to the plain walk, and
// checks that what it returns is the peer or one of the header's hops.
func FuzzForwardedFor(f *testing.F) {
	f.Add("10.0.0.1:80", "198.51.100.1, 10.0.0.2", "")
	f.Add("[::1]:80", "[2001:db8::1]:443,::ffff:10.0.0.3", "unknown, 10.0.0.9")
	f.Add("10.0.0.1:80", ",,,", " 1.2.3.4 ")
	f.Add("fe80::1%eth0", "[fe80::2%lo]", "")
	trusted, _ := ParseTrustedProxies([]string{"10.0.0.0/8", "::1", "2001:db8::/32"})
	f.Fuzz(func(t *testing.T, peer, xff1, xff2 string) {
		p, _ := parseHop(peer)
		values := []string{xff1, xff2}
		got := forwardedFor(p, values, trusted)
		if want := forwardedForReference(p, values, trusted); got != want {
			t.Fatalf("forwardedFor(%v, %q) = %v, the plain walk %v", p, values, got, want)
		}
		if got != p && !strings.Contains(xff1+","+xff2, strings.Trim(got.String(), "[]")) {
			// A hop's address may be written differently (::ffff:, a
			// port, brackets), but it parses to got.
			found := false
			for _, v := range values {
				for _, h := range strings.Split(v, ",") {
					if a, ok := parseHop(strings.TrimSpace(h)); ok && a == got {
						found = true
					}
				}
			}
			if !found {
				t.Fatalf("forwardedFor returned %v, neither the peer nor a hop of %q", got, values)
			}
		}
	})
}

func TestFromDeviceAddsIP(t *testing.T) {
	ip := netip.MustParseAddr("2001:db8::7")
	for _, tt := range []struct{ msg, context string }{
		{`{"type":"track"}`, `{"ip":"2001:db8::7"}`},
		{`{"type":"track","context":null}`, `{"ip":"2001:db8::7"}`},
		{`{"type":"track","context":{}}`, `{"ip":"2001:db8::7"}`},
		{`{"type":"track","context":{ }}`, `{"ip":"2001:db8::7"}`},
		{`{"type":"track","context":{"locale":"en-GB" }}`, `{"locale":"en-GB","ip":"2001:db8::7"}`},
		{`{"type":"track","context":{"ip":"192.0.2.1"}}`, `{"ip":"192.0.2.1"}`},
		{`{"type":"track","context":{"ip":""}}`, `{"ip":"2001:db8::7"}`},
		{`{"type":"track","context":{"ip":null,"a":1}}`, `{"ip":"2001:db8::7","a":1}`},
		{`{"type":"track","context":{"traits":{"ip":"x"}}}`, `{"traits":{"ip":"x"},"ip":"2001:db8::7"}`},
	} {
		obj, err := rawjson.ParseObject([]byte(tt.msg))
		if err != nil {
			t.Fatal(err)
		}
		if err := fromDevice(obj, time.Time{}, time.Time{}, ip); err != nil {
			t.Fatalf("%s: %v", tt.msg, err)
		}
		got, _ := obj.Get("context")
		if string(got) != tt.context || !json.Valid(got) {
			t.Errorf("%s: context %s, want %s", tt.msg, got, tt.context)
		}
	}
}
