package rocksstore

import (
	"fmt"

	"github.com/linxGnu/grocksdb"

	"plait/protocol/store"
)

// Repair writes record versions as they are, around the log (anti-entropy): the records,
// their tables' markers and the record HLC, in one write.
func (s *Store) Repair(recs []store.Record) error {
	if err := s.Failed(); err != nil {
		return err // latched (latch.go)
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	tops := s.putRecords(wb, recs, s.tops())
	if err := s.write("repair", s.wo, wb); err != nil {
		return fmt.Errorf("rocksstore: writing %d repaired records: %w", len(recs), err)
	}
	s.setTops(tops)
	return nil
}
