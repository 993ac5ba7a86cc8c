package rocksstore_test

import (
	"errors"
	"strings"
	"testing"

	"plait/protocol/store"
	"plait/protocol/store/storetest"
	"plait/shells/native/rocksstore"
)

func open(t *testing.T, dir string) *rocksstore.Store {
	t.Helper()
	s, err := rocksstore.Open(dir, storetest.Identity, rocksstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStore runs the Store suite of the in-memory store against RocksDB.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := open(t, t.TempDir())
		t.Cleanup(s.Close)
		return s
	})
}

// TestStoreReopen closes the database without Sync and opens the directory again: every
// Apply that returned is there (the write-ahead log), as after kill -9.
func TestStoreReopen(t *testing.T) {
	o, r := reopenable()
	storetest.RunReopen(t, o, r)
}

// reopenable is the open and reopen of RunReopen and RunReseedReopen: a store in a new
// directory, and the same directory opened again after a Close without Sync.
func reopenable() (func(t *testing.T) store.Store, func(t *testing.T, s store.Store) store.Store) {
	var dir string
	return func(t *testing.T) store.Store {
			dir = t.TempDir()
			return open(t, dir)
		}, func(t *testing.T, s store.Store) store.Store {
			s.(*rocksstore.Store).Close()
			again := open(t, dir)
			t.Cleanup(again.Close)
			return again
		}
}

// TestReseedReopen: a reseed is in the directory when it is opened again.
func TestReseedReopen(t *testing.T) {
	o, r := reopenable()
	storetest.RunReseedReopen(t, o, r)
}

// TestOpenHeldDirectory: a data directory that is open already is refused with ErrInUse,
// whose message says another plait process holds it rather than RocksDB's lock error; once
// closed it opens again.
func TestOpenHeldDirectory(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	_, err := rocksstore.Open(dir, storetest.Identity, rocksstore.Options{})
	if !errors.Is(err, rocksstore.ErrInUse) || !strings.Contains(err.Error(), "held open by another plait process") ||
		strings.Contains(err.Error(), "IO error") {
		t.Fatalf("a second open of %s: %v; want ErrInUse saying another plait process holds it", dir, err)
	}
	s.Close()
	open(t, dir).Close()
}
