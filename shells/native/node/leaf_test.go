package node_test

import (
	"errors"
	"net"
	"testing"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/node"
)

// startLeaf starts a leaf of hub on dir (docs/contract.md §26): its one peer is the hub.
func startLeaf(t *testing.T, name, dir string, hub *testNode) *testNode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return run(t, node.Config{Name: name, DataDir: dir, Listener: l, Peers: []node.Peer{{Name: hub.name, URL: hub.url}},
		Config: replica.Config{Secret: []byte("node test secret of enough bytes"), Hub: hub.name}}, "ws://")
}

// TestLeafTakesNoPeers: a leaf dials its hub and nothing else. A node that dials the leaf
// is refused at the upgrade, on the leaf's record with leaf-no-peers, and never connects;
// the API's peers are refused (ErrLeafPeers); a peer kept in the data directory from
// before the node was a leaf is not dialed; and Start refuses a leaf given another peer
// than its hub, or leaves of its own.
func TestLeafTakesNoPeers(t *testing.T) {
	hub := start(t, "H")
	dir := t.TempDir()
	before := startIn(t, "L", dir)
	if err := before.AddPeer(node.Peer{Name: "K", URL: "ws://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if err := before.Stop(); err != nil {
		t.Fatal(err)
	}
	leaf := startLeaf(t, "L", dir, hub)
	x := start(t, "X", leaf)
	waitFor(t, "the leaf refusing X's dial", func() bool {
		st, err := leaf.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range st.Refusals {
			if r.Code == wire.CodeLeafNoPeers && !r.Dialed {
				return true
			}
		}
		return false
	})
	st, err := leaf.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Peers {
		if p.Name != "H" {
			t.Errorf("the leaf has peer %s (%s); a leaf has only its hub", p.Name, p.State)
		}
	}
	xs, err := x.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range xs.Peers {
		if p.Name == "L" && (p.Connected || p.LastDialError == nil || p.LastDialError.Code != node.DialUpgrade) {
			t.Errorf("X's dial of the leaf: connected %v, last dial error %+v; want refused at the upgrade", p.Connected, p.LastDialError)
		}
	}
	if err := leaf.AddPeer(node.Peer{Name: "Y", URL: "ws://127.0.0.1:2"}); !errors.Is(err, node.ErrLeafPeers) {
		t.Errorf("AddPeer on a leaf: %v; want ErrLeafPeers", err)
	}
	if _, _, err := leaf.SetPeer(node.Peer{Name: "H"}, replica.LinkSettings{Mode: wire.LinkReceive}); !errors.Is(err, node.ErrLeafPeers) {
		t.Errorf("SetPeer on a leaf: %v; want ErrLeafPeers", err)
	}
	for _, cfg := range []node.Config{
		{Name: "M", DataDir: t.TempDir(), Peers: []node.Peer{{Name: "H", URL: hub.url}, {Name: "X", URL: x.url}}, Config: replica.Config{Hub: "H"}},
		{Name: "M", DataDir: t.TempDir(), Peers: []node.Peer{{Name: "X", URL: x.url}}, Config: replica.Config{Hub: "H"}},
		{Name: "M", DataDir: t.TempDir(), Peers: []node.Peer{{Name: "H", URL: hub.url}}, Config: replica.Config{Hub: "H", MaxLeaves: 1}},
	} {
		if n, err := node.Start(cfg); err == nil {
			n.Stop()
			t.Errorf("Start of a leaf of H with peers %v and %d leaves: taken", cfg.Peers, cfg.MaxLeaves)
		}
	}
}
