package rocksstore

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// The latch: after the first write or sync that fails, the store writes nothing more
// through its RocksDB handle. RocksDB 7.8's write-ahead-log writer, once it has seen an I/O
// error (a full file system, typically in the group commit's FlushWAL), fails an
// assertion on the next write through it (WritableFileWriter's "sync_without_flush_called_",
// with Debian's build, which keeps assertions): the process aborts. The C API offers no
// DB::Resume. So the first failure is kept and every later write or sync returns it
// without calling RocksDB; reads go on. The way back is to close the store and open it
// again (the log is replayed), which the node does once space is back (docs/design.md §18).

// Failed is the storage error the store latched, nil while every write succeeded. Safe
// to call from any goroutine.
func (s *Store) Failed() error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.failed == nil {
		return nil // not a typed nil in the interface
	}
	return s.failed
}

// guard runs one write or sync of RocksDB unless the latch is set, and sets it when the
// call fails.
func (s *Store) guard(op string, f func() error) error {
	if err := s.Failed(); err != nil {
		return err
	}
	s.dbWrites.Add(1)
	err := f()
	if err == nil {
		return nil
	}
	se := classify(op, err)
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.failed == nil {
		s.failed = se
	}
	return se
}

func (s *Store) write(op string, wo *grocksdb.WriteOptions, wb *grocksdb.WriteBatch) error {
	s.written.Add(uint64(len(wb.Data()))) // the batch's serialized form, as the log takes it (no copy)
	return s.guard(op, func() error { return s.db.Write(wo, wb) })
}

func (s *Store) put(op string, wo *grocksdb.WriteOptions, k, v []byte) error {
	s.written.Add(uint64(len(k) + len(v)))
	return s.guard(op, func() error { return s.db.Put(wo, k, v) })
}

// classify makes a failed write a store.StorageError: storage-full when the file system
// is full, storage-failed otherwise. RocksDB's errors reach Go as strings, its Status
// text, such as "IO error: No space left on device: While appending to file: ...": the
// C library's text for ENOSPC (glibc's strerror) is matched, and EDQUOT's, a quota
// being as full as a disk to the node. An errno that reaches here as one (the shell's
// own files) is matched as well.
func classify(op string, err error) *store.StorageError {
	code := wire.CodeStorageFailed
	msg := err.Error()
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		strings.Contains(msg, "No space left on device") || strings.Contains(msg, "Disk quota exceeded") {
		code = wire.CodeStorageFull
	}
	return &store.StorageError{Code: code, Op: op, Err: err}
}

// BackgroundError is a storage error when RocksDB recorded a failure of its own background
// work (a flush or a compaction: property rocksdb.background-errors), nil otherwise. Such
// a failure reaches no write's return: RocksDB sets its background error and refuses, or
// (7.8's log writer) asserts on, the writes after it. The node asks before its writes, so
// it degrades instead, and recovers by reopening the store, which clears the error.
func (s *Store) BackgroundError() error {
	if s.bgErrors != nil {
		if n := s.bgErrors(); n > 0 {
			return backgroundError(n)
		}
		return nil
	}
	if n, ok := s.db.GetIntProperty("rocksdb.background-errors"); ok && n > 0 {
		return backgroundError(n)
	}
	return nil
}

func backgroundError(n uint64) error {
	return &store.StorageError{Code: wire.CodeStorageFailed, Op: "background",
		Err: fmt.Errorf("RocksDB recorded %d background error(s): a flush or a compaction failed", n)}
}
