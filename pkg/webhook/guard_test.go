package webhook

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestBlockedHost(t *testing.T) {
	blocked := []string{
		"169.254.169.254", "169.254.170.2", "169.254.0.1", "[169.254.169.254]",
		"fe80::1", "[fe80::1%25eth0]", "fe80::1%eth0", "FE80::abcd",
		"::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", // IPv4-mapped, NAT64
		"fd00:ec2::254", "[fd00:ec2::254]", "fd20:ce::254", "100.100.100.200", "168.63.129.16",
		"metadata.google.internal", "Metadata.Google.Internal.", "metadata.goog", "instance-data.ec2.internal",
	}
	for _, h := range blocked {
		if BlockedHost(h) == "" {
			t.Errorf("BlockedHost(%q) = \"\", want a reason", h)
		}
	}
	allowed := []string{
		"127.0.0.1", "::1", "[::1]", "localhost", "0.0.0.0", // loopback: local testing
		"10.0.0.5", "172.16.3.4", "192.168.1.1", "fd00::1", "fd00:ec2::253", "100.64.0.1", // private, CGNAT
		"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "hooks.example.com",
		"metadata", "instance-data", // one label: the dial check sees what they resolve to
		"169.253.255.255", "169.255.0.0", "fec0::1",
	}
	for _, h := range allowed {
		if why := BlockedHost(h); why != "" {
			t.Errorf("BlockedHost(%q) = %q, want \"\"", h, why)
		}
	}
}

// The dial check runs before the connection is made: a refused address
// needs no network to be refused.
func TestRefuseBlockedControl(t *testing.T) {
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1%eth0]:443", "[::ffff:169.254.169.254]:80", "[fd00:ec2::254]:80"} {
		err := refuseBlocked(context.Background(), "tcp", addr, nil)
		if !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("refuseBlocked(%s) = %v, want ErrBlockedAddress", addr, err)
		} else if !strings.Contains(err.Error(), "allow_private_endpoints") {
			t.Errorf("refuseBlocked(%s) = %q, want the setting named", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:80", "[::1]:80", "10.1.2.3:443", "93.184.215.14:443"} {
		if err := refuseBlocked(context.Background(), "tcp", addr, nil); err != nil {
			t.Errorf("refuseBlocked(%s) = %v, want nil", addr, err)
		}
	}
}

// fakeDNS answers A queries for the names of addrs on a loopback UDP port,
// and every other question with no address: a resolver for names that
// lead where a test says (as a rebinding attacker's DNS does).
func fakeDNS(t *testing.T, addrs map[string]netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := dnsAnswer(buf[:n], addrs); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsAnswer is the answer to a DNS query q (RFC 1035 §4): its question
// with an A record when addrs has the name and the question asks for one;
// nil for what it cannot read.
func dnsAnswer(q []byte, addrs map[string]netip.Addr) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	end := i + 5 // the zero label, type and class
	if end > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	out := append([]byte(nil), q[:end]...)
	binary.BigEndian.PutUint16(out[2:], 0x8180) // a response, recursion desired and available, no error
	binary.BigEndian.PutUint16(out[6:], 0)      // answers
	binary.BigEndian.PutUint16(out[8:], 0)      // authority
	binary.BigEndian.PutUint16(out[10:], 0)     // additional (the query's EDNS record is not echoed)
	ip, ok := addrs[strings.ToLower(strings.Join(labels, "."))]
	if !ok || qtype != 1 || !ip.Is4() {
		return out
	}
	binary.BigEndian.PutUint16(out[6:], 1)
	out = append(out, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4) // the name at 12, A, IN, TTL 60, 4 bytes
	a := ip.As4()
	return append(out, a[:]...)
}

// A name that resolves to a link-local address is refused at the
// connection, final and classified, while one that resolves to loopback
// is called; a literal is refused before any lookup, and a redirect is
// not followed, so it reaches no refused address either.
func TestDeliverRefusesBlockedAddress(t *testing.T) {
	h := newHook(t, status(200))
	_, port, _ := net.SplitHostPort(h.Listener.Addr().String())
	s := newSender(t, Options{Timeout: 2 * time.Second})
	s.dialer.Resolver = fakeDNS(t, map[string]netip.Addr{
		"hooks.evfwd.test": netip.MustParseAddr("169.254.169.254"),
		"loop.evfwd.test":  netip.MustParseAddr("127.0.0.1"),
		"ecs.evfwd.test":   netip.MustParseAddr("169.254.170.2"),
	})
	for _, u := range []string{"http://hooks.evfwd.test:" + port + "/hook", "https://ecs.evfwd.test/hook", "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/"} {
		res := s.Deliver(context.Background(), dest(u), []byte(testBody))
		a := res.Attempts[0]
		if a.Class != ClassBlocked || a.Outcome != Final || res.Outcome != Final || !errors.Is(a.Err, ErrBlockedAddress) {
			t.Errorf("%s: class %s, outcome %v, err %v; want %s, final, ErrBlockedAddress", u, a.Class, a.Outcome, a.Err, ClassBlocked)
		}
	}
	res := s.Deliver(context.Background(), dest("http://loop.evfwd.test:"+port+"/hook"), []byte(testBody))
	if res.Outcome != Delivered {
		t.Errorf("loopback by name: %+v, want delivered", res.Attempts[0])
	}
	redirect := newHook(t, status(http.StatusFound, "Location", "http://169.254.169.254/latest/meta-data/"))
	if res := s.Deliver(context.Background(), dest(redirect.URL), []byte(testBody)); res.Attempts[0].Class != ClassRedirect {
		t.Errorf("redirect to a metadata address: %+v, want %s, not followed", res.Attempts[0], ClassRedirect)
	}
	if n := h.Count(); n != 1 {
		t.Errorf("the hook took %d requests, want 1 (loopback)", n)
	}
}

// AllowPrivateEndpoints lifts the refusal: the attempt goes to the
// connection (fe80::1 on the loopback interface, where nothing answers,
// so nothing leaves the machine).
func TestDeliverAllowPrivateEndpoints(t *testing.T) {
	s := newSender(t, Options{Timeout: 2 * time.Second, AllowPrivateEndpoints: true})
	res := s.Deliver(context.Background(), dest("http://[fe80::1%25lo]:1/hook"), []byte(testBody))
	if a := res.Attempts[0]; a.Class == ClassBlocked || errors.Is(a.Err, ErrBlockedAddress) {
		t.Errorf("with AllowPrivateEndpoints: %+v, want an attempt at the connection", a)
	}
}

func TestCheckAddresses(t *testing.T) {
	d := dest("https://hooks.example.com/a", "http://169.254.169.254/latest", "http://10.0.0.5:8080/b", "http://metadata.google.internal/x", "http://127.0.0.1:9/c")
	err := d.CheckAddresses()
	var ces []*ConfigError
	for _, e := range unjoinErr(err) {
		var ce *ConfigError
		if !errors.As(e, &ce) || !errors.Is(e, ErrBlockedAddress) || !errors.Is(e, ErrInvalidConfig) {
			t.Fatalf("CheckAddresses: %v, want *ConfigError wrapping ErrBlockedAddress", e)
		}
		ces = append(ces, ce)
	}
	if len(ces) != 2 || ces[0].Index != 1 || ces[1].Index != 3 {
		t.Fatalf("CheckAddresses = %v, want endpoints 1 and 3", err)
	}
	want := "endpoints[1] (http://169.254.169.254/latest): 169.254.169.254 is link-local (169.254.0.0/16, where cloud metadata services answer): refused unless allow_private_endpoints is true"
	if got := ces[0].Error(); got != want {
		t.Errorf("error:\n got %s\nwant %s", got, want)
	}
}

func unjoinErr(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
