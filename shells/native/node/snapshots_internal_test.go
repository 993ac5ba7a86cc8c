package node

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// countedSnapshot is a store snapshot that counts its releases.
type countedSnapshot struct {
	store.Snapshot
	released *int
}

func (s countedSnapshot) Release() {
	*s.released++
	s.Snapshot.Release()
}

// TestStopReleasesSnapshots: the node's stop releases every pinned snapshot still open,
// before the store closes (a RocksDB snapshot must not outlive its database), and leaves
// none behind.
func TestStopReleasesSnapshots(t *testing.T) {
	n, err := Start(Config{Name: "A", DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	for _, k := range []string{"k1", "k2"} {
		if _, err := n.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(k), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 { // a page of one record of two: each listing goes on, its snapshot held
		if _, err := n.OpenSnapshot(context.Background(), []byte("t"), nil, nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	released := 0
	if err := n.read(func() {
		for _, p := range n.snaps.open {
			p.snap = countedSnapshot{p.snap, &released}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if st, err := n.Snapshots(); err != nil || st.Open != 3 {
		t.Fatalf("before the stop: %+v, %v; want 3 open", st, err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if released != 3 || len(n.snaps.open) != 0 {
		t.Errorf("after the stop: %d snapshots released, %d left open; want 3 and 0", released, len(n.snaps.open))
	}
}

// TestSnapshotTimerReleases: a snapshot nobody asks about again is released by its own
// timer once SnapshotTTL has passed, not only when a page, an open or the status looks
// (the RocksDB snapshot must not be held until someone does).
func TestSnapshotTimerReleases(t *testing.T) {
	n, err := Start(Config{Name: "A", DataDir: t.TempDir(), SnapshotTTL: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	for _, k := range []string{"k1", "k2"} {
		if _, err := n.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(k), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.OpenSnapshot(context.Background(), []byte("t"), nil, nil, 1); err != nil {
		t.Fatal(err)
	}
	open, timedOut := -1, uint64(0)
	for deadline := time.Now().Add(20 * time.Second); open != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d snapshots still open 20s past their ttl", open)
		}
		if err := n.read(func() { open, timedOut = len(n.snaps.open), n.snaps.status.TimedOut }); err != nil {
			t.Fatal(err)
		}
	}
	if timedOut != 1 {
		t.Errorf("timed out %d, want 1", timedOut)
	}
}
