package replica_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/store/memstore"
	"plait/protocol/wire"
)

// faultStore is a memstore whose writes fail with a StorageError on demand, as the RocksDB
// store's do once its file system is full: fail names the operations that fail and the
// code; refused counts the writes refused.
type faultStore struct {
	*memstore.Store
	fail    map[string]wire.Code
	refused int
	// cannotApply refuses the applies of these entries (origin, seq) with ErrCannotApply,
	// and damaged makes these records (table "/" key) unreadable with ErrRecordDamaged:
	// errors of one entry, not of the storage (retry.go).
	cannotApply  map[entryAt]bool
	damaged      map[string]bool
	entryRefused int
	// failControl fails the control writes of these keys alone, with storage-full.
	failControl map[string]bool
}

type entryAt struct {
	origin wire.OriginID
	seq    uint64
}

func (f *faultStore) Get(table, key []byte) (store.Record, bool, error) {
	if f.damaged[string(table)+"/"+string(key)] {
		f.entryRefused++
		return store.Record{}, false, fmt.Errorf("injected: table %s key %s: %w", table, key, store.ErrRecordDamaged)
	}
	return f.Store.Get(table, key)
}

func (f *faultStore) err(op string) error {
	code, ok := f.fail[op]
	if !ok {
		return nil
	}
	f.refused++
	return &store.StorageError{Code: code, Op: op, Err: errors.New("injected: No space left on device")}
}

func (f *faultStore) Apply(b *store.Batch) (uint64, error) {
	if err := f.err("apply"); err != nil {
		return 0, err
	}
	if f.cannotApply[entryAt{b.Origin, b.Seq}] {
		f.entryRefused++
		return 0, fmt.Errorf("injected: origin %s seq %d: %w", b.Origin, b.Seq, store.ErrCannotApply)
	}
	return f.Store.Apply(b)
}

func (f *faultStore) Sync() error {
	if err := f.err("sync"); err != nil {
		return err
	}
	return f.Store.Sync()
}

func (f *faultStore) Purge(p *store.Purge) error {
	if err := f.err("purge"); err != nil {
		return err
	}
	return f.Store.Purge(p)
}

func (f *faultStore) PutHolds(hs []store.Hold) error {
	if err := f.err("holds"); err != nil {
		return err
	}
	return f.Store.PutHolds(hs)
}

func (f *faultStore) DeleteHolds(peer string) error {
	if err := f.err("holds"); err != nil {
		return err
	}
	return f.Store.DeleteHolds(peer)
}

func (f *faultStore) DeleteHold(peer string, origin wire.OriginID) error {
	if err := f.err("holds"); err != nil {
		return err
	}
	return f.Store.DeleteHold(peer, origin)
}

func (f *faultStore) SetPeerCursor(peer wire.OriginID, pos uint64) error {
	if err := f.err("peer-cursor"); err != nil {
		return err
	}
	return f.Store.SetPeerCursor(peer, pos)
}

func (f *faultStore) PutControl(key string, value []byte) error {
	if err := f.err("control"); err != nil {
		return err
	}
	if f.failControl[key] {
		f.refused++
		return &store.StorageError{Code: wire.CodeStorageFull, Op: "control " + key, Err: errors.New("injected: No space left on device")}
	}
	return f.Store.PutControl(key, value)
}

// withFaults puts a faultStore over the node's memstore and restarts it on it.
func (n *node) withFaults() *faultStore {
	n.faults = &faultStore{Store: n.store, fail: map[string]wire.Code{}, cannotApply: map[entryAt]bool{}, damaged: map[string]bool{}}
	n.restart()
	return n.faults
}

func storageCode(err error) wire.Code {
	var se *store.StorageError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

// TestStorageDegradedWrites: once B's store fails an apply with storage-full, B degrades
// instead of stopping: its local writes are refused with the code and change nothing, it
// applies and acknowledges nothing more of A (its cursor stays), it unsubscribes A's
// channel and subscribes to nothing while degraded, its status says so, and it still
// answers reads. A new replica on the same store (the shell's recovery) converges with A:
// equal digests, every entry applied once, no duplicate.
func TestStorageDegradedWrites(t *testing.T) {
	for _, version := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			h := newHarness(t)
			a := h.addNode("A", replica.Config{MaxVersion: version})
			b := h.addNode("B", replica.Config{MaxVersion: version})
			faults := b.withFaults()
			h.connect(a, b)
			for i := range 3 {
				a.write(put("t", fmt.Sprint("a", i), "1"))
			}
			b.write(put("t", "b0", "1"))
			h.advance(time.Second)
			if got := b.applied()[a.origin]; got != 3 {
				t.Fatalf("B applied %d of A before the fault, want 3", got)
			}
			ackedBefore := h.acked("B", "A", a.origin)

			faults.fail["apply"] = wire.CodeStorageFull
			for i := 3; i < 8; i++ {
				a.write(put("t", fmt.Sprint("a", i), "2"))
			}
			h.advance(2 * time.Second)
			se := b.rep.Degraded()
			if se == nil || se.Code != wire.CodeStorageFull || se.Op != "apply" {
				t.Fatalf("B degraded for %v, want storage-full in apply", se)
			}
			if b.rep.Status(b.clock()).Node.Storage != (replica.StorageStatus{Degraded: true, Code: wire.CodeStorageFull,
				Message: se.Error(), Since: b.rep.Status(b.clock()).Node.Storage.Since}) {
				t.Errorf("B's storage status %+v", b.rep.Status(b.clock()).Node.Storage)
			}
			if got := b.applied()[a.origin]; got != 3 {
				t.Errorf("B applied up to %d of A while degraded, want 3", got)
			}
			if faults.refused != 1 {
				t.Errorf("B's store was asked for %d applies while degraded, want the 1 that failed", faults.refused)
			}
			if version >= 2 {
				if got := h.acked("B", "A", a.origin); got != ackedBefore {
					t.Errorf("B acknowledged A up to %d while degraded, want %d", got, ackedBefore)
				}
			}
			if _, err := b.rep.Write(b.clock(), []wire.Op{put("t", "b1", "x")}); storageCode(err) != wire.CodeStorageFull {
				t.Errorf("B's local write while degraded: %v, want storage-full", err)
			}
			if got := b.applied()[b.origin]; got != 1 {
				t.Errorf("B's own origin at %d after a refused write, want 1", got)
			}
			if _, ok := b.get("t", "a0"); !ok {
				t.Error("B does not answer a read while degraded")
			}
			// Still degraded after more traffic and time: no subscription comes back.
			frames := len(h.frames)
			h.advance(5 * time.Second)
			for _, f := range h.frames[frames:] {
				if _, ok := f.body.(*wire.Subscribe); ok && f.from == "B" {
					t.Errorf("B subscribed while degraded: %+v", f.body)
				}
			}

			// A new connection while degraded (version 1 redials after its close) carries
			// nothing to apply.
			h.connect(a, b)
			h.advance(2 * time.Second)
			if got := b.applied()[a.origin]; got != 3 || faults.refused != 1 {
				t.Errorf("B over a new connection while degraded: applied %d of A (want 3), %d applies tried (want 1)", got, faults.refused)
			}

			// Recovery: the fault is gone, a new replica runs on the same store.
			clear(faults.fail)
			b.restart()
			h.connect(a, b)
			h.advance(2 * time.Second)
			if b.rep.Degraded() != nil {
				t.Fatalf("B still degraded after a new replica: %v", b.rep.Degraded())
			}
			b.write(put("t", "b2", "3"))
			h.advance(2 * time.Second)
			if got := b.applied()[a.origin]; got != 8 {
				t.Errorf("B applied %d of A after recovery, want 8", got)
			}
			if got := a.applied()[b.origin]; got != 2 {
				t.Errorf("A applied %d of B after recovery, want 2", got)
			}
			if c := b.rep.Counters(); c.TxnsApplied != 5+1 || (version >= 2 && c.DuplicatesReceived != 0) {
				t.Errorf("B after recovery: %d applied (want A's 5 and its own write), %d duplicates", c.TxnsApplied, c.DuplicatesReceived)
			}
			an, ad := a.digest("t")
			bn, bd := b.digest("t")
			if an != 10 || an != bn || ad != bd {
				t.Errorf("digests differ after recovery: A %d %s, B %d %s", an, ad, bn, bd)
			}
		})
	}
}

// TestStorageSyncFailure: a storage error the shell reports (a failed group-commit sync, or
// its free-space guard) degrades the replica with its code; any other error stops it.
func TestStorageSyncFailure(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{HoldUnsynced: true})
	a.write(put("t", "k", "v"))
	err := a.rep.StorageFailed(a.clock(), fmt.Errorf("group commit: %w",
		&store.StorageError{Code: wire.CodeStorageFailed, Op: "sync", Err: errors.New("fsync: input/output error")}))
	if err != nil {
		t.Fatalf("StorageFailed: %v", err)
	}
	if se := a.rep.Degraded(); se == nil || se.Code != wire.CodeStorageFailed || se.Op != "sync" {
		t.Fatalf("degraded for %v, want storage-failed in sync", se)
	}
	if _, err := a.rep.Write(a.clock(), []wire.Op{put("t", "k2", "v")}); storageCode(err) != wire.CodeStorageFailed {
		t.Errorf("a write while degraded: %v, want storage-failed", err)
	}
	// The first error stays the one reported.
	_ = a.rep.StorageFailed(a.clock(), &store.StorageError{Code: wire.CodeStorageFull, Op: "free-space guard"})
	if se := a.rep.Degraded(); se.Code != wire.CodeStorageFailed {
		t.Errorf("degraded for %v after a second error, want the first", se)
	}
	if err := a.rep.StorageFailed(a.clock(), errors.New("not a storage error")); !errors.Is(err, replica.ErrStopped) {
		t.Errorf("a plain error: %v, want the replica stopped", err)
	}
}

// TestStoragePurgeFailure: a retention step whose purge fails for the storage degrades the
// replica, and no later step runs while it is degraded.
func TestStoragePurgeFailure(t *testing.T) {
	h := newHarness(t)
	a := h.addNode("A", replica.Config{RetainAge: time.Second})
	faults := a.withFaults()
	for i := range 4 {
		a.write(put("t", fmt.Sprint("k", i), "v"))
	}
	faults.fail["purge"] = wire.CodeStorageFull
	h.advance(3 * time.Second)
	if se := a.rep.Degraded(); se == nil || se.Op != "purge" {
		t.Fatalf("degraded for %v, want the purge's error", se)
	}
	if faults.refused != 1 {
		t.Errorf("%d purges refused, want 1: no retention step runs while degraded", faults.refused)
	}
	clear(faults.fail)
	a.restart()
	h.advance(3 * time.Second)
	if a.rep.Degraded() != nil || a.rep.Counters().EntriesPurged == 0 {
		t.Errorf("after recovery: degraded %v, %d entries purged", a.rep.Degraded(), a.rep.Counters().EntriesPurged)
	}
}

// TestStorageDegradedByInputClosesAtOnce: an input that meets a full disk (a local write,
// publishing a map, releasing a removed peer's holds) degrades the replica, which closes
// its version-1 connection. The connection is gone within that input: its close
// (going-away) is in the input's Output and the replica no longer lists it, so a message
// the peer sent meanwhile, which a shell may deliver before it has taken that Output, is
// answered ErrUnknownConn (the shells pass over it), never refused by the closed session.
// The peer then learns the close.
func TestStorageDegradedByInputClosesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name, op string
		input    func(b *node) error
	}{
		{"write", "apply", func(b *node) error {
			_, err := b.rep.Write(b.clock(), []wire.Op{put("t", "b0", "1")})
			return err
		}},
		{"publish", "control", func(b *node) error {
			_, err := b.rep.PublishMap(b.clock(), mapDoc(1, "", "A", "B"))
			return err
		}},
		{"release-holds", "holds", func(b *node) error { return b.rep.ReleaseHolds("C") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			a := h.addNode("A", replica.Config{})
			b := h.addNode("B", replica.Config{MaxVersion: 1})
			faults := b.withFaults()
			l := h.connect(a, b)
			a.write(put("t", "k0", "1"))
			h.advance(time.Second)
			if got := b.applied()[a.origin]; got != 1 {
				t.Fatalf("B applied %d of A before the fault, want 1", got)
			}
			bEnd := l.listener
			if s := b.rep.Session(bEnd.id); s == nil || s.Handshake().Version != 1 {
				t.Fatalf("B's connection to A is not at version 1")
			}

			a.write(put("t", "k1", "2")) // its TXN1 waits in A's Output: in flight to B
			faults.fail[tc.op] = wire.CodeStorageFull
			if err := tc.input(b); err != nil && storageCode(err) != wire.CodeStorageFull {
				t.Fatalf("B's %s on a full disk: %v, want storage-full or nil", tc.name, err)
			}
			if se := b.rep.Degraded(); se == nil || se.Op != tc.op {
				t.Fatalf("B degraded for %v, want storage-full in %s", se, tc.op)
			}
			if slices.Contains(b.rep.Conns(), bEnd.id) {
				t.Errorf("B still lists its connection to A after the input that closed it")
			}
			closed := false
			for _, out := range b.rep.Output() {
				if out.Conn == bEnd.id && out.Closed && out.Err != nil && out.Err.Code == wire.CodeGoingAway && len(out.Messages) > 0 {
					closed = true
					for _, msg := range out.Messages { // the CLOSE goes to A as it would
						h.check(a, a.rep.Receive(a.clock(), l.dialer.id, msg))
					}
				}
			}
			if !closed {
				t.Errorf("B's Output after the input holds no going-away close of its connection to A")
			}
			inFlight := 0
			for _, out := range a.rep.Output() {
				if out.Conn != l.dialer.id {
					continue
				}
				for _, msg := range out.Messages {
					inFlight++
					if err := b.rep.Receive(b.clock(), bEnd.id, msg); !errors.Is(err, replica.ErrUnknownConn) {
						t.Errorf("B answered a message A sent before the close with %v, want ErrUnknownConn", err)
					}
				}
			}
			if inFlight == 0 {
				t.Fatal("A had nothing in flight to B: the test delivers nothing")
			}
			if got := b.applied()[a.origin]; got != 1 {
				t.Errorf("B applied %d of A while degraded, want 1", got)
			}
			if slices.Contains(a.rep.Conns(), l.dialer.id) {
				t.Errorf("A still lists its connection to B after B's close")
			}
		})
	}
}
