package node_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
	"plait/shells/native/node"
)

// syncGate holds the store's fsyncs back while hold is set (node.WithSyncGate): each one
// held says so on entered and waits for free.
type syncGate struct {
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// newSyncGate makes a gate. Its test registers g.free as a cleanup after starting the
// gated node, so that it runs before the node's stop (cleanups run last first): a failed
// test must not leave an fsync held.
func newSyncGate() *syncGate {
	return &syncGate{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func (g *syncGate) gate() {
	if g.hold.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
}

// free lets every held fsync and every later one through.
func (g *syncGate) free() { g.hold.Store(false); g.once.Do(func() { close(g.release) }) }

// TestWriteAnsweredAfterItsFsync: under --sync origin a local write is answered only once
// the fsync that covers it has returned, and its entry reaches no peer before: with the
// group commit's fsync held back, the node's loop goes on (status answers), the write is
// not answered and the peer has not applied it; once the fsync returns, both happen.
func TestWriteAnsweredAfterItsFsync(t *testing.T) {
	b := start(t, "B")
	g := newSyncGate()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := run(t, node.WithSyncGate(node.Config{Name: "A", DataDir: t.TempDir(), Listener: l, Sync: node.SyncOrigin,
		Peers: []node.Peer{{Name: "B", URL: b.url}}, Config: replica.Config{Secret: []byte("node test secret of enough bytes")}}, g.gate), "ws://")
	t.Cleanup(g.free)
	waitFor(t, "A streaming to B", func() bool { return streamingTo(t, a, "B") })

	g.hold.Store(true)
	answered := make(chan error, 1)
	go func() {
		_, err := a.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte("k"), Value: []byte("v")}})
		answered <- err
	}()
	select {
	case <-g.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no fsync started for the write")
	}
	// A status round trip runs on A's loop after the write was applied and the fsync begun:
	// anything the loop would answer early it has answered by now.
	if o := origin(t, a, "A"); o.AppliedSeq != 1 {
		t.Fatalf("A applied its own origin up to %d", o.AppliedSeq)
	}
	// The loop would have answered by now; the writer's goroutine may still be on its way
	// to report it, so its report is given a moment (a wrong answer is microseconds late,
	// not this much: the bound only keeps a correct node's test short).
	select {
	case err := <-answered:
		t.Fatalf("the write was answered (%v) while its fsync was held", err)
	case <-time.After(300 * time.Millisecond):
	}
	if o := origin(t, b, "A"); o.AppliedSeq != 0 {
		t.Fatalf("B applied A's entry up to %d before A's fsync returned", o.AppliedSeq)
	}

	g.free()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the write was not answered after its fsync returned")
	}
	waitFor(t, "B applying A's entry", func() bool { return origin(t, b, "A").AppliedSeq == 1 })
}

// TestApplyAcknowledgedAfterItsFsync: under --sync all a replicated entry is acknowledged
// to its peer only once the fsync of its apply has returned. The acknowledgement is seen on
// A's data: A (retention age 1 ns) purges an entry of its own, never its head, once B has
// acknowledged it, since B's hold keeps it until then. With B's fsync of entry 3 held back,
// A purges up to 2 (acknowledged before) and no further over several retention steps; once
// the fsync returns, it purges entry 3.
func TestApplyAcknowledgedAfterItsFsync(t *testing.T) {
	g := newSyncGate()
	lb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("node test secret of enough bytes")
	b := run(t, node.WithSyncGate(node.Config{Name: "B", DataDir: t.TempDir(), Listener: lb, Sync: node.SyncAll, Config: replica.Config{Secret: secret}}, g.gate), "ws://")
	la, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := run(t, node.Config{Name: "A", DataDir: t.TempDir(), Listener: la, Sync: node.SyncOrigin,
		Peers: []node.Peer{{Name: "B", URL: b.url}}, Config: replica.Config{RetainAge: time.Nanosecond, Secret: secret}}, "ws://")
	t.Cleanup(g.free)
	write := func(k string) {
		if _, err := a.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(k), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
	}
	// The acknowledgement is visible: A purges entry 1 once B acknowledged it.
	write("k1")
	write("k2")
	waitFor(t, "A's entry 1 acknowledged by B and purged", func() bool { return origin(t, a, "A").FloorSeq == 1 })

	g.hold.Store(true)
	write("k3")
	write("k4")
	select {
	case <-g.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no fsync started for B's apply of A's entry 3")
	}
	// Entry 2, acknowledged before the hold, goes: retention runs meanwhile.
	waitFor(t, "A's entry 2 purged during the hold", func() bool { return origin(t, a, "A").FloorSeq >= 2 })
	// A runs a retention step every second: over 2.5 s, an acknowledgement of entry 3 would
	// let it purge the entry.
	for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if f := origin(t, a, "A").FloorSeq; f != 2 {
			t.Fatalf("A purged its entries up to %d while B's fsync of entry 3 was held: B acknowledged before its fsync", f)
		}
	}
	g.free()
	waitFor(t, "A's entry 3 acknowledged by B after its fsync, and purged", func() bool { return origin(t, a, "A").FloorSeq == 3 })
	if o := origin(t, b, "A"); o.AppliedSeq != 4 {
		t.Errorf("B applied A up to %d, want 4", o.AppliedSeq)
	}
}

// TestBackgroundErrorDegrades: a failure RocksDB records in its background work (a flush
// or compaction, property rocksdb.background-errors, made to fail here) degrades the node
// with storage-failed before its next write, and the node recovers by itself, reopening the
// store, once the store reports none: the writes before and after are all there.
func TestBackgroundErrorDegrades(t *testing.T) {
	var bg atomic.Uint64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := run(t, node.WithBackgroundErrors(node.Config{Name: "A", DataDir: t.TempDir(), Listener: l, Config: replica.Config{Secret: []byte("node test secret of enough bytes")}}, bg.Load), "ws://")
	write := func(k string) error {
		_, err := a.Write(context.Background(), []wire.Op{{Kind: wire.OpPut, Table: []byte("t"), Key: []byte(k), Value: []byte("v")}})
		return err
	}
	if err := write("k1"); err != nil {
		t.Fatal(err)
	}
	bg.Store(1)
	storage := func() replica.StorageStatus {
		st, err := a.Status()
		if err != nil {
			t.Fatal(err)
		}
		return st.Node.Storage
	}
	waitFor(t, "A degrading for the background error", func() bool {
		_ = write("probe") // an input of the loop, which asks RocksDB at most once a second
		return storage().Degraded
	})
	if s := storage(); s.Code != wire.CodeStorageFailed || !strings.Contains(s.Message, "background") {
		t.Errorf("A's storage %+v; want storage-failed in background", s)
	}
	var se *store.StorageError
	if err := write("k2"); !errors.As(err, &se) || se.Code != wire.CodeStorageFailed {
		t.Errorf("a write while degraded: %v; want storage-failed", err)
	}
	bg.Store(0)
	waitFor(t, "A recovering", func() bool { return !storage().Degraded })
	if err := write("k3"); err != nil {
		t.Fatalf("a write after the recovery: %v", err)
	}
	for _, k := range []string{"k1", "k3"} {
		if _, found, err := a.Get([]byte("t"), []byte(k)); err != nil || !found {
			t.Errorf("record %s after the recovery: found %v, %v", k, found, err)
		}
	}
}
