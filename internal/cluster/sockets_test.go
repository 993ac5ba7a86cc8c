package cluster

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"
)

// TestTCPConns: a connection this process dials to itself shows up as two established
// connections, one from each end, with the right addresses, and the listener as none;
// once the accepted end is closed, the dialed end is still the process's, in CLOSE_WAIT;
// once both are closed, neither is (whatever state the kernel keeps them in).
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
			for _, want := range []Conn{{client, server, "ESTABLISHED"}, {server, client, "ESTABLISHED"}} {
				if !slices.Contains(conns, want) {
					t.Errorf("%v not among the process's connections %v", want, conns)
				}
			}
			for _, c := range conns {
				if c.State == "LISTEN" || !c.Remote.IsValid() || c.Remote.Port() == 0 {
					t.Errorf("a listener among the connections: %v", c)
				}
			}
			accepted.Close()
			want := Conn{client, server, "CLOSE_WAIT"}
			if err := WaitEvery("the dialed end in CLOSE_WAIT", 5*time.Second, time.Millisecond, func() bool {
				conns, err = tcpConns(os.Getpid())
				return err != nil || slices.Contains(conns, want)
			}); err != nil || !slices.Contains(conns, want) {
				t.Errorf("%v not among the process's connections %v (%v)", want, conns, err)
			}
			dialed.Close()
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
