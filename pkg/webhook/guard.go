package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// ErrBlockedAddress is matched (errors.Is) by every refusal of an
// endpoint's address (*BlockedError): a link-local address or a cloud
// metadata service, which a Sender does not call unless
// Options.AllowPrivateEndpoints is set. An address that reaches those is
// the classic way to turn a webhook sender against the machine it runs on
// (SSRF: the instance's credentials are one GET away).
var ErrBlockedAddress = errors.New("address refused")

// BlockedError says which address was refused and why.
type BlockedError struct {
	// Host is the name or address refused: a URL's host at
	// configuration, the address dialled (after DNS) at connection.
	Host   string
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("%s is %s: refused unless allow_private_endpoints is true", e.Host, e.Reason)
}

// Is makes errors.Is(err, ErrBlockedAddress) true.
func (e *BlockedError) Is(target error) bool { return target == ErrBlockedAddress }

// metadataAddrs are the cloud metadata services outside the link-local
// ranges (which hold 169.254.169.254, AWS's ECS and EKS endpoints on
// 169.254.170.x, and every other cloud's IPv4 one).
var metadataAddrs = map[netip.Addr]string{
	netip.MustParseAddr("fd00:ec2::254"):   "AWS's instance metadata service (IPv6)",
	netip.MustParseAddr("fd20:ce::254"):    "Google Cloud's metadata server (IPv6)",
	netip.MustParseAddr("100.100.100.200"): "Alibaba Cloud's metadata service",
	netip.MustParseAddr("168.63.129.16"):   "Azure's WireServer (host metadata)",
}

// metadataNames are the fully qualified names of metadata services. The
// one-label ones (metadata, instance-data) reach a metadata service only
// through a cloud's DNS search domain, where they resolve to
// 169.254.169.254 and the connection is refused; elsewhere they may name
// a service of the operator's own, so they are not refused by name.
var metadataNames = map[string]string{
	"metadata.google.internal":   "Google Cloud's metadata server",
	"metadata.goog":              "Google Cloud's metadata server",
	"instance-data.ec2.internal": "AWS's instance metadata service",
}

// nat64 is the well-known NAT64 prefix (RFC 6052): its addresses carry an
// IPv4 address in their last four bytes, which the translator calls.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// BlockedHost says why host, a URL's host (a name, or an IP address with
// or without brackets and zone), is refused, or "" when it is not: a
// link-local address (169.254.0.0/16, fe80::/10, in any IPv6 form that
// carries one: IPv4-mapped, NAT64), a metadata service's address
// (fd00:ec2::254, fd20:ce::254, 100.100.100.200, 168.63.129.16) or
// name (metadata.google.internal, metadata.goog,
// instance-data.ec2.internal). Loopback, private (10/8, 172.16/12,
// 192.168/16, fc00::/7 but the metadata addresses) and public addresses
// are not refused. Names are not resolved: the connection's own check
// (Sender) sees what a name leads to.
func BlockedHost(host string) string {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if why, ok := metadataNames[h]; ok {
		return why
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return ""
	}
	return blockedAddr(ip)
}

// blockedAddr is BlockedHost for an address.
func blockedAddr(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	if why, ok := metadataAddrs[ip]; ok {
		return why
	}
	switch {
	case ip.Is4() && ip.IsLinkLocalUnicast():
		return "link-local (169.254.0.0/16, where cloud metadata services answer)"
	case ip.IsLinkLocalUnicast():
		return "link-local (fe80::/10)"
	}
	return ""
}

// CheckAddresses reports every endpoint whose URL's host BlockedHost
// refuses, joined, each a *ConfigError naming the endpoint and wrapping
// its *BlockedError; nil when none is. serve runs it at start unless
// allow_private_endpoints is true; the Sender refuses the same hosts, and
// what a name resolves to, when it calls them.
func (d *Destination) CheckAddresses() error {
	var errs []error
	for i, ep := range d.Endpoints {
		u, err := url.Parse(ep.URL)
		if err != nil {
			continue // Validate's to report
		}
		if why := BlockedHost(u.Hostname()); why != "" {
			be := &BlockedError{Host: u.Hostname(), Reason: why}
			errs = append(errs, &ConfigError{Index: i, URL: ep.Display(), Reason: be.Error(), Err: be})
		}
	}
	return errors.Join(errs...)
}

// refuseBlocked is the dial check of a Sender that refuses link-local and
// metadata addresses: it sees the address a connection is about to be
// made to, after DNS, so a name that resolves (or is rebound) to one is
// refused too, before any packet leaves. With a proxy
// (HTTPS_PROXY/HTTP_PROXY), the address is the proxy's.
func refuseBlocked(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, _, serr := net.SplitHostPort(address)
		if serr != nil {
			return err
		}
		if why := BlockedHost(host); why != "" {
			return &BlockedError{Host: host, Reason: why}
		}
		return nil
	}
	if why := blockedAddr(ap.Addr()); why != "" {
		return &BlockedError{Host: ap.Addr().WithZone("").String(), Reason: why}
	}
	return nil
}
