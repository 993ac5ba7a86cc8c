package sim

import (
	"errors"
	"time"

	"plait/protocol/store"
	"plait/protocol/wire"
)

// A full disk in the simulator: while a node's disk is full, every write and sync of its
// store fails with a StorageError (storage-full), as the RocksDB store's do once its file
// system is full or its free-space guard trips, and reads go on. The node's replica
// degrades (docs/design.md §18); when the disk has room again the node recovers as the
// native shell does: a new replica on the same store (the RocksDB store is closed and
// opened again, which loses nothing Apply wrote).

var errDiskFull = errors.New("sim: no space left on device")

// diskFull is the error of a write or sync of a node whose disk is full, nil otherwise.
func (s *recordingStore) diskFull(op string) error {
	if !s.full {
		return nil
	}
	return &store.StorageError{Code: wire.CodeStorageFull, Op: op, Err: errDiskFull}
}

// FillDisk fills a node's disk for d: its store's writes fail with storage-full, and the
// node degrades at its next write. After d the space is back and, if the node degraded,
// it recovers (a new replica on its store); a node that crashed meanwhile restarts as
// scheduled, on a store that writes again.
func (c *Cluster) FillDisk(node string, d time.Duration) {
	n := c.nodes[node]
	c.trace("%s: disk full for %s", node, d)
	n.Store.full = true
	c.schedule(c.now.Add(d), func() {
		n.Store.full = false
		c.trace("%s: disk has room again", node)
		if n.Rep != nil && n.Rep.Degraded() != nil {
			n.Recoveries++
			_ = c.Crash(node) // it runs: not refused
			_ = c.Restart(node, n.MaxVersion)
		}
	})
}

func (s *recordingStore) Sync() error {
	if err := s.diskFull("sync"); err != nil {
		return err
	}
	s.durable = s.Store.Clone()
	return s.Store.Sync()
}

func (s *recordingStore) Purge(p *store.Purge) error {
	if err := s.diskFull("purge"); err != nil {
		return err
	}
	if err := s.Store.Purge(p); err != nil {
		return err
	}
	s.purged = append(s.purged, p.Logs...) // checked against the holds after the input (checkPurges)
	return nil
}

func (s *recordingStore) PutHolds(hs []store.Hold) error {
	if err := s.diskFull("holds"); err != nil {
		return err
	}
	return s.Store.PutHolds(hs)
}

func (s *recordingStore) DeleteHolds(peer string) error {
	if err := s.diskFull("holds"); err != nil {
		return err
	}
	return s.Store.DeleteHolds(peer)
}

func (s *recordingStore) DeleteHold(peer string, origin wire.OriginID) error {
	if err := s.diskFull("holds"); err != nil {
		return err
	}
	return s.Store.DeleteHold(peer, origin)
}

func (s *recordingStore) DropTombstones(ts []store.Record) error {
	if err := s.diskFull("tombstones"); err != nil {
		return err
	}
	return s.Store.DropTombstones(ts)
}

func (s *recordingStore) DropTable(table []byte) (records, bytes uint64, err error) {
	if err := s.diskFull("drop-table"); err != nil {
		return 0, 0, err
	}
	return s.Store.DropTable(table)
}

func (s *recordingStore) SetPeerCursor(peer wire.OriginID, pos uint64) error {
	if err := s.diskFull("peer-cursor"); err != nil {
		return err
	}
	return s.Store.SetPeerCursor(peer, pos)
}

func (s *recordingStore) PutControl(key string, value []byte) error {
	if err := s.diskFull("control"); err != nil {
		return err
	}
	if err := s.Store.PutControl(key, value); err != nil {
		return err
	}
	// Synced by itself (the store contract): what a power loss keeps has it too.
	return s.durable.PutControl(key, value)
}
