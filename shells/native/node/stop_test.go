package node_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"plait/protocol/replica"
	"plait/protocol/wire"
	"plait/shells/native/node"
)

// TestStopReport: Stop syncs the store once more, so that writes --sync none answered
// before any fsync are durable after a clean stop, and reports it with the connections it
// closed and the node's own seq.
func TestStopReport(t *testing.T) {
	var syncs atomic.Int64
	b := start(t, "B")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := run(t, node.WithSyncGate(node.Config{Name: "A", DataDir: t.TempDir(), Listener: l, Sync: node.SyncNone, Peers: []node.Peer{{Name: "B", URL: b.url}}, Config: replica.Config{Secret: []byte("node test secret of enough bytes")}}, func() { syncs.Add(1) }), "ws://")
	waitFor(t, "A streaming to B", func() bool { return streamingTo(t, a, "B") })
	for _, k := range []string{"k1", "k2", "k3"} {
		if _, err := a.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(k), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	// B holds all three once A synced them (a node serves only what it synced): from then on
	// A needs no sync of its own, and the one that follows is Stop's.
	waitFor(t, "B holding A's three writes", func() bool {
		for _, o := range status(t, b).Origins {
			if o.Name == "A" {
				return o.AppliedSeq == 3
			}
		}
		return false
	})
	before := syncs.Load()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	r := a.Stopped()
	if !r.Synced || r.SyncErr != nil || syncs.Load() != before+1 {
		t.Errorf("stop: synced %v (%v), %d syncs of the store by Stop; want one that succeeded", r.Synced, r.SyncErr, syncs.Load()-before)
	}
	if r.OwnSeq != 3 || r.Connections != 1 || r.WritesUnanswered != 0 {
		t.Errorf("stop report %+v; want own seq 3, 1 connection closed, no write unanswered", r)
	}
}
