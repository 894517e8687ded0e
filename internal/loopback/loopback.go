// Package loopback says whether an address stays on this machine: the one
// rule behind serve's --allow-host, the viewer's Host check and watch
// --prom's.
package loopback

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// Host reports whether host[:port] names this machine's loopback: an IP
// address of the loopback range or "localhost".
func Host(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Addr reports whether a bound address is a loopback one.
func Addr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// Beyond reports whether a listen address reaches past this machine: an
// empty host or 0.0.0.0/:: (every interface), or an IP address that is not
// loopback's. A name is judged once bound (Addr), and a malformed address
// is left for net.Listen to refuse.
func Beyond(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h = strings.Trim(h, "[]"); h == "" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && !ip.IsLoopback()
}

// ExampleHost is this machine's name, for the --allow-host hint.
func ExampleHost() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "myhost.lan"
}

// Warning is the one line serve and watch --prom print when what listens
// on addr, where other machines can connect.
func Warning(what, addr string) string {
	return fmt.Sprintf("gpumem: warning: %s listens on %s, beyond loopback: other machines can connect and read what it serves", what, addr)
}
