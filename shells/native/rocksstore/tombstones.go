package rocksstore

import (
	"fmt"
	"slices"

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
		if found && cur.Deleted && cur.Version() == t.Version() {
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

// DropTable deletes every record of table in one write: a range deletion over the table's
// keys, and its entry in the table list; the range is then compacted, so that the space
// comes back (store.Store). It counts what it deletes by scanning the table first.
func (s *Store) DropTable(table []byte) (records, bytes uint64, err error) {
	if err := s.Failed(); err != nil {
		return 0, 0, err // latched (latch.go)
	}
	prefix := tablePrefix(table)
	if err := s.each(prefix, nil, func(k, v []byte) (bool, error) {
		records++
		bytes += uint64(len(k) - len(prefix) + len(v))
		return true, nil
	}); err != nil {
		return 0, 0, err
	}
	if records == 0 {
		return 0, 0, nil
	}
	end := append(slices.Clone(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1)
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	wb.DeleteRange(prefix, end)
	wb.Delete(key(pTable, table))
	if err := s.write("drop-table", s.wo, wb); err != nil {
		return 0, 0, fmt.Errorf("rocksstore: dropping table %s: %w", table, err)
	}
	s.db.CompactRange(grocksdb.Range{Start: prefix, Limit: end})
	return records, bytes, nil
}
