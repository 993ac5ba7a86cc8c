package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"plait/protocol/replica"
	"plait/protocol/store"
	"plait/protocol/wire"
	"plait/shells/native/rocksstore"
)

// Degraded storage, the shell's part (docs/design.md §18): a free-space guard checked
// before the loop runs a batch of inputs and before a sync, a ballast file that keeps
// room for RocksDB to close and reopen in, and the recovery: once space is back, the
// store is closed and opened again and a new replica is built on it. The replica decides
// what degraded means (store.StorageError); this file only measures and reopens.

// ballastName is the ballast file in the data directory (RocksDB ignores files it did
// not make).
const ballastName = "plait-reserve"

// DefaultStorageReserve is --storage-reserve's bound: the reserve is this, or an eighth of
// a smaller file system.
const DefaultStorageReserve = 16 << 20

// Recovery's backoff: the first retry after a second, doubling to 30 s.
const (
	storageRetryMin = time.Second
	storageRetryMax = 30 * time.Second
)

// bgCheckEvery is how often the guard asks RocksDB whether its background work failed.
const bgCheckEvery = time.Second

// The defaults of Config.FreeSpaceEvery and FreeSpaceBytes: the guard measures the free
// space again at least every 50 ms and every MiB the store writes, however many inputs
// come between (a statfs is a system call, and the loop guards each input).
const (
	DefaultFreeSpaceEvery = 50 * time.Millisecond
	DefaultFreeSpaceBytes = 1 << 20
)

// storageState is the shell's view of a degradation (loop only).
type storageState struct {
	active  bool
	next    time.Time // the next recovery attempt
	backoff time.Duration
	retries uint64
}

// freeSpace is the guard's last measure of the free space: when, what it found, and the
// store's Written then.
type freeSpace struct {
	at          time.Time // zero: measure at the next guard
	avail, size uint64
	written     uint64
}

// fresh reports whether the last measure still holds at now, with the store at written:
// taken less than FreeSpaceEvery ago, less than FreeSpaceBytes written since, and the free
// space left after what was written since, counted twice (the log now, a flushed table
// later), still at or above the reserve r.
func (f freeSpace) fresh(now time.Time, written, r uint64, every time.Duration, bytes uint64) bool {
	since := written - f.written
	return !f.at.IsZero() && now.Sub(f.at) < every && since < bytes && f.avail >= r && f.avail-r >= 2*since
}

// free is the bytes unprivileged writers may still use on the data directory's file
// system, and its size.
func (n *Node) free() (avail, size uint64, err error) {
	if n.cfg.statfs != nil {
		return n.cfg.statfs()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.cfg.DataDir, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// reserve is the reserve in bytes: --storage-reserve, or its default for the file system.
func (n *Node) reserve() uint64 {
	if n.cfg.StorageReserve != 0 {
		return n.reserveOf(0)
	}
	_, size, err := n.free()
	if err != nil {
		size = 0
	}
	return n.reserveOf(size)
}

// reserveOf is the reserve on a file system of size bytes (0: unknown).
func (n *Node) reserveOf(size uint64) uint64 {
	switch {
	case n.cfg.StorageReserve != 0:
		return uint64(max(n.cfg.StorageReserve, 0))
	case size == 0:
		return DefaultStorageReserve
	}
	return min(DefaultStorageReserve, size/8)
}

// placeBallast creates the ballast file of the reserve's size, allocated (fallocate), so
// that releasing it gives the space back. Failing to place it is not an error: the guard
// degrades the node when space is short anyway.
func (n *Node) placeBallast() {
	r := n.reserve()
	if r == 0 {
		return
	}
	p := filepath.Join(n.cfg.DataDir, ballastName)
	if fi, err := os.Stat(p); err == nil && uint64(fi.Size()) == r {
		return
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		n.log.Warn("storage reserve", "err", err)
		return
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, int64(r)); err != nil {
		_ = os.Remove(p) // a partial ballast only hides space
		n.log.Warn("storage reserve: not placed", "bytes", r, "err", err)
	}
}

func (n *Node) releaseBallast() { _ = os.Remove(filepath.Join(n.cfg.DataDir, ballastName)) }

// guard degrades the node when the free space is below the reserve, before RocksDB itself
// runs out: RocksDB 7.8 may abort the process on a write that meets a full file system
// (rocksstore's latch.go), so the guard, not the latch, is what keeps it alive then. It
// reports whether the storage may be written. The loop runs it before each input, so what
// RocksDB may write past the check is one input's: the reserve must exceed that. It asks
// the file system (statfs) only when its last measure no longer holds (freeSpace.fresh):
// after FreeSpaceEvery, after FreeSpaceBytes written, or as soon as what was written since
// could have brought the free space below the reserve.
func (n *Node) guard() bool {
	if n.rep.Degraded() != nil {
		return false
	}
	// RocksDB's own background work (flushes, compactions) fails out of sight of any
	// write's return: it is asked once a second (a property read), whatever the reserve.
	now := n.storageNow()
	if now.Sub(n.bgCheckedAt) >= bgCheckEvery {
		n.bgCheckedAt = now
		if err := n.store.BackgroundError(); err != nil {
			n.check(n.rep.StorageFailed(now, err))
			n.watchStorage()
			return false
		}
	}
	if n.cfg.StorageReserve < 0 {
		return true
	}
	written := n.store.Written()
	if n.space.fresh(now, written, n.reserveOf(n.space.size), n.cfg.FreeSpaceEvery, n.cfg.FreeSpaceBytes) {
		return true
	}
	avail, size, err := n.free()
	r := n.reserveOf(size)
	if err == nil && avail >= r {
		n.space = freeSpace{at: now, avail: avail, size: size, written: written}
		return true
	}
	n.space = freeSpace{}
	code := wire.CodeStorageFailed // the file system cannot be asked
	if err == nil {
		code, err = wire.CodeStorageFull, fmt.Errorf("%d bytes free on %s, below the reserve of %d", avail, n.cfg.DataDir, r)
	}
	n.check(n.rep.StorageFailed(time.Now(), &store.StorageError{Code: code, Op: "free-space guard", Err: err}))
	n.watchStorage()
	return false
}

// watchStorage follows the replica's degradation: on entering it, it answers the writes
// waiting for a sync with the storage error (they may or may not survive, like a write
// whose answer was lost), releases the ballast and schedules a recovery; at the
// scheduled time, it recovers when the space is back, or waits twice as long.
func (n *Node) watchStorage() {
	se := n.rep.Degraded()
	if se == nil {
		return
	}
	now := n.storageNow()
	if !n.storage.active {
		n.storage.active = true
		n.storage.backoff = storageRetryMin
		n.storage.next = now.Add(n.storage.backoff)
		n.degradedCode.Store(string(se.Code))
		for _, w := range n.waiters {
			w.reply <- writeResult{err: se}
		}
		n.waiters = nil
		n.releaseBallast()
		n.log.Error("storage degraded: local writes refused, replication paused", "code", se.Code, "err", se)
	}
	if now.Before(n.storage.next) || n.syncing || n.compacting {
		return
	}
	avail, _, err := n.free()
	if need := 3 * n.reserve(); err != nil || avail < need {
		n.storage.retries++
		n.storage.backoff = min(2*n.storage.backoff, storageRetryMax)
		n.storage.next = now.Add(n.storage.backoff)
		return
	}
	n.recoverStorage()
}

// storageNow is the clock of the recovery's schedule (Config.storageClock in tests).
func (n *Node) storageNow() time.Time {
	if n.cfg.storageClock != nil {
		return n.cfg.storageClock()
	}
	return time.Now()
}

// recoverStorage closes the store, opens it again (its write-ahead log replayed) and builds
// a new replica on it: the store is the truth, so nothing acknowledged is lost and nothing
// is applied twice. Every connection is dropped (the peers and the dialers redial). A
// store that does not open again stops the node.
func (n *Node) recoverStorage() {
	traffic := n.rep.Traffic() // the peers' traffic counters carry over to the new replica: they never go back
	for id, c := range n.conns {
		c.close()
		delete(n.conns, id)
	}
	n.releaseSnapshots() // RocksDB snapshots of the store closed here
	n.store.Close()
	n.store = nil
	store, err := rocksstore.Open(n.cfg.DataDir, store.Identity{}, n.cfg.storeOptions())
	var rep *replica.Replica
	if err == nil {
		rep, err = replica.New(n.replicaConfig(), store)
		if err != nil {
			store.Close()
		}
	}
	if err != nil {
		n.err = errors.Join(replica.ErrStopped, fmt.Errorf("node: reopening the store after degraded storage: %w", err))
		n.log.Error("storage recovery failed; the node stops", "err", err)
		n.cancel()
		return
	}
	rep.AddTraffic(traffic)
	n.store, n.rep = store, rep
	n.compacted = 0
	n.storage = storageState{}
	n.space = freeSpace{} // a new store counts its writes from 0
	n.degradedCode.Store("")
	n.placeBallast()
	n.log.Info("storage recovered: the store reopened, replication resumes")
}

// StorageState is "" while the storage is fine, else the code it is degraded for. Safe
// from any goroutine (GET /healthz answers without the loop).
func (n *Node) StorageState() wire.Code {
	s, _ := n.degradedCode.Load().(string)
	return wire.Code(s)
}
