package collector

import (
	"bytes"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/message"
	"github.com/evfwd/evfwd/pkg/rawjson"
)

// Kind is what sends a source's events. Segment treats the libraries that
// run on the user's device, in a browser or an app, apart from those on a
// server: their requests come from the user's address, and their clocks
// are often wrong. So does evfwd.
type Kind string

const (
	// KindServer is the default: timestamps are kept as sent (a server's
	// clock is trusted, and historical imports set old ones on purpose),
	// and no address is added.
	KindServer Kind = "server"
	// KindWeb is a browser library, Analytics.js.
	KindWeb Kind = "web"
	// KindMobile is an app library, analytics-kotlin or analytics-swift.
	KindMobile Kind = "mobile"
)

// Kinds are the kinds a source may have.
var Kinds = []Kind{KindServer, KindWeb, KindMobile}

// ParseKind reads a source's kind; "" is KindServer.
func ParseKind(s string) (Kind, error) {
	if s == "" {
		return KindServer, nil
	}
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("kind %q: want server, web or mobile", s)
}

// onDevice says whether the source's events come from the user's device.
func (k Kind) onDevice() bool { return k == KindWeb || k == KindMobile }

// ClientAddr is the address of the client that sent r: the peer's, or,
// when the peer is one of the trusted proxies, the first hop of
// X-Forwarded-For, read from the right, that is not. Each trusted proxy
// appends the address it was reached from, so only the hops to the right
// of the first untrusted one can be believed; what a client writes into
// the header itself lies to the left, and is never reached. A hop that is
// not an address stops the walk at the last good one. The zero Addr means
// the peer's address did not parse (a listener that is not TCP).
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer, _ := parseHop(r.RemoteAddr)
	if len(trusted) == 0 {
		return peer
	}
	return forwardedFor(peer, r.Header.Values("X-Forwarded-For"), trusted)
}

// forwardedFor walks the X-Forwarded-For values (several headers read as
// one list, in order) from the right while the address in hand is
// trusted.
func forwardedFor(peer netip.Addr, values []string, trusted []netip.Prefix) netip.Addr {
	addr := peer
	for i := len(values) - 1; i >= 0; i-- {
		for rest := values[i]; rest != ""; {
			if !isTrusted(addr, trusted) {
				return addr
			}
			hop := rest
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				hop, rest = rest[j+1:], rest[:j]
			} else {
				rest = ""
			}
			if hop = strings.TrimSpace(hop); hop == "" {
				continue
			}
			a, ok := parseHop(hop)
			if !ok {
				return addr
			}
			addr = a
		}
	}
	return addr
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads an address as proxies write it: 192.0.2.1, 2001:db8::1,
// with a port (192.0.2.1:443, [2001:db8::1]:443) or in brackets. IPv4 in
// IPv6 is IPv4, and a zone is dropped: neither says who the client is.
func parseHop(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
				return netip.Addr{}, false
			}
			if a, err = netip.ParseAddr(s[1 : len(s)-1]); err != nil {
				return netip.Addr{}, false
			}
		} else {
			a = ap.Addr()
		}
	}
	return a.Unmap().WithZone(""), true
}

// ParseTrustedProxies reads trusted_proxies: CIDRs, or single addresses.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted_proxies: %q is neither a CIDR (10.0.0.0/8) nor an address", s)
		}
		a = a.Unmap().WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// fromDevice completes a message from a browser or an app as Segment
// does: context.ip from the request when the message has none, and the
// device clock's skew taken out of timestamp. The device stamped the event
// (timestamp) and the request (sentAt) with one clock, so sentAt -
// timestamp is how long ago the event happened whatever that clock's
// error; timestamp becomes receivedAt minus that, and the device's own
// time stays as originalTimestamp. Without a sentAt, or once corrected
// (originalTimestamp present), timestamp is left as it is.
func fromDevice(obj *rawjson.Object, sent time.Time, receivedAt time.Time, ip netip.Addr) error {
	if ts, ok := obj.Get("timestamp"); ok && !obj.Has("originalTimestamp") {
		if own, ok := deviceTime(obj, "sentAt"); ok {
			sent = own
		}
		if at, ok := deviceTime(obj, "timestamp"); ok && !sent.IsZero() {
			obj.Set("originalTimestamp", ts)
			b := append(make([]byte, 0, 26), '"')
			b = rawjson.AppendTime(b, receivedAt.Add(at.Sub(sent)))
			obj.Set("timestamp", append(b, '"'))
		}
	}
	if !ip.IsValid() {
		return nil
	}
	ctx, ok := obj.Get("context")
	if !ok || string(ctx) == "null" {
		obj.Set("context", append(appendIP(append(make([]byte, 0, 64), '{'), ip), '}'))
		return nil
	}
	if withIP, ok := addIP(ctx, ip); ok {
		obj.Set("context", withIP)
		return nil
	}
	c, err := rawjson.ParseObject(ctx)
	if err != nil {
		return err
	}
	if v, ok := c.Get("ip"); ok && string(v) != "null" && string(v) != `""` {
		return nil
	}
	c.SetString("ip", ip.String())
	obj.Set("context", c.AppendJSON(nil))
	return nil
}

// addIP is ctx, a valid JSON object, with "ip" as its last member, when
// ctx has no "ip" anywhere: no member to replace, so it is an append,
// where parsing the context and writing it again was a twentieth of
// serve's CPU on single events. ok is false when "ip" is there somewhere
// (a member, or deeper), for the parse to decide.
func addIP(ctx []byte, ip netip.Addr) (withIP []byte, ok bool) {
	end := len(ctx) - 1
	if end < 1 || ctx[0] != '{' || ctx[end] != '}' || bytes.Contains(ctx, []byte(`"ip"`)) {
		return nil, false
	}
	last := end - 1
	for last > 0 && (ctx[last] == ' ' || ctx[last] == '\t' || ctx[last] == '\n' || ctx[last] == '\r') {
		last--
	}
	out := make([]byte, 0, len(ctx)+48)
	out = append(out, ctx[:last+1]...)
	if ctx[last] != '{' {
		out = append(out, ',')
	}
	return append(appendIP(out, ip), '}'), true
}

// appendIP appends the member "ip":"<addr>".
func appendIP(dst []byte, ip netip.Addr) []byte {
	dst = append(dst, `"ip":"`...)
	return append(ip.AppendTo(dst), '"')
}

// deviceTime reads a time the device wrote, in any form a message's
// timestamp may take.
func deviceTime(obj *rawjson.Object, key string) (time.Time, bool) {
	s, ok := obj.GetString(key)
	if !ok {
		return time.Time{}, false
	}
	t, err := message.ParseTime(s)
	return t, err == nil
}
