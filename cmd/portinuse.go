package cmd

import (
	"fmt"
	"net"

	"github.com/evfwd/evfwd/pkg/serve"
)

// The addresses listen takes by default; serve's are pkg/serve's.
const (
	defaultListenAddr   = "127.0.0.1:8788"
	defaultListenUIAddr = "127.0.0.1:8789"
)

// portInUse is the error for a port another program holds, which is not a
// usage mistake (exit 1): the address and the setting that chose it
// (origin says where flag's value came from; nil: the flag), the program
// that likely holds it (self names the one that could not), and what to
// try.
func portInUse(self, flag, addr string, origin func(flag string) string) error {
	chosen := ""
	if origin != nil {
		switch o := origin(flag[len("--"):]); o {
		case flag:
		case "the default":
			chosen = " (the default)"
		default:
			chosen = " set by " + o
		}
	}
	host, _, _ := net.SplitHostPort(addr)
	return fmt.Errorf("%s %s%s: port in use, likely by %s; stop it, or try %s %s",
		flag, addr, chosen, likelyHolder(addr, self), flag, net.JoinHostPort(host, "0"))
}

// likelyHolder guesses which program holds addr's port: the evfwd program
// whose default port it is, else another one like self (given the same
// address) or some other program.
func likelyHolder(addr, self string) string {
	_, port, _ := net.SplitHostPort(addr)
	for _, d := range [][2]string{
		{serve.DefaultAddr, "evfwd serve"}, {serve.DefaultUIAddr, "evfwd serve --ui"},
		{defaultListenAddr, "evfwd listen"}, {defaultListenUIAddr, "evfwd listen --ui"},
	} {
		if _, p, _ := net.SplitHostPort(d[0]); p != port {
			continue
		}
		if d[1] == self {
			return "another " + self
		}
		return d[1]
	}
	return "another " + self + " or another program"
}
