package loopback

import (
	"net"
	"testing"
)

func TestBeyond(t *testing.T) {
	for addr, want := range map[string]bool{"0.0.0.0:0": true, ":8080": true, "[::]:0": true, "192.168.1.5:80": true,
		"127.0.0.1:0": false, "localhost:0": false, "[::1]:0": false, "256.0.0.1:bad": false} {
		if got := Beyond(addr); got != want {
			t.Errorf("Beyond(%q) = %v", addr, got)
		}
	}
}

func TestHost(t *testing.T) {
	for h, want := range map[string]bool{"localhost": true, "LOCALHOST:80": true, "127.0.0.1:9400": true, "[::1]:1": true, "::1": true,
		"127.1.2.3": true, "attacker.example:80": false, "10.0.0.1:80": false, "": false} {
		if got := Host(h); got != want {
			t.Errorf("Host(%q) = %v", h, got)
		}
	}
}

func TestAddr(t *testing.T) {
	if !Addr(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}) || Addr(&net.TCPAddr{IP: net.IPv4zero}) || Addr(&net.UnixAddr{Name: "x"}) {
		t.Error("Addr")
	}
}
