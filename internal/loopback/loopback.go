// Package loopback says whether an address stays on this machine: the one
// rule behind serve's --allow-host, the viewer's Host check and watch
// --prom's.
package loopback

import (
	"net"
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
