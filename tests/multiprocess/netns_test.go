//go:build scale

package multiprocess

// Hosts of their own (make scale; docs/testing.md §13): a cluster whose every node runs in
// a network namespace the test makes, with one address of its own on a bridge, the nodes
// dialing each other by those addresses. It needs root and ip(8); where namespaces cannot
// be made it skips, saying why.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"plait/internal/cluster"
)

// hosts is a test's network of namespaces: a bridge in this namespace with the address
// .254 of a /24, and a namespace a node, each with a veth pair whose one end is on the
// bridge and whose other end, in the namespace, holds the node's address. Every name
// carries the test's random id, so that what a crashed earlier run left does not collide.
type hosts struct {
	t      *testing.T
	id     string
	subnet netip.Prefix // 10.77.X.0/24, an X no address of this host is in
	bridge string
}

// ipCmd runs ip with args; its error carries ip's output.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newHosts makes the bridge, or skips the test when it cannot. What it and add make is
// deleted at the test's end, whatever the test's outcome.
func newHosts(t *testing.T) *hosts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root and ip netns: not running as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("needs root and ip netns: %v", err)
	}
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	h := &hosts{t: t, id: hex.EncodeToString(b)}
	h.bridge = "plb" + h.id
	out, err := exec.Command("ip", "-o", "-4", "addr").Output()
	if err != nil {
		t.Skipf("needs root and ip netns: ip addr: %v", err)
	}
	for x := int(b[0]); ; x = (x + 1) % 256 {
		if !strings.Contains(string(out), fmt.Sprintf(" 10.77.%d.", x)) {
			h.subnet = netip.MustParsePrefix(fmt.Sprintf("10.77.%d.0/24", x))
			break
		}
		if x == int(b[0])-1 {
			t.Skip("needs root and ip netns: every 10.77.X.0/24 is in use here")
		}
	}
	if err := ipCmd("link", "add", h.bridge, "type", "bridge"); err != nil {
		t.Skipf("needs root and ip netns: %v", err)
	}
	t.Cleanup(func() { h.del("link", "del", h.bridge) })
	for _, args := range [][]string{
		{"addr", "add", h.addr(254).String() + "/24", "dev", h.bridge},
		{"link", "set", h.bridge, "up"},
	} {
		if err := ipCmd(args...); err != nil {
			t.Skipf("needs root and ip netns: %v", err)
		}
	}
	return h
}

// del runs an ip command of the cleanup: a failure is the test's error (what it made is
// left behind).
func (h *hosts) del(args ...string) {
	if err := ipCmd(args...); err != nil {
		h.t.Errorf("cleaning up: %v", err)
	}
}

// addr is the address .i of the subnet.
func (h *hosts) addr(i int) netip.Addr {
	a := h.subnet.Addr().As4()
	a[3] = byte(i)
	return netip.AddrFrom4(a)
}

// add makes host i (1 to 253): the namespace plait-ID-i, and in it the veth end plnID-i
// with the address .i and lo, both up; the other end, plhID-i, on the bridge. It returns
// the namespace's name. The first host that cannot be made skips the test.
func (h *hosts) add(i int) string {
	h.t.Helper()
	ns, host, inner := fmt.Sprintf("plait-%s-%d", h.id, i), fmt.Sprintf("plh%s-%d", h.id, i), fmt.Sprintf("pln%s-%d", h.id, i)
	fail := h.t.Fatalf
	if i == 1 {
		fail = h.t.Skipf
	}
	if err := ipCmd("netns", "add", ns); err != nil {
		fail("needs root and ip netns: %v", err)
	}
	h.t.Cleanup(func() { h.del("netns", "del", ns) }) // the pair goes with its namespace end
	if err := ipCmd("link", "add", host, "type", "veth", "peer", "name", inner); err != nil {
		fail("needs root and ip netns: %v", err)
	}
	for _, args := range [][]string{
		{"link", "set", inner, "netns", ns},
		{"link", "set", host, "master", h.bridge, "up"},
		{"-n", ns, "addr", "add", h.addr(i).String() + "/24", "dev", inner},
		{"-n", ns, "link", "set", inner, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			ipCmd("link", "del", host) // before the move, the pair is here; after, it goes with ns
			fail("needs root and ip netns: %v", err)
		}
	}
	return ns
}

// serve starts node name in a host of its own, the next one: plait serve under ip netns
// exec, listening and serving its API on the host's address (not loopback, so with
// --insecure-plaintext and --insecure-open-api: the test's bridge is all it is on).
func (h *hosts) serve(next *int) func(t *testing.T, name string, args ...string) *proc {
	return func(t *testing.T, name string, args ...string) *proc {
		t.Helper()
		*next++
		ns, a := h.add(*next), h.addr(*next).String()
		return serveProcess(t, cluster.Process{Name: name, Secret: secret,
			Args:   append([]string{"--insecure-plaintext", "--insecure-open-api"}, args...),
			Prefix: []string{"ip", "netns", "exec", ns}, Listen: a + ":7400", HTTP: a + ":7401"})
	}
}

// TestNamespaceCluster: the 3 regions of 3 nodes of TestWANRegions (each region a mesh,
// node i of each region linked to node i of the others: 4 peers a node), each node in a
// namespace of its own at its own address, dialing its peers by theirs, at protocol
// version 2. Writes on every node converge: equal digests, no duplicate, every origin's
// lag 0, every acknowledged write everywhere; each node's one connection a peer runs
// between its own address and the peer's.
func TestNamespaceCluster(t *testing.T) {
	h := newHosts(t)
	next := 0
	c := &scaleCluster{serve: h.serve(&next), args: []string{"--protocol-max", "2"}}
	var g [3][3]*proc
	for r := range 3 {
		for i := range 3 {
			var dials []*proc
			for j := range i {
				dials = append(dials, g[r][j]) // the region's mesh
			}
			for s := range r {
				dials = append(dials, g[s][i]) // node i of the regions before
			}
			g[r][i] = c.node(t, fmt.Sprintf("%c%d", 'a'+r, i+1), "node", dials...)
		}
	}
	c.linked(t)
	c.oneConnPerPeer(t)
	for _, p := range c.nodes {
		own := netip.MustParseAddrPort(listenAddr(p)).Addr()
		conns, err := p.TCPConns()
		if err != nil {
			t.Fatal(err)
		}
		for _, conn := range conns {
			if conn.Local.Addr() != own || !h.subnet.Contains(conn.Remote.Addr()) || conn.Remote.Addr() == own {
				t.Errorf("%s at %s: a connection %s → %s", p.Name, own, conn.Local, conn.Remote)
			}
		}
	}
	ws, stop := startLoad(wanLoad{pace: 50 * time.Millisecond}, c.nodes...)
	defer stop()
	moreWANBatches(t, ws, 40, "in namespaces")
	stop()
	took := c.settled(t, ws)
	var n int64
	for _, w := range ws {
		n += w.acked.Load()
	}
	t.Logf("9 nodes in namespaces of their own on %s: %d batches of %d keys converged %s after the writes stopped", h.subnet, n, wanBatch, ms(took))
}
