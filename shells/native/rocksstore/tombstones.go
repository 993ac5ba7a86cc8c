package rocksstore

import (
	"fmt"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
)

// Tombstone collection: retention drops a tombstone once every origin passed it
// (docs/design.md §14); the store deletes it in one batch if it is still the record's version.

// DropTombstones deletes, in one batch, each listed tombstone that is still its record's
// version.
func (s *Store) DropTombstones(ts []store.Record) error {
	if err := s.Failed(); err != nil {
		return err // latched (latch.go)
	}
	var drop []store.Record
	for _, t := range ts {
		cur, found, err := s.Get(t.Table, t.Key)
		if err != nil {
			return err
		}
		if found && cur.Deleted && cur.HLC == t.HLC && cur.Origin == t.Origin {
			drop = append(drop, t)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	emptied, err := s.deleteRecords(wb, drop, nil)
	if err != nil {
		return err
	}
	for _, t := range emptied {
		wb.Delete(key(pTable, t))
	}
	if err := s.write("drop-tombstones", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: dropping tombstones: %w", err)
	}
	return nil
}
