package node_test

import (
	"context"
	"testing"
	"time"

	"plait/protocol/wire"
	"plait/shells/native/node"
)

// TestSnapshotAnsweredAfterItsFsync: under --sync origin a pinned snapshot's first page is
// answered only once the fsync that covers the node's own entries its as_of names has
// returned (a power loss could otherwise give such a seq to another write, which a
// client that follows the feed after as_of would never see): with the group commit's
// fsync held back, the snapshot is open (the node holds it) and not answered; once the
// fsync returns, it is answered with as_of at the write's seq. A snapshot whose own
// entries are all durable is answered at once, fsync held or not.
func TestSnapshotAnsweredAfterItsFsync(t *testing.T) {
	g := newSyncGate()
	a := run(t, node.WithSyncGate(node.Config{Name: "A", DataDir: t.TempDir(), Sync: node.SyncOrigin}, g.gate), "ws://")
	t.Cleanup(g.free)
	for _, k := range []string{"k1", "k2"} {
		if _, err := a.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(k), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	g.hold.Store(true)
	// Nothing unsynced: answered with the fsync held (none is needed).
	p, err := a.OpenSnapshot(context.Background(), []byte("t"), nil, nil, 1)
	if err != nil || p.AsOf.Get(origin(t, a, "A").Origin).Seq != 2 {
		t.Fatalf("a snapshot with every own entry durable: %+v, %v; want as_of at seq 2", p, err)
	}
	written := make(chan error, 1)
	go func() {
		_, err := a.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k3"), Value: []byte("v")}})
		written <- err
	}()
	select {
	case <-g.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no fsync started for the write")
	}
	type answer struct {
		page node.SnapshotPage
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		p, err := a.OpenSnapshot(context.Background(), []byte("t"), nil, nil, 1)
		answered <- answer{p, err}
	}()
	waitFor(t, "the second snapshot held", func() bool {
		st, err := a.Snapshots()
		return err == nil && st.Open == 2
	})
	// The loop has taken the snapshot and would have answered by now; the caller's
	// goroutine is given a moment to report it (a wrong answer is microseconds late: the
	// bound only keeps a correct node's test short).
	select {
	case r := <-answered:
		t.Fatalf("the snapshot as of %v was answered (%v) while the fsync of its own entry was held", r.page.AsOf.Entries(), r.err)
	case <-time.After(300 * time.Millisecond):
	}
	g.free()
	select {
	case r := <-answered:
		if r.err != nil || r.page.AsOf.Get(origin(t, a, "A").Origin).Seq != 3 || len(r.page.Records) != 1 || !r.page.More {
			t.Fatalf("the snapshot after the fsync: %+v, %v; want as_of at seq 3, one record and more", r.page, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the snapshot was not answered after the fsync returned")
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}
