// Package hostcheck refuses requests whose Host names a server by a DNS
// name it does not know: what a DNS-rebinding page sends (a page of
// evil.example whose name now points at 127.0.0.1 reads what the server
// answers as its own origin's). The inspectors and serve's /metrics,
// /healthz and admin API use it.
package hostcheck

import (
	"net"
	"strings"
)

// Check says whether a request's Host names the listener at addr (as
// net.Listener.Addr().String() gives it): for host an IP address,
// localhost, or addr's own host, on addr's port; or one of the names the
// Check was given, on any port (a proxy's or a cluster's name for the
// server).
type Check struct {
	host, port, defaultPort string
	names                   map[string]bool
}

// New returns the Check of a listener at addr whose scheme's port is
// defaultPort ("80" for http, "443" for https: a Host without a port
// names that one), trusting names besides.
func New(addr, defaultPort string, names ...string) Check {
	host, port, _ := net.SplitHostPort(addr)
	c := Check{host: strings.ToLower(host), port: port, defaultPort: defaultPort}
	for _, n := range names {
		if c.names == nil {
			c.names = make(map[string]bool, len(names))
		}
		c.names[strings.ToLower(n)] = true
	}
	return c
}

// Allows reports whether hostport, a request's Host, names the listener.
func (c Check) Allows(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port: the scheme's.
		host, port = strings.Trim(hostport, "[]"), c.defaultPort
	}
	host = strings.ToLower(host)
	if c.names[host] {
		return true
	}
	if port != c.port {
		return false
	}
	return host == c.host || host == "localhost" || net.ParseIP(host) != nil
}
