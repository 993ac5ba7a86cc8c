package rocksstore

import (
	"errors"
	"testing"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
	"plait/protocol/store/storetest"
	"plait/protocol/wire"
)

// wantLatched checks that every write and sync of s returns err, the latched error,
// without calling RocksDB, and that reads go on.
func wantLatched(t *testing.T, s *Store, err error, next *store.Batch) {
	t.Helper()
	calls := s.dbWrites.Load()
	var first *store.StorageError
	if !errors.As(err, &first) {
		t.Fatalf("the failure %v is not a StorageError", err)
	}
	same := func(what string, err error) {
		t.Helper()
		var se *store.StorageError
		if !errors.As(err, &se) || se != first {
			t.Errorf("%s after the failure: %v, want the latched %v", what, err, first)
		}
	}
	_, aerr := s.Apply(next)
	same("Apply", aerr)
	same("Sync", s.Sync())
	same("SetPeerCursor", s.SetPeerCursor(storetest.Origin(0xb2), 9))
	same("PutHolds", s.PutHolds([]store.Hold{{Peer: "P", Origin: next.Origin, Seq: 1}}))
	same("DeleteHolds", s.DeleteHolds("P"))
	same("Purge", s.Purge(&store.Purge{Logs: []store.PurgeLog{{Origin: next.Origin, To: 1}}}))
	same("PutDialPeer", s.PutDialPeer(DialPeer{Name: "P", URL: "ws://127.0.0.1:1"}))
	same("PutControl", s.PutControl("cluster-map", []byte(`{"generation":1}`)))
	same("DropTombstones", s.DropTombstones([]store.Record{{Table: []byte("t"), Key: []byte("k1"), Deleted: true}}))
	same("ApplyCopy", s.ApplyCopy(&store.CopyBatch{State: store.CopyState{Peer: "P"}}))
	same("Failed", s.Failed())
	if got := s.dbWrites.Load(); got != calls {
		t.Errorf("%d writes handed to RocksDB after the failure, want none", got-calls)
	}
	if _, err := s.Entry(next.Origin, 1); err != nil {
		t.Errorf("a read after the failure: %v", err)
	}
}

// TestLatchAfterAFailedWrite: once a write fails (here one RocksDB refuses: a synced
// write without the log), every later write and sync returns that error without calling
// RocksDB, reads go on, and the store opened again takes writes.
func TestLatchAfterAFailedWrite(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	chain := storetest.Chain(t, storetest.Origin(0xa1), 3)
	if _, err := s.Apply(chain[0]); err != nil {
		t.Fatal(err)
	}
	bad := grocksdb.NewDefaultWriteOptions()
	defer bad.Destroy()
	bad.SetSync(true)
	bad.DisableWAL(true) // RocksDB refuses a synced write without its log
	err = s.put("apply", bad, []byte{pHLC}, u64(1))
	var se *store.StorageError
	if !errors.As(err, &se) || se.Code != wire.CodeStorageFailed || se.Op != "apply" {
		t.Fatalf("the refused write: %v, want storage-failed in apply", err)
	}
	wantLatched(t, s, err, chain[1])
	s.Close()
	s, err = Open(dir, store.Identity{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Failed() != nil {
		t.Errorf("a reopened store is latched: %v", s.Failed())
	}
	if _, err := s.Apply(chain[1]); err != nil {
		t.Errorf("Apply on the reopened store: %v", err)
	}
}

// TestClassify: RocksDB's texts for a full file system and for other I/O errors.
func TestClassify(t *testing.T) {
	for msg, want := range map[string]wire.Code{
		"IO error: No space left on device: While appending to file: /d/000004.log: No space left on device": wire.CodeStorageFull,
		"IO error: Disk quota exceeded: While appending to file: /d/000004.log":                              wire.CodeStorageFull,
		"IO error: While fsync: a file descriptor: Input/output error":                                       wire.CodeStorageFailed,
		"Invalid argument: Sync writes has to enable WAL.":                                                   wire.CodeStorageFailed,
	} {
		if got := classify("apply", errors.New(msg)).Code; got != want {
			t.Errorf("%q: %s, want %s", msg, got, want)
		}
	}
}

// TestBackgroundErrorHealthy: a store whose background work has not failed reports no
// background error (RocksDB's own property, read for real).
func TestBackgroundErrorHealthy(t *testing.T) {
	s, err := Open(t.TempDir(), storetest.Identity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, b := range storetest.Chain(t, storetest.Origin(0xa1), 3) {
		if _, err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	s.CompactLogs()
	if err := s.BackgroundError(); err != nil {
		t.Errorf("a healthy store: %v", err)
	}
	if n, ok := s.db.GetIntProperty("rocksdb.background-errors"); !ok || n != 0 {
		t.Errorf("rocksdb.background-errors = %d, %v; want a readable 0", n, ok)
	}
}
