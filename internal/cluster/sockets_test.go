package cluster

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
)

// TestTCPConns: a connection this process dials to itself shows up as two established
// connections, one from each end, with the right addresses; once both are closed, neither
// does (whatever state the kernel keeps them in, they are no longer the process's).
func TestTCPConns(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1"
			if network == "tcp6" {
				host = "[::1]"
			}
			l, err := net.Listen(network, host+":0")
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer l.Close()
			dialed, err := net.Dial(network, l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			accepted, err := l.Accept()
			if err != nil {
				t.Fatal(err)
			}
			server := netip.MustParseAddrPort(l.Addr().String())
			client := netip.MustParseAddrPort(dialed.LocalAddr().String())
			conns, err := tcpConns(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []Conn{{client, server}, {server, client}} {
				if !slices.Contains(conns, want) {
					t.Errorf("%v not among the process's connections %v", want, conns)
				}
			}
			dialed.Close()
			accepted.Close()
			conns, err = tcpConns(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range conns {
				if c.Local == server || c.Remote == server {
					t.Errorf("%v still the process's after both ends closed", c)
				}
			}
		})
	}
}
